package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

type hostCleanupRow struct {
	ID                      uuid.UUID `db:"id"`
	RuntimeHostID           uuid.UUID `db:"runtime_host_id"`
	Stage                   string    `db:"stage"`
	PlannedRuntimeHostBytes int64     `db:"planned_runtime_host_bytes"`
	RemovedRuntimeHostBytes int64     `db:"removed_runtime_host_bytes"`
	RetainedExportBytes     int64     `db:"retained_export_bytes"`
	LastError               string    `db:"last_error"`
	CreatedAt               time.Time `db:"created_at"`
	UpdatedAt               time.Time `db:"updated_at"`
}

func (r hostCleanupRow) domain() domain.HostCleanupOperation {
	return domain.HostCleanupOperation{
		ID: r.ID, RuntimeHostID: r.RuntimeHostID, Stage: domain.CleanupStage(r.Stage),
		PlannedRuntimeHostBytes: r.PlannedRuntimeHostBytes, RemovedRuntimeHostBytes: r.RemovedRuntimeHostBytes,
		RetainedExportBytes: r.RetainedExportBytes, LastError: r.LastError,
		CreatedAt: utc(r.CreatedAt), UpdatedAt: utc(r.UpdatedAt),
	}
}

// UpsertHostCleanup writes a host cleanup through the forward-only stage validator and
// appends an event for every accepted change in the same transaction. A second cleanup
// operation for one host fails with ErrConflict.
func (q *Q) UpsertHostCleanup(ctx context.Context, op domain.HostCleanupOperation) (changed bool, err error) {
	op.CreatedAt = domain.Timestamp(op.CreatedAt)
	op.UpdatedAt = domain.Timestamp(op.UpdatedAt)
	err = q.atomic(ctx, func(q *Q) error {
		var prev *domain.HostCleanupOperation
		if cur, err := q.GetHostCleanup(ctx, op.ID); err == nil {
			prev = &cur
		} else if !isNotFound(err) {
			return err
		}
		ok, err := domain.CheckHostCleanup(prev, op)
		if err != nil || !ok {
			return err
		}
		changed = true
		if prev == nil {
			_, err = q.exec(ctx, `
INSERT INTO host_cleanup_operations (id, runtime_host_id, stage, planned_runtime_host_bytes,
    removed_runtime_host_bytes, retained_export_bytes, last_error, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				op.ID, op.RuntimeHostID, op.Stage, op.PlannedRuntimeHostBytes, op.RemovedRuntimeHostBytes,
				op.RetainedExportBytes, op.LastError, op.CreatedAt, op.UpdatedAt)
		} else {
			_, err = q.exec(ctx, `
UPDATE host_cleanup_operations SET stage = ?, removed_runtime_host_bytes = ?, last_error = ?, updated_at = ?
WHERE id = ?`, op.Stage, op.RemovedRuntimeHostBytes, op.LastError, op.UpdatedAt, op.ID)
		}
		if err != nil {
			return err
		}
		_, err = q.exec(ctx, `
INSERT INTO host_cleanup_events (operation_id, seq, stage, last_error, recorded_at)
SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ? FROM host_cleanup_events WHERE operation_id = ?`,
			op.ID, op.Stage, op.LastError, op.UpdatedAt, op.ID)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("write host cleanup %s: %w", op.ID, err)
	}
	return changed, nil
}

// GetHostCleanup reads one cleanup operation.
func (q *Q) GetHostCleanup(ctx context.Context, id uuid.UUID) (domain.HostCleanupOperation, error) {
	var r hostCleanupRow
	if err := q.get(ctx, &r, `SELECT * FROM host_cleanup_operations WHERE id = ?`, id); err != nil {
		return domain.HostCleanupOperation{}, fmt.Errorf("get host cleanup %s: %w", id, err)
	}
	return r.domain(), nil
}

// HostCleanupEvents lists a cleanup's accepted transitions in order.
func (q *Q) HostCleanupEvents(ctx context.Context, id uuid.UUID) ([]OperationEvent, error) {
	var out []OperationEvent
	err := q.selectAll(ctx, &out, `
SELECT seq, stage AS state, '' AS detail, last_error AS error, recorded_at FROM host_cleanup_events
WHERE operation_id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("host cleanup %s events: %w", id, err)
	}
	for i := range out {
		out[i].RecordedAt = utc(out[i].RecordedAt)
	}
	return out, nil
}

func isNotFound(err error) bool { return errors.Is(err, ErrNotFound) }
