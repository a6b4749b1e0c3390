-- The host store a runtime session's host root was last used in (issue 26), recorded when
-- its runtime started: only nodes reaching that same store may take the room when its own
-- node cannot. '' is a session that never ran in a shared store.
ALTER TABLE runtime_sessions ADD COLUMN host_store TEXT NOT NULL DEFAULT '';
