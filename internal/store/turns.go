package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// ErrFenced: the runtime instance generation is no longer the session's current one. A
// retired instance can never settle or emit into its successor's turn.
var ErrFenced = errors.New("runtime instance generation is retired")

// BeginRuntimeInstance issues the next runtime instance generation of a runtime session.
// Every later write of an older generation is fenced off.
func (q *Q) BeginRuntimeInstance(ctx context.Context, session uuid.UUID, at time.Time) (int64, error) {
	var gen int64
	err := q.atomic(ctx, func(q *Q) error {
		return q.get(ctx, &gen, `UPDATE runtime_sessions SET instance_generation = instance_generation + 1, updated_at = ?
WHERE id = ? RETURNING instance_generation`, domain.Timestamp(at), session)
	})
	if err != nil {
		return 0, fmt.Errorf("begin runtime instance of %s: %w", session, err)
	}
	return gen, nil
}

// fence fails with ErrFenced unless generation is the session's current instance and the
// session belongs to agent. It runs inside the writing transaction, behind the writer lock,
// so a successor cannot begin between the check and the write.
func (q *Q) fence(ctx context.Context, session uuid.UUID, generation int64, agent uuid.UUID) error {
	var row struct {
		Generation int64     `db:"instance_generation"`
		AgentID    uuid.UUID `db:"agent_id"`
	}
	if err := q.get(ctx, &row, `SELECT instance_generation, agent_id FROM runtime_sessions WHERE id = ?`, session); err != nil {
		return err
	}
	if row.AgentID != agent {
		return fmt.Errorf("%w: runtime session %s is not agent %s's", ErrFenced, session, agent)
	}
	if row.Generation != generation {
		return fmt.Errorf("%w: generation %d, current %d", ErrFenced, generation, row.Generation)
	}
	return nil
}

// TurnSettle is one settlement of a committed turn.
type TurnSettle struct {
	MessageID uuid.UUID
	How       domain.Settlement
	Text      string
}

// TurnCommit is everything a completed turn settles, written at once.
type TurnCommit struct {
	RuntimeSession uuid.UUID
	Generation     int64
	AgentID        uuid.UUID
	TurnID         string
	Settles        []TurnSettle
	At             time.Time
}

// CommittedTurn is what committing a turn settled and posted.
type CommittedTurn struct {
	// Inbound are the settled rows, in the order of the commit's settlements.
	Inbound []domain.Inbound
	// Replies are the messages the turn's replies posted, in order; a Quiet one is past the
	// room's hop limit and wakes no one.
	Replies []domain.Message
}

// CommitTurn settles a completed turn's messages in one transaction, fenced on the runtime
// instance generation. It is idempotent: an exact retry (a redelivered activity) changes
// nothing and returns the same rows and replies; a conflicting second settlement fails.
func (q *Q) CommitTurn(ctx context.Context, c TurnCommit) (CommittedTurn, error) {
	at := domain.Timestamp(c.At)
	var out CommittedTurn
	err := q.atomic(ctx, func(q *Q) error {
		out = CommittedTurn{}
		// An exact retry writes nothing, so it is answered even after a successor instance
		// began: the activity that committed, then died before reporting, must not fail.
		if done, ok, err := q.committedAlready(ctx, c); err != nil || ok {
			out = done
			return err
		}
		if err := q.fence(ctx, c.RuntimeSession, c.Generation, c.AgentID); err != nil {
			return err
		}
		for _, s := range c.Settles {
			in, reply, err := q.settle(ctx, c.AgentID, s.MessageID, s.How, s.Text, at)
			if err != nil {
				return fmt.Errorf("message %s: %w", s.MessageID, err)
			}
			out.Inbound = append(out.Inbound, in)
			if reply != nil {
				out.Replies = append(out.Replies, *reply)
			}
		}
		return nil
	})
	if err != nil {
		return CommittedTurn{}, fmt.Errorf("commit turn %s of %s: %w", c.TurnID, c.RuntimeSession, err)
	}
	return out, nil
}

// committedAlready reports whether every settlement of c is already in place exactly as c
// asks, returning the rows and replies.
func (q *Q) committedAlready(ctx context.Context, c TurnCommit) (CommittedTurn, bool, error) {
	if len(c.Settles) == 0 {
		return CommittedTurn{}, false, nil
	}
	out := CommittedTurn{Inbound: make([]domain.Inbound, 0, len(c.Settles))}
	for _, st := range c.Settles {
		in, err := q.GetInbound(ctx, c.AgentID, st.MessageID)
		if errors.Is(err, ErrNotFound) {
			return CommittedTurn{}, false, nil
		}
		if err != nil {
			return CommittedTurn{}, false, err
		}
		if in.State != domain.InboundSettled || in.Settlement != st.How {
			return CommittedTurn{}, false, nil
		}
		if st.How == domain.SettledReply {
			if in.ReplyMessageID == nil {
				return CommittedTurn{}, false, nil
			}
			prev, whole, err := q.replyOf(ctx, *in.ReplyMessageID)
			if err != nil {
				return CommittedTurn{}, false, err
			}
			if whole != st.Text {
				return CommittedTurn{}, false, nil
			}
			if prev, err = q.withQuiet(ctx, prev); err != nil {
				return CommittedTurn{}, false, err
			}
			out.Replies = append(out.Replies, prev)
		}
		out.Inbound = append(out.Inbound, in)
	}
	return out, true, nil
}

// AppendRuntimeActivity writes runtime events (each payload one provider AgentEvent) to the
// event log as runtime_activity, fenced on the runtime instance generation.
func (q *Q) AppendRuntimeActivity(ctx context.Context, session uuid.UUID, generation int64, room, agent uuid.UUID,
	payloads []json.RawMessage, at time.Time) error {
	if len(payloads) == 0 {
		return nil
	}
	at = domain.Timestamp(at)
	err := q.atomic(ctx, func(q *Q) error {
		if err := q.fence(ctx, session, generation, agent); err != nil {
			return err
		}
		evs := make([]domain.Event, len(payloads))
		for i, p := range payloads {
			evs[i] = domain.Event{Kind: domain.EventRuntimeActivity, RoomID: &room, AgentID: &agent, Payload: p}
		}
		_, err := q.appendEvents(ctx, at, evs...)
		return err
	})
	if err != nil {
		return fmt.Errorf("append runtime activity of %s: %w", session, err)
	}
	return nil
}

// RecordRuntimeExit logs that a node saw a runtime's process die on its own.
func (q *Q) RecordRuntimeExit(ctx context.Context, session uuid.UUID, generation int64, reason domain.RuntimeExitReason, at time.Time) error {
	at = domain.Timestamp(at)
	err := q.atomic(ctx, func(q *Q) error {
		hs, err := q.GetHostSession(ctx, session)
		if err != nil {
			return err
		}
		_, err = q.appendEvents(ctx, at, NewEvent(domain.EventRuntimeExited, &hs.RoomID, &hs.AgentID, map[string]any{
			"runtime_session": session, "generation": generation, "reason": reason,
		}))
		return err
	})
	if err != nil {
		return fmt.Errorf("record exit of runtime %s: %w", session, err)
	}
	return nil
}
