package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

type workspaceOpRow struct {
	ID               uuid.UUID  `db:"id"`
	WorkspaceID      uuid.UUID  `db:"workspace_id"`
	RuntimeHostID    uuid.UUID  `db:"runtime_host_id"`
	RuntimeSessionID uuid.UUID  `db:"runtime_session_id"`
	Kind             string     `db:"kind"`
	State            string     `db:"state"`
	Intent           string     `db:"intent"`
	ResultClass      string     `db:"result_class"`
	Error            string     `db:"error"`
	StartedAt        time.Time  `db:"started_at"`
	UpdatedAt        time.Time  `db:"updated_at"`
	FinishedAt       *time.Time `db:"finished_at"`
}

func (r workspaceOpRow) domain() domain.WorkspaceOperation {
	return domain.WorkspaceOperation{
		ID: r.ID, WorkspaceID: r.WorkspaceID, RuntimeHostID: r.RuntimeHostID, RuntimeSessionID: r.RuntimeSessionID,
		Kind: domain.WorkspaceOpKind(r.Kind), State: domain.WorkspaceOpState(r.State), Intent: r.Intent,
		ResultClass: r.ResultClass, Error: r.Error,
		StartedAt: utc(r.StartedAt), UpdatedAt: utc(r.UpdatedAt), FinishedAt: utcPtr(r.FinishedAt),
	}
}

// OperationEvent is one accepted transition of a forward-only record, in sequence.
type OperationEvent struct {
	Seq        int64     `db:"seq" json:"seq"`
	State      string    `db:"state" json:"state"`
	Detail     string    `db:"detail" json:"detail"`
	Error      string    `db:"error" json:"error"`
	RecordedAt time.Time `db:"recorded_at" json:"recorded_at"`
}

// UpsertWorkspaceOperation writes an operation through the forward-only validator and, in
// the same transaction, appends an event for every accepted change. An identical write
// changes nothing and reports changed=false. A second running operation on one workspace
// fails with ErrConflict.
func (q *Q) UpsertWorkspaceOperation(ctx context.Context, op domain.WorkspaceOperation) (changed bool, err error) {
	op.StartedAt = domain.Timestamp(op.StartedAt)
	op.UpdatedAt = domain.Timestamp(op.UpdatedAt)
	if op.FinishedAt != nil {
		t := domain.Timestamp(*op.FinishedAt)
		op.FinishedAt = &t
	}
	err = q.atomic(ctx, func(q *Q) error {
		var prev *domain.WorkspaceOperation
		if cur, err := q.GetWorkspaceOperation(ctx, op.ID); err == nil {
			prev = &cur
		} else if !isNotFound(err) {
			return err
		}
		ok, err := domain.CheckWorkspaceOperation(prev, op)
		if err != nil || !ok {
			return err
		}
		changed = true
		if prev == nil {
			_, err = q.exec(ctx, `
INSERT INTO workspace_operations (id, workspace_id, runtime_host_id, runtime_session_id, kind, state, intent,
    result_class, error, started_at, updated_at, finished_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				op.ID, op.WorkspaceID, op.RuntimeHostID, op.RuntimeSessionID, op.Kind, op.State, op.Intent,
				op.ResultClass, op.Error, op.StartedAt, op.UpdatedAt, op.FinishedAt)
		} else {
			_, err = q.exec(ctx, `
UPDATE workspace_operations SET state = ?, result_class = ?, error = ?, updated_at = ?, finished_at = ?
WHERE id = ?`, op.State, op.ResultClass, op.Error, op.UpdatedAt, op.FinishedAt, op.ID)
		}
		if err != nil {
			return err
		}
		_, err = q.exec(ctx, `
INSERT INTO workspace_operation_events (operation_id, seq, state, result_class, error, recorded_at)
SELECT ?, COALESCE(MAX(seq), 0) + 1, ?, ?, ?, ? FROM workspace_operation_events WHERE operation_id = ?`,
			op.ID, op.State, op.ResultClass, op.Error, op.UpdatedAt, op.ID)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("write workspace operation %s: %w", op.ID, err)
	}
	return changed, nil
}

// GetWorkspaceOperation reads one operation.
func (q *Q) GetWorkspaceOperation(ctx context.Context, id uuid.UUID) (domain.WorkspaceOperation, error) {
	var r workspaceOpRow
	if err := q.get(ctx, &r, `SELECT * FROM workspace_operations WHERE id = ?`, id); err != nil {
		return domain.WorkspaceOperation{}, fmt.Errorf("get workspace operation %s: %w", id, err)
	}
	return r.domain(), nil
}

// WorkspaceOperationEvents lists an operation's accepted transitions in order.
func (q *Q) WorkspaceOperationEvents(ctx context.Context, id uuid.UUID) ([]OperationEvent, error) {
	var out []OperationEvent
	err := q.selectAll(ctx, &out, `
SELECT seq, state, result_class AS detail, error, recorded_at FROM workspace_operation_events
WHERE operation_id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("workspace operation %s events: %w", id, err)
	}
	for i := range out {
		out[i].RecordedAt = utc(out[i].RecordedAt)
	}
	return out, nil
}
