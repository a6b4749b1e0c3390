-- The readiness warning the session's latest runtime instance reported (issue 43), so its
-- appearance, change and clearing are each told to the room once (runtime_readiness), also
-- across instances. '' when it had none.
ALTER TABLE runtime_sessions ADD COLUMN readiness_warning TEXT NOT NULL DEFAULT '';
