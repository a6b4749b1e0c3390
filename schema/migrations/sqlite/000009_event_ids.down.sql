DROP INDEX room_bindings_room;
DROP INDEX room_participants_room;
DROP INDEX room_bindings_agent_room;
