package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// CheckRuntimeInstance fails with ErrFenced unless generation is the runtime session's
// current instance and the session is agent's: a retired instance's tools act no more.
func (q *Q) CheckRuntimeInstance(ctx context.Context, session uuid.UUID, generation int64, agent uuid.UUID) error {
	if err := q.fence(ctx, session, generation, agent); err != nil {
		return fmt.Errorf("runtime session %s: %w", session, err)
	}
	return nil
}

// PostRuntimeMessage posts a new room message of a runtime instance's agent
// (jam_send_message), fenced on the instance generation in the same transaction.
func (q *Q) PostRuntimeMessage(ctx context.Context, session uuid.UUID, generation int64, m domain.Message) (domain.Message, error) {
	if m.AuthorAgentID == nil {
		return m, domain.Refuse("a runtime message needs its agent")
	}
	m.AuthorKind, m.CreatedAt = domain.ParticipantAgent, domain.Timestamp(m.CreatedAt)
	err := q.atomic(ctx, func(q *Q) error {
		if err := q.fence(ctx, session, generation, *m.AuthorAgentID); err != nil {
			return err
		}
		var err error
		m, err = q.postMessage(ctx, m)
		return err
	})
	if err != nil {
		return domain.Message{}, fmt.Errorf("post for runtime session %s: %w", session, err)
	}
	return m, nil
}

// RecentMessages is the newest limit messages of a room, oldest first.
func (q *Q) RecentMessages(ctx context.Context, room uuid.UUID, limit int) ([]domain.Message, error) {
	if limit <= 0 {
		return nil, nil
	}
	var rows []messageRow
	if err := q.selectAll(ctx, &rows, `SELECT * FROM messages WHERE room_id = ? ORDER BY seq DESC LIMIT ?`, room, limit); err != nil {
		return nil, fmt.Errorf("recent messages of %s: %w", room, err)
	}
	out := make([]domain.Message, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	slices.Reverse(out)
	return out, nil
}
