DROP TABLE runtime_placements;
ALTER TABLE nodes DROP COLUMN draining;
ALTER TABLE nodes DROP COLUMN max_runtimes;
