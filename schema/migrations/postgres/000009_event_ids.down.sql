DROP INDEX room_bindings_room;
DROP INDEX room_participants_room;
DROP INDEX room_bindings_agent_room;
UPDATE counters SET value = GREATEST(value,
  (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM event_ids)) WHERE name = 'events';
DROP SEQUENCE event_ids;
