ALTER TABLE runtime_sessions DROP COLUMN host_store;
