ALTER TABLE runtime_sessions DROP COLUMN readiness_warning;
