-- Postgres moves event ids to a sequence here; SQLite has one writer at a time and keeps the
-- counters row.
-- A binding is looked up by agent and room whether active or not (binding a room, an
-- authoritative re-add): the partial unique index covers active rows only, so that lookup
-- scanned every binding of the agent (10,000 rooms of one agent: a bind took 10 ms more).
CREATE INDEX room_bindings_agent_room ON room_bindings (agent_id, room_id);
-- A post lists its room's participants and the owned bindings to poke by room: the only
-- indexes on room were partial (agent rows only), so every post scanned all participants and
-- bindings (with 10,000 rooms a wake took twice as long).
CREATE INDEX room_participants_room ON room_participants (room_id);
CREATE INDEX room_bindings_room ON room_bindings (room_id);
