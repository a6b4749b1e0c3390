ALTER TABLE nodes DROP COLUMN host_store;
