-- Workspace exports outlive their workspace, host and checkpoint rows: deleting an agent
-- cascades runtime_sessions -> managed_workspaces and runtime_hosts -> provider_checkpoints,
-- and an export record (its owner triple, its checksum, whether its bytes are gone) must
-- survive that, so it keeps the ids without foreign keys. A host's cleanup record goes with
-- its host (its events already cascade from the operation).
-- Keep in step with ../postgres/000005_workspace_exports_outlive.up.sql.
--
-- SQLite cannot change a foreign key in place, so both tables are rebuilt. golang-migrate runs
-- this file in one transaction on a connection opened with foreign_keys(1), where
-- PRAGMA foreign_keys cannot be switched off; with foreign keys on, DROP TABLE deletes the
-- rows first and fires ON DELETE actions. workspace_exports is referenced by nothing, but
-- host_cleanup_events cascades from host_cleanup_operations: its rows are set aside and the
-- table dropped before its parent is, then recreated and refilled.

CREATE TABLE workspace_exports_new (
    id                 TEXT NOT NULL PRIMARY KEY,
    workspace_id       TEXT NOT NULL,
    runtime_host_id    TEXT NOT NULL,
    runtime_session_id TEXT NOT NULL,
    checkpoint_id      TEXT,
    manifest_checksum  TEXT NOT NULL,
    bytes              INTEGER NOT NULL,
    created_at         TIMESTAMP NOT NULL,
    deleted_at         TIMESTAMP
);
INSERT INTO workspace_exports_new (id, workspace_id, runtime_host_id, runtime_session_id, checkpoint_id,
    manifest_checksum, bytes, created_at, deleted_at)
SELECT id, workspace_id, runtime_host_id, runtime_session_id, checkpoint_id,
    manifest_checksum, bytes, created_at, deleted_at FROM workspace_exports;
DROP TABLE workspace_exports;
ALTER TABLE workspace_exports_new RENAME TO workspace_exports;
CREATE INDEX workspace_exports_workspace ON workspace_exports (workspace_id, created_at);
CREATE INDEX workspace_exports_host ON workspace_exports (runtime_host_id, created_at);

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

CREATE TABLE host_cleanup_operations_new (
    id                         TEXT NOT NULL PRIMARY KEY,
    runtime_host_id            TEXT NOT NULL REFERENCES runtime_hosts (id) ON DELETE CASCADE,
    stage                      TEXT NOT NULL CHECK (stage IN ('prepared', 'sandbox_removed', 'root_removed', 'succeeded')),
    planned_runtime_host_bytes INTEGER NOT NULL,
    removed_runtime_host_bytes INTEGER NOT NULL,
    retained_export_bytes      INTEGER NOT NULL,
    last_error                 TEXT NOT NULL DEFAULT '',
    created_at                 TIMESTAMP NOT NULL,
    updated_at                 TIMESTAMP NOT NULL
);
INSERT INTO host_cleanup_operations_new (id, runtime_host_id, stage, planned_runtime_host_bytes,
    removed_runtime_host_bytes, retained_export_bytes, last_error, created_at, updated_at)
SELECT id, runtime_host_id, stage, planned_runtime_host_bytes,
    removed_runtime_host_bytes, retained_export_bytes, last_error, created_at, updated_at FROM host_cleanup_operations;
DROP TABLE host_cleanup_operations;
ALTER TABLE host_cleanup_operations_new RENAME TO host_cleanup_operations;
-- One cleanup at a time per host; a host a restore revived after a finished cleanup may be
-- cleaned up again.
CREATE UNIQUE INDEX one_open_cleanup_per_host ON host_cleanup_operations (runtime_host_id) WHERE stage <> 'succeeded';

CREATE TABLE host_cleanup_events (
    operation_id TEXT NOT NULL REFERENCES host_cleanup_operations (id) ON DELETE CASCADE,
    seq          INTEGER NOT NULL,
    stage        TEXT NOT NULL,
    last_error   TEXT NOT NULL,
    recorded_at  TIMESTAMP NOT NULL,
    PRIMARY KEY (operation_id, seq)
);
INSERT INTO host_cleanup_events (operation_id, seq, stage, last_error, recorded_at)
SELECT operation_id, seq, stage, last_error, recorded_at FROM host_cleanup_events_kept;
DROP TABLE host_cleanup_events_kept;
