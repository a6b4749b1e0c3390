-- Event ids (and so message seqs) come from a sequence instead of the counters row: writers
-- in different rooms no longer queue on one locked row. Ids may now commit out of order;
-- readers stop at the settled horizon (internal/store/horizon.go), so tailing "after the last
-- id" still never skips one.
CREATE SEQUENCE event_ids AS bigint MINVALUE 1 CACHE 1;
SELECT setval('event_ids', (SELECT value FROM counters WHERE name = 'events') + 1, false);
