package store

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// CountUnsettled is how many of an agent's messages in one room are not settled yet: the
// backlog that decides whether a dormant room session must wake. Context-only rows wake
// nothing, so they are not backlog.
func (q *Q) CountUnsettled(ctx context.Context, agent, room uuid.UUID) (int, error) {
	var n int
	if err := q.get(ctx, &n, `SELECT COUNT(*) FROM inbound WHERE agent_id = ? AND room_id = ? AND state <> ? AND NOT context_only`,
		agent, room, domain.InboundSettled); err != nil {
		return 0, fmt.Errorf("backlog of agent %s in room %s: %w", agent, room, err)
	}
	return n, nil
}

// OwnedBindingsInRoom lists the active bindings of owned agents in a room: the room
// sessions a new message there must poke.
func (q *Q) OwnedBindingsInRoom(ctx context.Context, room uuid.UUID) ([]domain.Binding, error) {
	var rows []bindingRow
	if err := q.selectAll(ctx, &rows, `
SELECT b.* FROM room_bindings b JOIN agents a ON a.id = b.agent_id
WHERE b.room_id = ? AND b.active AND a.kind = ? ORDER BY b.created_at, b.id`, room, domain.AgentOwned); err != nil {
		return nil, fmt.Errorf("owned bindings in room %s: %w", room, err)
	}
	out := make([]domain.Binding, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}

// SessionsWithBacklog lists the live (not removed) room sessions of owned agents that want
// to run and have unsettled messages in their room (context-only rows aside): what Reconcile
// pokes, so a lost poke never strands a message. A session held in a permanent start failure is not among them:
// only a change wakes it. Each is named with its agent and room (RuntimeSessionID, AgentID,
// RoomID of a domain.Binding), which the workflow Reconcile starts for it is tagged with.
func (q *Q) SessionsWithBacklog(ctx context.Context, limit int) ([]domain.Binding, error) {
	var rows []struct {
		Session uuid.UUID `db:"runtime_session_id"`
		Agent   uuid.UUID `db:"agent_id"`
		Room    uuid.UUID `db:"room_id"`
	}
	if err := q.selectAll(ctx, &rows, `
SELECT h.runtime_session_id, h.agent_id, h.room_id FROM host_sessions h JOIN agents a ON a.id = h.agent_id
  JOIN runtime_sessions s ON s.id = h.runtime_session_id
WHERE h.removed_at IS NULL AND a.kind = ? AND a.run_intent = ? AND s.failure_class IS NULL
  AND EXISTS (SELECT 1 FROM inbound i WHERE i.agent_id = h.agent_id AND i.room_id = h.room_id AND i.state <> ?
    AND NOT i.context_only)
ORDER BY h.runtime_session_id LIMIT ?`, domain.AgentOwned, domain.RunIntentRunning, domain.InboundSettled, limit); err != nil {
		return nil, fmt.Errorf("sessions with backlog: %w", err)
	}
	out := make([]domain.Binding, len(rows))
	for i, r := range rows {
		out[i] = domain.Binding{RuntimeSessionID: r.Session, AgentID: r.Agent, RoomID: r.Room}
	}
	return out, nil
}

// RecordRuntimeStopped logs that Jam tore a runtime down on purpose, and why.
func (q *Q) RecordRuntimeStopped(ctx context.Context, session uuid.UUID, generation int64, reason domain.CheckpointReason, at time.Time) error {
	at = domain.Timestamp(at)
	err := q.atomic(ctx, func(q *Q) error {
		hs, err := q.GetHostSession(ctx, session)
		if err != nil {
			return err
		}
		_, err = q.appendEvents(ctx, at, NewEvent(domain.EventRuntimeStopped, &hs.RoomID, &hs.AgentID, map[string]any{
			"runtime_session": session, "generation": generation, "reason": reason,
		}))
		return err
	})
	if err != nil {
		return fmt.Errorf("record stop of runtime %s: %w", session, err)
	}
	return nil
}
