ALTER TABLE runtime_sessions DROP COLUMN last_recycle;
ALTER TABLE runtime_sessions DROP COLUMN recycles;
