-- What kind of provider thread a runtime session is bound to (transport and CLI, issue 44):
-- a room switched to another provider starts a new thread instead of asking the new CLI to
-- resume the old one's. NULL: bound before this was recorded (learned at its next resume).
ALTER TABLE runtime_sessions ADD COLUMN provider_session_kind TEXT;
