package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// RecordProviderVersion records the version a runtime session's provider reported.
func (q *Q) RecordProviderVersion(ctx context.Context, session uuid.UUID, version string, at time.Time) error {
	if _, err := q.exec(ctx, `UPDATE runtime_sessions SET provider_version = ?, updated_at = ? WHERE id = ?`,
		version, domain.Timestamp(at), session); err != nil {
		return fmt.Errorf("record provider version of %s: %w", session, err)
	}
	return nil
}

// RecordRuntimeFailure holds a runtime session in a permanent start failure and tells the
// room (a runtime_failed event). Recording the same class and reason again changes nothing,
// so a retried activity does not repeat the notice.
func (q *Q) RecordRuntimeFailure(ctx context.Context, session uuid.UUID, f domain.RuntimeFailure) error {
	if !domain.FailureClasses.Has(f.Class) {
		return &domain.ValidationError{Field: "class", Detail: fmt.Sprintf("unknown failure class %q", f.Class)}
	}
	f.At, f.Reason = domain.Timestamp(f.At), domain.Truncate(f.Reason, 1000)
	err := q.atomic(ctx, func(q *Q) error {
		hs, err := q.GetHostSession(ctx, session)
		if err != nil {
			return err
		}
		if cur := hs.Failure; cur != nil && cur.Class == f.Class && cur.Reason == f.Reason {
			return nil
		}
		if _, err := q.exec(ctx, `UPDATE runtime_sessions SET failure_class = ?, failure_reason = ?, failed_at = ?, updated_at = ?
WHERE id = ?`, f.Class, f.Reason, f.At, f.At, session); err != nil {
			return err
		}
		_, err = q.appendEvents(ctx, f.At, NewEvent(domain.EventRuntimeFailed, &hs.RoomID, &hs.AgentID, map[string]any{
			"runtime_session": session, "class": f.Class, "reason": f.Reason,
		}))
		return err
	})
	if err != nil {
		return fmt.Errorf("record failure of runtime %s: %w", session, err)
	}
	return nil
}

// ClearRuntimeFailure ends a session's permanent start failure (it is about to try again).
func (q *Q) ClearRuntimeFailure(ctx context.Context, session uuid.UUID, at time.Time) error {
	if _, err := q.exec(ctx, `UPDATE runtime_sessions SET failure_class = NULL, failure_reason = NULL, failed_at = NULL, updated_at = ?
WHERE id = ? AND failure_class IS NOT NULL`, domain.Timestamp(at), session); err != nil {
		return fmt.Errorf("clear failure of runtime %s: %w", session, err)
	}
	return nil
}

// FailedSessions lists the room sessions (not removed) held in a failure of class, with
// their configuration, oldest failure first.
func (q *Q) FailedSessions(ctx context.Context, class domain.FailureClass, limit int) ([]domain.HostSession, error) {
	var rows []hostSessionRow
	if err := q.selectAll(ctx, &rows, hostSessionSelect+`
WHERE h.removed_at IS NULL AND s.failure_class = ? ORDER BY s.failed_at, h.runtime_session_id LIMIT ?`, class, limit); err != nil {
		return nil, fmt.Errorf("failed sessions: %w", err)
	}
	out := make([]domain.HostSession, len(rows))
	for i, r := range rows {
		hs, err := r.domain()
		if err != nil {
			return nil, err
		}
		out[i] = hs
	}
	return out, nil
}

// RecordReadiness records the readiness warning of a session's live runtime instance
// generation ("" when it has none, or no runtime runs) and, when it changed, tells the room
// (runtime_readiness). A retired instance's report is dropped: its successor speaks for the
// session now.
func (q *Q) RecordReadiness(ctx context.Context, session uuid.UUID, generation int64, warning string, at time.Time) error {
	at, warning = domain.Timestamp(at), domain.Truncate(warning, 1000)
	// Every turn reports: one unchanged is a read, not a write transaction.
	unchanged := func(q *Q) (bool, error) {
		var row struct {
			Generation int64  `db:"instance_generation"`
			Warning    string `db:"readiness_warning"`
		}
		if err := q.get(ctx, &row, `SELECT instance_generation, readiness_warning FROM runtime_sessions WHERE id = ?`, session); err != nil {
			return false, err
		}
		return row.Generation != generation || row.Warning == warning, nil
	}
	same, err := unchanged(q)
	if err != nil {
		return fmt.Errorf("record readiness of runtime %s: %w", session, err)
	}
	if same {
		return nil
	}
	err = q.atomic(ctx, func(q *Q) error {
		if same, err := unchanged(q); err != nil || same {
			return err
		}
		hs, err := q.GetHostSession(ctx, session)
		if err != nil {
			return err
		}
		if _, err := q.exec(ctx, `UPDATE runtime_sessions SET readiness_warning = ?, updated_at = ? WHERE id = ?`,
			warning, at, session); err != nil {
			return err
		}
		_, err = q.appendEvents(ctx, at, NewEvent(domain.EventRuntimeReadiness, &hs.RoomID, &hs.AgentID, map[string]any{
			"runtime_session": session, "generation": generation, "warning": warning, "degraded": warning != "",
		}))
		return err
	})
	if err != nil {
		return fmt.Errorf("record readiness of runtime %s: %w", session, err)
	}
	return nil
}
