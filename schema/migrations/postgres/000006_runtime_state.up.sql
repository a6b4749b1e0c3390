-- What a runtime session's provider last said of itself, and a permanent start failure that
-- holds the session until something changes (issue 17). The node's adapters say which
-- provider families it can run, so a template nothing can run is refused at save.
-- Keep in step with ../sqlite/000006_runtime_state.up.sql.
ALTER TABLE runtime_sessions ADD COLUMN provider_version TEXT;
ALTER TABLE runtime_sessions ADD COLUMN failure_class TEXT;
ALTER TABLE runtime_sessions ADD COLUMN failure_reason TEXT;
ALTER TABLE runtime_sessions ADD COLUMN failed_at TIMESTAMPTZ;
CREATE INDEX runtime_sessions_failed ON runtime_sessions (failure_class) WHERE failure_class IS NOT NULL;
ALTER TABLE nodes ADD COLUMN adapters TEXT NOT NULL DEFAULT '[]';
