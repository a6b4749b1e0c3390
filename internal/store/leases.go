package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// LeaseStaleAfter is how long a receive lease may go untouched, with no waiter, before the
// messages delivered on it are offered to the agent's other receivers.
const LeaseStaleAfter = 2 * time.Minute

// ErrLeaseBusy: another receiver is already waiting on the lease.
var ErrLeaseBusy = fmt.Errorf("%w: another receive is waiting on this lease", ErrConflict)

type leaseRow struct {
	ID          uuid.UUID  `db:"id"`
	AgentID     uuid.UUID  `db:"agent_id"`
	Waiter      *string    `db:"waiter"`
	WaiterUntil *time.Time `db:"waiter_until"`
	TouchedAt   time.Time  `db:"touched_at"`
	CreatedAt   time.Time  `db:"created_at"`
}

// AcquireReceiveLease makes waiter the one receiver waiting on lease until `until`, creating
// the lease for agent when it is new. A live waiter of another receive is ErrLeaseBusy; a
// lease of another agent is ErrNotFound (its existence is not the caller's business).
func (q *Q) AcquireReceiveLease(ctx context.Context, lease, agent uuid.UUID, waiter string, until, now time.Time) error {
	now, until = domain.Timestamp(now), domain.Timestamp(until)
	err := q.atomic(ctx, func(q *Q) error {
		var l leaseRow
		err := q.get(ctx, &l, `SELECT * FROM receive_leases WHERE id = ?`, lease)
		switch {
		case errors.Is(err, ErrNotFound):
			// Receivers that never re-arm leave leases behind; drop the agent's stale ones that
			// fence nothing, so the table stays the size of the live receivers.
			if _, err := q.exec(ctx, `
DELETE FROM receive_leases WHERE agent_id = ? AND waiter IS NULL AND touched_at < ?
  AND NOT EXISTS (SELECT 1 FROM inbound i WHERE i.lease_id = receive_leases.id AND i.state = ?)`,
				agent, now.Add(-LeaseStaleAfter), domain.InboundDelivered); err != nil {
				return err
			}
			_, err = q.exec(ctx, `
INSERT INTO receive_leases (id, agent_id, waiter, waiter_until, touched_at, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
				lease, agent, waiter, until, now, now)
			return err
		case err != nil:
			return err
		case l.AgentID != agent:
			return ErrNotFound
		case l.Waiter != nil && *l.Waiter != waiter && l.WaiterUntil != nil && l.WaiterUntil.After(now):
			return ErrLeaseBusy
		}
		_, err = q.exec(ctx, `UPDATE receive_leases SET waiter = ?, waiter_until = ?, touched_at = ? WHERE id = ?`,
			waiter, until, now, lease)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrLeaseBusy) {
			return err
		}
		return fmt.Errorf("acquire receive lease %s: %w", lease, err)
	}
	return nil
}

// ReleaseReceiveLease frees the lease if waiter still holds it.
func (q *Q) ReleaseReceiveLease(ctx context.Context, lease uuid.UUID, waiter string, now time.Time) error {
	if _, err := q.exec(ctx, `
UPDATE receive_leases SET waiter = NULL, waiter_until = NULL, touched_at = ? WHERE id = ? AND waiter = ?`,
		domain.Timestamp(now), lease, waiter); err != nil {
		return fmt.Errorf("release receive lease %s: %w", lease, err)
	}
	return nil
}

// Claim is a message handed to a pull receiver.
type Claim struct {
	Inbound domain.Inbound
	Message domain.Message
	// AckRequired is true when the message was delivered on this lease before and is still
	// unsettled: the receiver must reply or ack it before it gets another.
	AckRequired bool
}

// activeMembership restricts inbound rows to rooms the agent is still in: a removed agent's
// messages wait for an authoritative re-add instead of reaching it outside the room.
const activeMembership = `EXISTS (SELECT 1 FROM room_participants p WHERE p.room_id = i.room_id AND p.agent_id = i.agent_id AND p.active)`

// claimable leaves out context-only rows: a message past the room's hop limit is never
// handed to a receiver (an attached agent would answer it and extend the chain).
const claimable = `NOT i.context_only AND ` + activeMembership

// fencedQuery finds the unsettled message already delivered on a lease.
const fencedQuery = `
SELECT i.* FROM inbound i WHERE i.agent_id = ? AND i.lease_id = ? AND i.state = ? AND ` + claimable + `
ORDER BY i.seq LIMIT 1`

// offerQuery finds the oldest message that is queued or was delivered on a stale lease.
const offerQuery = `
SELECT i.* FROM inbound i LEFT JOIN receive_leases l ON l.id = i.lease_id
WHERE i.agent_id = ? AND (i.state = ? OR (i.state = ? AND (l.id IS NULL
      OR (l.touched_at < ? AND (l.waiter IS NULL OR l.waiter_until < ?))))) AND ` + claimable + `
ORDER BY i.seq LIMIT 1`

// ClaimInbound hands the receiver on lease its next message: first the unsettled message
// already delivered on this lease (AckRequired), else the agent's oldest message that is
// queued or was delivered on a lease that went stale. ErrNotFound means nothing is waiting.
func (q *Q) ClaimInbound(ctx context.Context, agent, lease uuid.UUID, now time.Time) (Claim, error) {
	now = domain.Timestamp(now)
	stale := now.Add(-LeaseStaleAfter)
	fencedArgs := []any{agent, lease, domain.InboundDelivered}
	offerArgs := []any{agent, domain.InboundQueued, domain.InboundDelivered, stale, now}
	// Look before taking the write lock: a waiting receiver polls, and most polls find nothing.
	if !q.inTx {
		var r inboundRow
		err := q.get(ctx, &r, fencedQuery, fencedArgs...)
		if errors.Is(err, ErrNotFound) {
			err = q.get(ctx, &r, offerQuery, offerArgs...)
		}
		if err != nil {
			return Claim{}, err
		}
	}
	var c Claim
	err := q.atomic(ctx, func(q *Q) error {
		var r inboundRow
		err := q.get(ctx, &r, fencedQuery, fencedArgs...)
		switch {
		case err == nil:
			c.AckRequired = true
		case errors.Is(err, ErrNotFound):
			if err = q.get(ctx, &r, offerQuery, offerArgs...); err != nil {
				return err
			}
		default:
			return err
		}
		if _, err := q.exec(ctx, `
UPDATE inbound SET state = ?, lease_id = ?, delivery_count = delivery_count + 1, delivered_at = ?
WHERE agent_id = ? AND message_id = ?`, domain.InboundDelivered, lease, now, agent, r.MessageID); err != nil {
			return err
		}
		if _, err := q.exec(ctx, `UPDATE receive_leases SET touched_at = ? WHERE id = ?`, now, lease); err != nil {
			return err
		}
		c.Inbound = r.domain()
		c.Inbound.State, c.Inbound.LeaseID, c.Inbound.DeliveredAt = domain.InboundDelivered, &lease, &now
		c.Inbound.DeliveryCount++
		c.Message, err = q.GetMessage(ctx, r.MessageID)
		return err
	})
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return Claim{}, ErrNotFound
		}
		return Claim{}, fmt.Errorf("claim inbound for agent %s: %w", agent, err)
	}
	return c, nil
}
