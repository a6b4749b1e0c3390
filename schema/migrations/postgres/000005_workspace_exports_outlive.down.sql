-- Back to exports that reference their workspace and checkpoint. The old schema cannot hold
-- an export whose workspace is gone, so such records are deleted; a reference to a checkpoint
-- that is gone is cleared. Keep in step with ../sqlite/000005_workspace_exports_outlive.down.sql.
DELETE FROM workspace_exports e WHERE NOT EXISTS (SELECT 1 FROM managed_workspaces w WHERE w.id = e.workspace_id);
UPDATE workspace_exports e SET checkpoint_id = NULL
WHERE checkpoint_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM provider_checkpoints c WHERE c.id = e.checkpoint_id);
DROP INDEX IF EXISTS workspace_exports_host;
ALTER TABLE workspace_exports ADD CONSTRAINT workspace_exports_workspace_id_fkey
    FOREIGN KEY (workspace_id) REFERENCES managed_workspaces (id);
ALTER TABLE workspace_exports ADD CONSTRAINT workspace_exports_checkpoint_id_fkey
    FOREIGN KEY (checkpoint_id) REFERENCES provider_checkpoints (id);

ALTER TABLE host_cleanup_operations DROP CONSTRAINT host_cleanup_operations_runtime_host_id_fkey;
ALTER TABLE host_cleanup_operations ADD CONSTRAINT host_cleanup_operations_runtime_host_id_fkey
    FOREIGN KEY (runtime_host_id) REFERENCES runtime_hosts (id);

DROP INDEX IF EXISTS one_open_cleanup_per_host;
DELETE FROM host_cleanup_operations o WHERE EXISTS (SELECT 1 FROM host_cleanup_operations n
    WHERE n.runtime_host_id = o.runtime_host_id AND (n.created_at > o.created_at OR (n.created_at = o.created_at AND n.id > o.id)));
ALTER TABLE host_cleanup_operations ADD CONSTRAINT host_cleanup_operations_runtime_host_id_key UNIQUE (runtime_host_id);
