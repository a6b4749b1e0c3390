-- Keep in step with ../postgres/000006_runtime_state.up.sql (see there why).
ALTER TABLE runtime_sessions ADD COLUMN provider_version TEXT;
ALTER TABLE runtime_sessions ADD COLUMN failure_class TEXT;
ALTER TABLE runtime_sessions ADD COLUMN failure_reason TEXT;
ALTER TABLE runtime_sessions ADD COLUMN failed_at TIMESTAMP;
CREATE INDEX runtime_sessions_failed ON runtime_sessions (failure_class) WHERE failure_class IS NOT NULL;
ALTER TABLE nodes ADD COLUMN adapters TEXT NOT NULL DEFAULT '[]';
