-- Deleting a checkpoint's payload: a forward-only record, persisted before the payload goes.
-- The checkpoint's metadata record is never deleted (its payload_deleted_at is set).
-- Keep in step with ../sqlite/000004_checkpoint_deletions.up.sql.
CREATE TABLE checkpoint_deletions (
    checkpoint_id   UUID PRIMARY KEY REFERENCES provider_checkpoints (id),
    runtime_host_id UUID NOT NULL,
    stage           TEXT NOT NULL CHECK (stage IN ('prepared', 'payload_removed', 'succeeded')),
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL
);
