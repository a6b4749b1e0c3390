-- Back to exports that reference their workspace and checkpoint. The old schema cannot hold
-- an export whose workspace is gone, so such records are deleted; a reference to a checkpoint
-- that is gone is cleared. Keep in step with ../postgres/000005_workspace_exports_outlive.down.sql.
-- The tables are rebuilt as in the up migration (see there why host_cleanup_events is set
-- aside first).

DELETE FROM workspace_exports WHERE NOT EXISTS (SELECT 1 FROM managed_workspaces w WHERE w.id = workspace_exports.workspace_id);
UPDATE workspace_exports SET checkpoint_id = NULL
WHERE checkpoint_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM provider_checkpoints c WHERE c.id = workspace_exports.checkpoint_id);

CREATE TABLE workspace_exports_old (
    id                 TEXT NOT NULL PRIMARY KEY,
    workspace_id       TEXT NOT NULL REFERENCES managed_workspaces (id),
    runtime_host_id    TEXT NOT NULL,
    runtime_session_id TEXT NOT NULL,
    checkpoint_id      TEXT REFERENCES provider_checkpoints (id),
    manifest_checksum  TEXT NOT NULL,
    bytes              INTEGER NOT NULL,
    created_at         TIMESTAMP NOT NULL,
    deleted_at         TIMESTAMP
);
INSERT INTO workspace_exports_old (id, workspace_id, runtime_host_id, runtime_session_id, checkpoint_id,
    manifest_checksum, bytes, created_at, deleted_at)
SELECT id, workspace_id, runtime_host_id, runtime_session_id, checkpoint_id,
    manifest_checksum, bytes, created_at, deleted_at FROM workspace_exports;
DROP TABLE workspace_exports;
ALTER TABLE workspace_exports_old RENAME TO workspace_exports;
CREATE INDEX workspace_exports_workspace ON workspace_exports (workspace_id, created_at);

CREATE TABLE host_cleanup_events_kept (
    operation_id TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    stage        TEXT NOT NULL,
    last_error   TEXT NOT NULL,
    recorded_at  TIMESTAMP NOT NULL
);
INSERT INTO host_cleanup_events_kept (operation_id, seq, stage, last_error, recorded_at)
SELECT operation_id, seq, stage, last_error, recorded_at FROM host_cleanup_events;
DROP TABLE host_cleanup_events;

CREATE TABLE host_cleanup_operations_old (
    id                         TEXT NOT NULL PRIMARY KEY,
    runtime_host_id            TEXT NOT NULL UNIQUE REFERENCES runtime_hosts (id),
    stage                      TEXT NOT NULL CHECK (stage IN ('prepared', 'sandbox_removed', 'root_removed', 'succeeded')),
    planned_runtime_host_bytes INTEGER NOT NULL,
    removed_runtime_host_bytes INTEGER NOT NULL,
    retained_export_bytes      INTEGER NOT NULL,
    last_error                 TEXT NOT NULL DEFAULT '',
    created_at                 TIMESTAMP NOT NULL,
    updated_at                 TIMESTAMP NOT NULL
);
INSERT INTO host_cleanup_operations_old (id, runtime_host_id, stage, planned_runtime_host_bytes,
    removed_runtime_host_bytes, retained_export_bytes, last_error, created_at, updated_at)
SELECT id, runtime_host_id, stage, planned_runtime_host_bytes,
    removed_runtime_host_bytes, retained_export_bytes, last_error, created_at, updated_at FROM host_cleanup_operations o
WHERE NOT EXISTS (SELECT 1 FROM host_cleanup_operations n WHERE n.runtime_host_id = o.runtime_host_id
    AND (n.created_at > o.created_at OR (n.created_at = o.created_at AND n.id > o.id)));
DROP TABLE host_cleanup_operations;
ALTER TABLE host_cleanup_operations_old RENAME TO host_cleanup_operations;

CREATE TABLE host_cleanup_events (
    operation_id TEXT NOT NULL REFERENCES host_cleanup_operations (id) ON DELETE CASCADE,
    seq          INTEGER NOT NULL,
    stage        TEXT NOT NULL,
    last_error   TEXT NOT NULL,
    recorded_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (operation_id, seq)
);
INSERT INTO host_cleanup_events (operation_id, seq, stage, last_error, recorded_at)
SELECT operation_id, seq, stage, last_error, recorded_at FROM host_cleanup_events_kept
WHERE operation_id IN (SELECT id FROM host_cleanup_operations);
DROP TABLE host_cleanup_events_kept;
