package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// RecordRecycle records the provider watchdog's count-th recycle of a runtime session and
// tells the room once (a runtime_recycled event with what was measured, and whether the
// session now holds failed for recycling too often). Recording a count the session already
// has changes nothing, so a retried activity does not repeat the notice.
func (q *Q) RecordRecycle(ctx context.Context, session uuid.UUID, rc domain.Recycle, count int, held bool) error {
	if !domain.RecycleReasons.Has(rc.Reason) {
		return &domain.ValidationError{Field: "reason", Detail: fmt.Sprintf("unknown recycle reason %q", rc.Reason)}
	}
	rc.At, rc.Measured = domain.Timestamp(rc.At), domain.Truncate(rc.Measured, 500)
	last, err := json.Marshal(rc)
	if err != nil {
		return fmt.Errorf("record recycle of runtime %s: %w", session, err)
	}
	err = q.atomic(ctx, func(q *Q) error {
		hs, err := q.GetHostSession(ctx, session)
		if err != nil {
			return err
		}
		if hs.Recycles >= count {
			return nil
		}
		if _, err := q.exec(ctx, `UPDATE runtime_sessions SET recycles = ?, last_recycle = ?, updated_at = ? WHERE id = ?`,
			count, string(last), rc.At, session); err != nil {
			return err
		}
		_, err = q.appendEvents(ctx, rc.At, NewEvent(domain.EventRuntimeRecycled, &hs.RoomID, &hs.AgentID, map[string]any{
			"runtime_session": session, "generation": rc.Generation, "reason": rc.Reason, "measured": rc.Measured,
			"recycles": count, "held": held,
		}))
		return err
	})
	if err != nil {
		return fmt.Errorf("record recycle of runtime %s: %w", session, err)
	}
	return nil
}
