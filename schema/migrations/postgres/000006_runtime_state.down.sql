-- Keep in step with ../sqlite/000006_runtime_state.down.sql.
ALTER TABLE nodes DROP COLUMN adapters;
DROP INDEX runtime_sessions_failed;
ALTER TABLE runtime_sessions DROP COLUMN failed_at;
ALTER TABLE runtime_sessions DROP COLUMN failure_reason;
ALTER TABLE runtime_sessions DROP COLUMN failure_class;
ALTER TABLE runtime_sessions DROP COLUMN provider_version;
