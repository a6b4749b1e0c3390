-- Deleting a checkpoint's payload: a forward-only record, persisted before the payload goes.
-- The checkpoint's metadata record is never deleted (its payload_deleted_at is set).
-- Keep in step with ../postgres/000004_checkpoint_deletions.up.sql.
CREATE TABLE checkpoint_deletions (
    checkpoint_id   TEXT PRIMARY KEY REFERENCES provider_checkpoints (id),
    runtime_host_id TEXT NOT NULL,
    stage           TEXT NOT NULL CHECK (stage IN ('prepared', 'payload_removed', 'succeeded')),
    created_at      TIMESTAMP NOT NULL,
    updated_at      TIMESTAMP NOT NULL
);
