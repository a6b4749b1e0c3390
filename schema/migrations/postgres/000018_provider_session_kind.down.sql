ALTER TABLE runtime_sessions DROP COLUMN provider_session_kind;
