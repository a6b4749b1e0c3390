package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

type operationRow struct {
	ID           uuid.UUID      `db:"id"`
	Kind         string         `db:"kind"`
	TargetKind   string         `db:"target_kind"`
	TargetID     string         `db:"target_id"`
	WorkflowID   string         `db:"workflow_id"`
	RunID        string         `db:"run_id"`
	UpdateID     string         `db:"update_id"`
	Status       string         `db:"status"`
	Result       sql.NullString `db:"result"`
	FailureClass string         `db:"failure_class"`
	FailureCode  string         `db:"failure_code"`
	FailureText  string         `db:"failure_text"`
	HTTPStatus   int            `db:"http_status"`
	CreatedAt    time.Time      `db:"created_at"`
	FinishedAt   *time.Time     `db:"finished_at"`
}

func (r operationRow) domain() domain.Operation {
	op := domain.Operation{ID: r.ID, Kind: domain.OperationKind(r.Kind), TargetKind: domain.TargetKind(r.TargetKind),
		TargetID: r.TargetID, WorkflowID: r.WorkflowID, RunID: r.RunID, UpdateID: r.UpdateID,
		Status: domain.OperationStatus(r.Status), FailureClass: r.FailureClass, FailureCode: r.FailureCode,
		FailureText: r.FailureText, HTTPStatus: r.HTTPStatus, CreatedAt: utc(r.CreatedAt), FinishedAt: utcPtr(r.FinishedAt)}
	if r.Result.Valid {
		op.Result = json.RawMessage(r.Result.String)
	}
	return op
}

// CreateOperation records a long operation before its workflow or update starts (intent
// first: a crash between the two leaves a record GET can still resolve by workflow id).
func (q *Q) CreateOperation(ctx context.Context, op domain.Operation) error {
	at := domain.Timestamp(op.CreatedAt)
	err := q.atomic(ctx, func(q *Q) error {
		if _, err := q.exec(ctx, `
INSERT INTO operations (id, kind, target_kind, target_id, workflow_id, run_id, update_id, status, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, op.ID, op.Kind, op.TargetKind, op.TargetID, op.WorkflowID, op.RunID,
			op.UpdateID, domain.OperationRunning, at); err != nil {
			return err
		}
		_, err := q.appendEvents(ctx, at, NewEvent(domain.EventOperationStarted, nil, nil, map[string]any{
			"operation": op.ID, "kind": op.Kind, "target_kind": op.TargetKind, "target_id": op.TargetID, "workflow_id": op.WorkflowID}))
		return err
	})
	if err != nil {
		return fmt.Errorf("create operation %s: %w", op.ID, err)
	}
	return nil
}

// SetOperationRun records the run that carries an operation once it started.
func (q *Q) SetOperationRun(ctx context.Context, id uuid.UUID, runID string) error {
	if _, err := q.exec(ctx, `UPDATE operations SET run_id = ? WHERE id = ?`, runID, id); err != nil {
		return fmt.Errorf("record the run of operation %s: %w", id, err)
	}
	return nil
}

// FinishOperation caches an operation's outcome; the first outcome recorded stays.
func (q *Q) FinishOperation(ctx context.Context, op domain.Operation) error {
	var result any
	if op.Result != nil {
		result = string(op.Result)
	}
	at := domain.Timestamp(*op.FinishedAt)
	err := q.atomic(ctx, func(q *Q) error {
		res, err := q.exec(ctx, `
UPDATE operations SET status = ?, result = ?, failure_class = ?, failure_code = ?, failure_text = ?, http_status = ?, finished_at = ?
WHERE id = ? AND status = ?`, op.Status, result, op.FailureClass, op.FailureCode, op.FailureText, op.HTTPStatus,
			at, op.ID, domain.OperationRunning)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err // already recorded: its event was told then
		}
		_, err = q.appendEvents(ctx, at, NewEvent(domain.EventOperationFinished, nil, nil, map[string]any{
			"operation": op.ID, "kind": op.Kind, "status": op.Status, "failure_class": op.FailureClass}))
		return err
	})
	if err != nil {
		return fmt.Errorf("finish operation %s: %w", op.ID, err)
	}
	return nil
}

// GetOperation reads one operation record.
func (q *Q) GetOperation(ctx context.Context, id uuid.UUID) (domain.Operation, error) {
	var r operationRow
	if err := q.get(ctx, &r, `SELECT * FROM operations WHERE id = ?`, id); err != nil {
		return domain.Operation{}, fmt.Errorf("operation %s: %w", id, err)
	}
	return r.domain(), nil
}

// RunningOperations lists the operations whose outcome is not recorded yet.
func (q *Q) RunningOperations(ctx context.Context) ([]domain.Operation, error) {
	var rows []operationRow
	if err := q.selectAll(ctx, &rows, `SELECT * FROM operations WHERE status = ? ORDER BY created_at`, domain.OperationRunning); err != nil {
		return nil, fmt.Errorf("running operations: %w", err)
	}
	out := make([]domain.Operation, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}
