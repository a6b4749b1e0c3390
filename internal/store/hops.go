package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jam-dev/jam/internal/domain"
)

// agentHops is the hop count a new message gets: 0 for a human's; for an agent's, one more
// than the message it replies to, or than the room's latest message when it replies to
// none (an agent speaking up unprompted continues the room's current chain).
func (q *Q) agentHops(ctx context.Context, m domain.Message) (int, error) {
	if m.AuthorKind != domain.ParticipantAgent {
		return 0, nil
	}
	var prev int
	var err error
	if m.ReplyTo != nil {
		err = q.get(ctx, &prev, `SELECT agent_hops FROM messages WHERE id = ?`, *m.ReplyTo)
	} else {
		err = q.get(ctx, &prev, `SELECT agent_hops FROM messages WHERE room_id = ? ORDER BY seq DESC LIMIT 1`, m.RoomID)
		if errors.Is(err, ErrNotFound) {
			err = nil // the room's first message starts a chain
		}
	}
	if err != nil {
		return 0, fmt.Errorf("agent hops of the previous message: %w", err)
	}
	return domain.NextAgentHops(prev), nil
}

// maxAgentHops is the room hop limit: the stored setting, else its default.
func (q *Q) maxAgentHops(ctx context.Context) (int, error) {
	set, err := q.GetSetting(ctx, domain.SettingMaxAgentHops)
	if errors.Is(err, ErrNotFound) {
		return domain.DefaultMaxAgentHops, nil
	}
	if err != nil {
		return 0, err
	}
	var n int
	if err := json.Unmarshal(set.Value, &n); err != nil || n < 1 {
		return 0, fmt.Errorf("setting %s holds %s, not a positive number of hops", domain.SettingMaxAgentHops, set.Value)
	}
	return n, nil
}

// withQuiet sets m.Quiet for a message read back rather than just posted (a retried
// settlement): past the hop limit it wakes no one.
func (q *Q) withQuiet(ctx context.Context, m domain.Message) (domain.Message, error) {
	m.Quiet = false
	if m.AgentHops == 0 {
		return m, nil
	}
	limit, err := q.maxAgentHops(ctx)
	if err != nil {
		return m, err
	}
	m.Quiet = !domain.AgentHopsWake(m.AgentHops, limit)
	return m, nil
}
