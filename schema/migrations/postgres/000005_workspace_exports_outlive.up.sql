-- Workspace exports outlive their workspace, host and checkpoint rows: deleting an agent
-- cascades runtime_sessions -> managed_workspaces and runtime_hosts -> provider_checkpoints,
-- and an export record (its owner triple, its checksum, whether its bytes are gone) must
-- survive that, so it keeps the ids without foreign keys. A host's cleanup record goes with
-- its host (its events already cascade from the operation).
-- Keep in step with ../sqlite/000005_workspace_exports_outlive.up.sql.
ALTER TABLE workspace_exports DROP CONSTRAINT workspace_exports_workspace_id_fkey;
ALTER TABLE workspace_exports DROP CONSTRAINT workspace_exports_checkpoint_id_fkey;
CREATE INDEX workspace_exports_host ON workspace_exports (runtime_host_id, created_at);

ALTER TABLE host_cleanup_operations DROP CONSTRAINT host_cleanup_operations_runtime_host_id_fkey;
ALTER TABLE host_cleanup_operations ADD CONSTRAINT host_cleanup_operations_runtime_host_id_fkey
    FOREIGN KEY (runtime_host_id) REFERENCES runtime_hosts (id) ON DELETE CASCADE;

-- One cleanup at a time per host; a host a restore revived after a finished cleanup may be
-- cleaned up again.
ALTER TABLE host_cleanup_operations DROP CONSTRAINT host_cleanup_operations_runtime_host_id_key;
CREATE UNIQUE INDEX one_open_cleanup_per_host ON host_cleanup_operations (runtime_host_id) WHERE stage <> 'succeeded';
