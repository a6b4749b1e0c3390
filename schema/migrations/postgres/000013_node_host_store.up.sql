-- The host store a node's runtime-host roots are in, as "<id>:<path>" (issue 26): nodes
-- with the same one reach the same host roots, so a room whose state is all in its host
-- root can run on any of them. '' shares nothing (no --host-store, or an older worker).
ALTER TABLE nodes ADD COLUMN host_store TEXT NOT NULL DEFAULT '';
