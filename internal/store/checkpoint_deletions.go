package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

type deletionRow struct {
	CheckpointID  uuid.UUID `db:"checkpoint_id"`
	RuntimeHostID uuid.UUID `db:"runtime_host_id"`
	Stage         string    `db:"stage"`
	CreatedAt     time.Time `db:"created_at"`
	UpdatedAt     time.Time `db:"updated_at"`
}

// GetCheckpointDeletion reads the deletion record of a checkpoint.
func (q *Q) GetCheckpointDeletion(ctx context.Context, checkpoint uuid.UUID) (domain.CheckpointDeletion, error) {
	var r deletionRow
	if err := q.get(ctx, &r, `SELECT * FROM checkpoint_deletions WHERE checkpoint_id = ?`, checkpoint); err != nil {
		return domain.CheckpointDeletion{}, fmt.Errorf("deletion of checkpoint %s: %w", checkpoint, err)
	}
	return domain.CheckpointDeletion{CheckpointID: r.CheckpointID, RuntimeHostID: r.RuntimeHostID,
		Stage: domain.DeletionStage(r.Stage), CreatedAt: utc(r.CreatedAt), UpdatedAt: utc(r.UpdatedAt)}, nil
}

// WriteCheckpointDeletion writes a deletion stage through the forward-only validator. The
// payload_removed stage also stamps the checkpoint record's payload_deleted_at (the record
// itself is never deleted).
func (q *Q) WriteCheckpointDeletion(ctx context.Context, d domain.CheckpointDeletion) (changed bool, err error) {
	d.CreatedAt, d.UpdatedAt = domain.Timestamp(d.CreatedAt), domain.Timestamp(d.UpdatedAt)
	err = q.atomic(ctx, func(q *Q) error {
		var prev *domain.CheckpointDeletion
		if cur, err := q.GetCheckpointDeletion(ctx, d.CheckpointID); err == nil {
			prev = &cur
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		ok, err := domain.CheckCheckpointDeletion(prev, d)
		if err != nil || !ok {
			return err
		}
		changed = true
		if prev == nil {
			_, err = q.exec(ctx, `
INSERT INTO checkpoint_deletions (checkpoint_id, runtime_host_id, stage, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`,
				d.CheckpointID, d.RuntimeHostID, d.Stage, d.CreatedAt, d.UpdatedAt)
			return err
		}
		if _, err := q.exec(ctx, `UPDATE checkpoint_deletions SET stage = ?, updated_at = ? WHERE checkpoint_id = ?`,
			d.Stage, d.UpdatedAt, d.CheckpointID); err != nil {
			return err
		}
		if d.Stage == domain.DeletionPayloadRemoved {
			_, err = q.exec(ctx, `UPDATE provider_checkpoints SET payload_deleted_at = ? WHERE id = ? AND payload_deleted_at IS NULL`,
				d.UpdatedAt, d.CheckpointID)
		}
		return err
	})
	if err != nil {
		return false, fmt.Errorf("write deletion of checkpoint %s: %w", d.CheckpointID, err)
	}
	return changed, nil
}

// RetentionRefusal says why a checkpoint's payload must be kept ("" when it may go): the
// newest kept generation of its host (the one a resume would restore), and any generation an
// export refers to, are retained. On-disk verification (never delete a missing or corrupt
// one: it is evidence) is the node's part.
func (q *Q) RetentionRefusal(ctx context.Context, checkpoint uuid.UUID) (string, error) {
	c, err := q.GetCheckpoint(ctx, checkpoint)
	if err != nil {
		return "", err
	}
	if c.PayloadDeletedAt != nil {
		return "", nil
	}
	var newest uuid.UUID
	if err := q.get(ctx, &newest, `
SELECT id FROM provider_checkpoints WHERE runtime_host_id = ? AND payload_deleted_at IS NULL
ORDER BY created_at DESC, id LIMIT 1`, c.RuntimeHostID); err != nil {
		return "", err
	}
	if newest == checkpoint {
		return "it is the newest checkpoint of its host, the one an exact resume restores", nil
	}
	var exports int
	if err := q.get(ctx, &exports, `SELECT COUNT(*) FROM workspace_exports WHERE checkpoint_id = ? AND deleted_at IS NULL`, checkpoint); err != nil {
		return "", err
	}
	if exports > 0 {
		return "a workspace export refers to it", nil
	}
	return "", nil
}

// CheckpointEvidence lists the host's checkpoints that continuity evidence refers to, which
// retention never offers as cleanup candidates: one a kept export was taken from, one a
// failed resume was observed against, and every one of a host a continuity reset replaced.
func (q *Q) CheckpointEvidence(ctx context.Context, host uuid.UUID) (map[uuid.UUID]bool, error) {
	var ids []uuid.UUID
	if err := q.selectAll(ctx, &ids, `
SELECT c.id FROM provider_checkpoints c WHERE c.runtime_host_id = ? AND (
  EXISTS (SELECT 1 FROM workspace_exports e WHERE e.checkpoint_id = c.id AND e.deleted_at IS NULL)
  OR EXISTS (SELECT 1 FROM provider_resume_observations o WHERE o.checkpoint_id = c.id AND o.outcome = ?)
  OR EXISTS (SELECT 1 FROM continuity_resets r WHERE r.source_runtime_host_id = c.runtime_host_id))`,
		host, domain.ResumeFailed); err != nil {
		return nil, fmt.Errorf("checkpoint evidence of host %s: %w", host, err)
	}
	out := make(map[uuid.UUID]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}
