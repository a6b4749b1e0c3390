-- The provider watchdog's recycles of a runtime session (issue 45): how many, and the last
-- one (JSON: reason, what was measured, generation, time). recycles also makes recording a
-- recycle idempotent: a retried activity finds its count already there.
ALTER TABLE runtime_sessions ADD COLUMN recycles INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runtime_sessions ADD COLUMN last_recycle TEXT;
