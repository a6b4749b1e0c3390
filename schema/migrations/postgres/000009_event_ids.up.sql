-- Event ids (and so message seqs) come from a sequence instead of the counters row: writers
-- in different rooms no longer queue on one locked row. Ids may now commit out of order;
-- readers stop at the settled horizon (internal/store/horizon.go), so tailing "after the last
-- id" still never skips one.
CREATE SEQUENCE event_ids AS bigint MINVALUE 1 CACHE 1;
SELECT setval('event_ids', (SELECT value FROM counters WHERE name = 'events') + 1, false);
-- A binding is looked up by agent and room whether active or not (binding a room, an
-- authoritative re-add): the partial unique index covers active rows only, so that lookup
-- scanned every binding of the agent.
CREATE INDEX room_bindings_agent_room ON room_bindings (agent_id, room_id);
-- A post lists its room's participants and the owned bindings to poke by room: the only
-- indexes on room were partial (agent rows only), so every post scanned all participants and
-- bindings (with 10,000 rooms a wake took twice as long).
CREATE INDEX room_participants_room ON room_participants (room_id);
CREATE INDEX room_bindings_room ON room_bindings (room_id);
