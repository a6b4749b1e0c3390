package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

type managedWorkspaceRow struct {
	ID               uuid.UUID `db:"id"`
	RuntimeHostID    uuid.UUID `db:"runtime_host_id"`
	RuntimeSessionID uuid.UUID `db:"runtime_session_id"`
	Source           string    `db:"source"`
	HostPath         *string   `db:"host_path"`
	State            string    `db:"state"`
	CreatedAt        time.Time `db:"created_at"`
	UpdatedAt        time.Time `db:"updated_at"`
}

func (r managedWorkspaceRow) domain() domain.ManagedWorkspace {
	w := domain.ManagedWorkspace{ID: r.ID, RuntimeHostID: r.RuntimeHostID, RuntimeSessionID: r.RuntimeSessionID,
		Source: domain.WorkspaceSource(r.Source), State: domain.WorkspaceState(r.State),
		CreatedAt: utc(r.CreatedAt), UpdatedAt: utc(r.UpdatedAt)}
	if r.HostPath != nil {
		w.HostPath = *r.HostPath
	}
	return w
}

// GetManagedWorkspace reads one managed workspace (its id is its runtime session's).
func (q *Q) GetManagedWorkspace(ctx context.Context, id uuid.UUID) (domain.ManagedWorkspace, error) {
	var r managedWorkspaceRow
	if err := q.get(ctx, &r, `SELECT * FROM managed_workspaces WHERE id = ?`, id); err != nil {
		return domain.ManagedWorkspace{}, fmt.Errorf("managed workspace %s: %w", id, err)
	}
	return r.domain(), nil
}

// ListManagedWorkspaces lists a runtime host's managed workspaces, oldest first; uuid.Nil
// lists every host's.
func (q *Q) ListManagedWorkspaces(ctx context.Context, host uuid.UUID) ([]domain.ManagedWorkspace, error) {
	query, args := `SELECT * FROM managed_workspaces`, []any{}
	if host != uuid.Nil {
		query, args = query+` WHERE runtime_host_id = ?`, append(args, host)
	}
	var rows []managedWorkspaceRow
	if err := q.selectAll(ctx, &rows, query+` ORDER BY created_at, id`, args...); err != nil {
		return nil, fmt.Errorf("managed workspaces of %s: %w", host, err)
	}
	out := make([]domain.ManagedWorkspace, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}

// SetWorkspaceState records a managed workspace's lifecycle state. An unknown state is a
// *domain.ValidationError; a missing workspace is ErrNotFound.
func (q *Q) SetWorkspaceState(ctx context.Context, id uuid.UUID, state domain.WorkspaceState, at time.Time) error {
	if !domain.WorkspaceStates.Has(state) {
		return &domain.ValidationError{Field: "state", Detail: fmt.Sprintf("%q is not a workspace state", state)}
	}
	res, err := q.exec(ctx, `UPDATE managed_workspaces SET state = ?, updated_at = ? WHERE id = ?`,
		state, domain.Timestamp(at), id)
	if err != nil {
		return fmt.Errorf("state of managed workspace %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("state of managed workspace %s: %w", id, ErrNotFound)
	}
	return nil
}

type exportRow struct {
	ID               uuid.UUID  `db:"id"`
	WorkspaceID      uuid.UUID  `db:"workspace_id"`
	RuntimeHostID    uuid.UUID  `db:"runtime_host_id"`
	RuntimeSessionID uuid.UUID  `db:"runtime_session_id"`
	CheckpointID     *uuid.UUID `db:"checkpoint_id"`
	ManifestChecksum string     `db:"manifest_checksum"`
	Bytes            int64      `db:"bytes"`
	CreatedAt        time.Time  `db:"created_at"`
	DeletedAt        *time.Time `db:"deleted_at"`
}

func (r exportRow) domain() domain.WorkspaceExport {
	return domain.WorkspaceExport{ID: r.ID, WorkspaceID: r.WorkspaceID, RuntimeHostID: r.RuntimeHostID,
		RuntimeSessionID: r.RuntimeSessionID, CheckpointID: r.CheckpointID, ManifestChecksum: r.ManifestChecksum,
		Bytes: r.Bytes, CreatedAt: utc(r.CreatedAt), DeletedAt: utcPtr(r.DeletedAt)}
}

// ErrExportChanged: a different export record exists under the UUID.
var ErrExportChanged = fmt.Errorf("%w: a different workspace export was recorded under this id", ErrConflict)

func validateExport(e domain.WorkspaceExport) error {
	var v domain.Validations
	for _, id := range []struct {
		field string
		id    uuid.UUID
	}{{"id", e.ID}, {"workspace_id", e.WorkspaceID}, {"runtime_host_id", e.RuntimeHostID}, {"runtime_session_id", e.RuntimeSessionID}} {
		if id.id == uuid.Nil {
			v.Add(id.field, "required")
		}
	}
	if e.CheckpointID != nil && *e.CheckpointID == uuid.Nil {
		v.Add("checkpoint_id", "must be a checkpoint id or absent")
	}
	if e.ManifestChecksum == "" {
		v.Add("manifest_checksum", "required")
	}
	if e.Bytes < 0 {
		v.Add("bytes", "must not be negative")
	}
	if e.CreatedAt.IsZero() {
		v.Add("created_at", "required")
	}
	return v.Err()
}

// InsertWorkspaceExport records a written export. An exact retry (the same immutable record
// under the same UUID, as after a crash between writing the export and this row) changes
// nothing and reports created=false, whether or not the export was deleted since; a changed
// record under an existing UUID is ErrExportChanged (an ErrConflict).
func (q *Q) InsertWorkspaceExport(ctx context.Context, e domain.WorkspaceExport) (created bool, err error) {
	if err := validateExport(e); err != nil {
		return false, err
	}
	e.CreatedAt = domain.Timestamp(e.CreatedAt)
	if e.DeletedAt != nil {
		t := domain.Timestamp(*e.DeletedAt)
		e.DeletedAt = &t
	}
	err = q.atomic(ctx, func(q *Q) error {
		prev, err := q.GetWorkspaceExport(ctx, e.ID)
		switch {
		case err == nil:
			if !sameExport(prev, e) {
				return ErrExportChanged
			}
			return nil
		case !errors.Is(err, ErrNotFound):
			return err
		}
		created = true
		_, err = q.exec(ctx, `
INSERT INTO workspace_exports (id, workspace_id, runtime_host_id, runtime_session_id, checkpoint_id, manifest_checksum,
    bytes, created_at, deleted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			e.ID, e.WorkspaceID, e.RuntimeHostID, e.RuntimeSessionID, e.CheckpointID, e.ManifestChecksum,
			e.Bytes, e.CreatedAt, e.DeletedAt)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("record workspace export %s: %w", e.ID, err)
	}
	return created, nil
}

// sameExport compares the immutable fields (DeletedAt is not one).
func sameExport(a, b domain.WorkspaceExport) bool {
	sameCheckpoint := (a.CheckpointID == nil) == (b.CheckpointID == nil) &&
		(a.CheckpointID == nil || *a.CheckpointID == *b.CheckpointID)
	return a.ID == b.ID && a.WorkspaceID == b.WorkspaceID && a.RuntimeHostID == b.RuntimeHostID &&
		a.RuntimeSessionID == b.RuntimeSessionID && sameCheckpoint && a.ManifestChecksum == b.ManifestChecksum &&
		a.Bytes == b.Bytes && a.CreatedAt.Equal(b.CreatedAt)
}

// GetWorkspaceExport reads one export record, deleted or not.
func (q *Q) GetWorkspaceExport(ctx context.Context, id uuid.UUID) (domain.WorkspaceExport, error) {
	var r exportRow
	if err := q.get(ctx, &r, `SELECT * FROM workspace_exports WHERE id = ?`, id); err != nil {
		return domain.WorkspaceExport{}, fmt.Errorf("workspace export %s: %w", id, err)
	}
	return r.domain(), nil
}

// ListWorkspaceExports lists a workspace's exports, newest first, deleted ones included.
func (q *Q) ListWorkspaceExports(ctx context.Context, workspace uuid.UUID) ([]domain.WorkspaceExport, error) {
	return q.listExports(ctx, "workspace_id", workspace)
}

// ListHostExports lists the exports taken on a runtime host, newest first, deleted ones
// included.
func (q *Q) ListHostExports(ctx context.Context, host uuid.UUID) ([]domain.WorkspaceExport, error) {
	return q.listExports(ctx, "runtime_host_id", host)
}

// listExports lists by one owner column; column is one of the two constants above.
func (q *Q) listExports(ctx context.Context, column string, id uuid.UUID) ([]domain.WorkspaceExport, error) {
	var rows []exportRow
	if err := q.selectAll(ctx, &rows, `SELECT * FROM workspace_exports WHERE `+column+` = ? ORDER BY created_at DESC, id DESC`, id); err != nil {
		return nil, fmt.Errorf("workspace exports by %s %s: %w", column, id, err)
	}
	out := make([]domain.WorkspaceExport, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}

// MarkExportDeleted stamps an export's bytes as deleted (the record stays). A second call
// keeps the first time; a missing export is ErrNotFound.
func (q *Q) MarkExportDeleted(ctx context.Context, id uuid.UUID, at time.Time) error {
	res, err := q.exec(ctx, `UPDATE workspace_exports SET deleted_at = COALESCE(deleted_at, ?) WHERE id = ?`,
		domain.Timestamp(at), id)
	if err != nil {
		return fmt.Errorf("delete workspace export %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("delete workspace export %s: %w", id, ErrNotFound)
	}
	return nil
}

// RunningWorkspaceOperation is the workspace's running operation (at most one), or nil.
func (q *Q) RunningWorkspaceOperation(ctx context.Context, workspace uuid.UUID) (*domain.WorkspaceOperation, error) {
	var r workspaceOpRow
	err := q.get(ctx, &r, `SELECT * FROM workspace_operations WHERE workspace_id = ? AND state = ?`,
		workspace, domain.OpRunning)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("running operation of workspace %s: %w", workspace, err)
	}
	op := r.domain()
	return &op, nil
}

// ListWorkspaceOperations lists a workspace's operations, newest first; limit <= 0 lists
// them all.
func (q *Q) ListWorkspaceOperations(ctx context.Context, workspace uuid.UUID, limit int) ([]domain.WorkspaceOperation, error) {
	query, args := `SELECT * FROM workspace_operations WHERE workspace_id = ? ORDER BY started_at DESC, id DESC`, []any{workspace}
	if limit > 0 {
		query, args = query+` LIMIT ?`, append(args, limit)
	}
	var rows []workspaceOpRow
	if err := q.selectAll(ctx, &rows, query, args...); err != nil {
		return nil, fmt.Errorf("operations of workspace %s: %w", workspace, err)
	}
	out := make([]domain.WorkspaceOperation, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}

// HostCleanupOfHost reads the cleanup of a runtime host: the one in progress (at most one),
// else the newest finished one;
// ErrNotFound when the host has none.
func (q *Q) HostCleanupOfHost(ctx context.Context, host uuid.UUID) (domain.HostCleanupOperation, error) {
	var r hostCleanupRow
	if err := q.get(ctx, &r, `SELECT * FROM host_cleanup_operations WHERE runtime_host_id = ?
ORDER BY (stage = 'succeeded'), created_at DESC, id DESC LIMIT 1`, host); err != nil {
		return domain.HostCleanupOperation{}, fmt.Errorf("host cleanup of %s: %w", host, err)
	}
	return r.domain(), nil
}

// RestoreCheckpointPayload clears a checkpoint's payload_deleted_at after a restore put its
// generation back on disk; a missing checkpoint is ErrNotFound.
func (q *Q) RestoreCheckpointPayload(ctx context.Context, id uuid.UUID) error {
	res, err := q.exec(ctx, `UPDATE provider_checkpoints SET payload_deleted_at = NULL WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("restore payload of checkpoint %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("restore payload of checkpoint %s: %w", id, ErrNotFound)
	}
	return nil
}
