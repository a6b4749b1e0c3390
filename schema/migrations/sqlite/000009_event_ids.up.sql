-- Postgres moves event ids to a sequence here; SQLite has one writer at a time and keeps the
-- counters row. The migration exists so both dialects share version numbers.
SELECT 1;
