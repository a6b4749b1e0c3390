package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/schema"
)

type messageRow struct {
	ID            uuid.UUID  `db:"id"`
	Seq           int64      `db:"seq"`
	RoomID        uuid.UUID  `db:"room_id"`
	AuthorKind    string     `db:"author_kind"`
	AuthorAgentID *uuid.UUID `db:"author_agent_id"`
	AuthorHuman   *string    `db:"author_human"`
	Text          string     `db:"text"`
	ReplyTo       *uuid.UUID `db:"reply_to"`
	CreatedAt     time.Time  `db:"created_at"`
	AgentHops     int        `db:"agent_hops"`
	Continues     *uuid.UUID `db:"continues"`
	Part          int        `db:"part"`
	Parts         int        `db:"parts"`
}

func (r messageRow) domain() domain.Message {
	m := domain.Message{ID: r.ID, Seq: r.Seq, RoomID: r.RoomID, AuthorKind: domain.ParticipantKind(r.AuthorKind),
		AuthorAgentID: r.AuthorAgentID, Text: r.Text, ReplyTo: r.ReplyTo, AgentHops: r.AgentHops, CreatedAt: utc(r.CreatedAt),
		Continues: r.Continues, Part: r.Part, Parts: r.Parts}
	if r.AuthorHuman != nil {
		m.AuthorHuman = *r.AuthorHuman
	}
	return m
}

// messageEvent is the payload of message_posted.
type messageEvent struct {
	ID            uuid.UUID              `json:"id"`
	Seq           int64                  `json:"seq"`
	AuthorKind    domain.ParticipantKind `json:"author_kind"`
	AuthorAgentID *uuid.UUID             `json:"author_agent_id,omitempty"`
	AuthorHuman   string                 `json:"author_human,omitempty"`
	Text          string                 `json:"text"`
	ReplyTo       *uuid.UUID             `json:"reply_to,omitempty"`
	Continues     *uuid.UUID             `json:"continues,omitempty"`
	Part          int                    `json:"part,omitempty"`
	Parts         int                    `json:"parts,omitempty"`
	Recipients    []uuid.UUID            `json:"recipients"`
	AgentHops     int                    `json:"agent_hops"`
	// Wakes is false past the room's hop limit: the recipients got the message as context.
	Wakes bool `json:"wakes"`
}

// PostMessage appends a message to a room's transcript and queues one inbound row for every
// agent participant other than the author, all in one transaction. The author must be an
// active participant. The message's agent hops are counted here; past the room's hop limit
// its rows are context only and the returned message is Quiet.
func (q *Q) PostMessage(ctx context.Context, m domain.Message) (domain.Message, error) {
	m.CreatedAt = domain.Timestamp(m.CreatedAt)
	post := func(q *Q) error {
		var err error
		m, err = q.postMessage(ctx, m)
		return err
	}
	var err error
	if q.inTx {
		err = post(q)
	} else {
		// Everything a post reads and writes belongs to its room: posts to different
		// rooms run side by side.
		err = q.store.InScopedTx(ctx, RoomScope(m.RoomID), post)
	}
	if err != nil {
		return domain.Message{}, fmt.Errorf("post to room %s: %w", m.RoomID, err)
	}
	return m, nil
}

func (q *Q) postMessage(ctx context.Context, m domain.Message) (domain.Message, error) {
	// The author must be an active participant; a room that does not exist has none.
	participants, reserved, err := q.postingParticipants(ctx, m.RoomID)
	if err != nil {
		return m, err
	}
	author := false
	var recipients []uuid.UUID
	for _, p := range participants {
		switch {
		case p.Kind == domain.ParticipantAgent && m.AuthorKind == domain.ParticipantAgent && *p.AgentID == *m.AuthorAgentID:
			author = true
		case p.Kind == domain.ParticipantHuman && m.AuthorKind == domain.ParticipantHuman && p.HumanName == m.AuthorHuman:
			author = true
		}
		if p.Kind == domain.ParticipantAgent && !(m.AuthorAgentID != nil && *p.AgentID == *m.AuthorAgentID) {
			recipients = append(recipients, *p.AgentID)
		}
	}
	if !author {
		return m, domain.Refuse("the author is not a participant of this room")
	}
	// A message's transcript position is its message_posted event's id. One room's writers
	// run one at a time (RoomScope, or InTx), so a room's seqs commit in order and paging
	// "after seq" never skips a message.
	ids := reserved
	if len(ids) >= 1+len(recipients) {
		ids = ids[:1+len(recipients)]
	} else if ids, err = q.reserveEvents(ctx, 1+len(recipients)); err != nil {
		return m, err
	}
	m.Seq = ids[0]
	if m.AgentHops, err = q.agentHops(ctx, m); err != nil {
		return m, err
	}
	m.Quiet = false
	if m.AgentHops > 0 {
		limit, err := q.maxAgentHops(ctx)
		if err != nil {
			return m, err
		}
		m.Quiet = !domain.AgentHopsWake(m.AgentHops, limit)
	}
	var human *string
	if m.AuthorKind == domain.ParticipantHuman {
		human = &m.AuthorHuman
	}
	writes := []statement{{query: `
INSERT INTO messages (id, seq, room_id, author_kind, author_agent_id, author_human, text, reply_to, created_at, agent_hops,
  continues, part, parts)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, args: []any{m.ID, m.Seq, m.RoomID, m.AuthorKind, m.AuthorAgentID, human, m.Text,
		m.ReplyTo, m.CreatedAt, m.AgentHops, m.Continues, m.Part, m.Parts}}}
	events := []domain.Event{NewEvent(domain.EventMessagePosted, &m.RoomID, m.AuthorAgentID, messageEvent{
		ID: m.ID, Seq: m.Seq, AuthorKind: m.AuthorKind, AuthorAgentID: m.AuthorAgentID, AuthorHuman: m.AuthorHuman,
		Text: m.Text, ReplyTo: m.ReplyTo, Continues: m.Continues, Part: m.Part, Parts: m.Parts,
		Recipients: nonNil(recipients), AgentHops: m.AgentHops, Wakes: !m.Quiet,
	})}
	if len(recipients) > 0 {
		values := make([]string, len(recipients))
		args := make([]any, 0, 7*len(recipients))
		for i, agent := range recipients {
			values[i] = "(?, ?, ?, ?, ?, ?, ?)"
			args = append(args, agent, m.ID, m.RoomID, m.Seq, domain.InboundQueued, m.CreatedAt, m.Quiet)
			events = append(events, NewEvent(domain.EventInboundQueued, &m.RoomID, &recipients[i],
				map[string]any{"message_id": m.ID, "seq": m.Seq, "context_only": m.Quiet}))
		}
		writes = append(writes, statement{query: `INSERT INTO inbound (agent_id, message_id, room_id, seq, state, created_at, context_only) VALUES ` +
			strings.Join(values, ", "), args: args})
	}
	for i := range events {
		events[i].ID = ids[i]
	}
	if err := q.execAll(ctx, append(writes, q.eventsInsert(m.CreatedAt, events))...); err != nil {
		return m, fmt.Errorf("write message %s: %w", m.ID, err)
	}
	return m, nil
}

// postingParticipants lists a room's active participants for a post and, on Postgres,
// reserves event ids in the same round trip, ascending: one per participant, which is as
// many as the post needs (one for the message, one per recipient; its author is a
// participant and no recipient). Ids it leaves unused are gaps, like a rolled-back writer's.
// SQLite reserves none here: its ids come from a counter, consecutive.
func (q *Q) postingParticipants(ctx context.Context, room uuid.UUID) ([]domain.Participant, []int64, error) {
	if q.store.dialect != schema.Postgres || !q.inTx {
		ps, err := q.ListParticipants(ctx, room)
		return ps, nil, err
	}
	var rows []struct {
		participantRow
		EventID int64 `db:"event_id"`
	}
	if err := q.selectAll(ctx, &rows, `
SELECT p.*, nextval('event_ids') AS event_id FROM room_participants p
WHERE p.room_id = ? AND p.active ORDER BY p.created_at, p.id`, room); err != nil {
		return nil, nil, fmt.Errorf("list participants of %s: %w", room, err)
	}
	ps, ids := make([]domain.Participant, len(rows)), make([]int64, len(rows))
	for i, r := range rows {
		ps[i], ids[i] = r.domain(), r.EventID
	}
	slices.Sort(ids)
	return ps, ids, nil
}

func nonNil(ids []uuid.UUID) []uuid.UUID {
	if ids == nil {
		return []uuid.UUID{}
	}
	return ids
}

// GetMessage reads one message.
func (q *Q) GetMessage(ctx context.Context, id uuid.UUID) (domain.Message, error) {
	var r messageRow
	if err := q.get(ctx, &r, `SELECT * FROM messages WHERE id = ?`, id); err != nil {
		return domain.Message{}, fmt.Errorf("get message %s: %w", id, err)
	}
	return r.domain(), nil
}

// ListMessages pages a room's transcript in order: up to limit messages after seq `after`.
func (q *Q) ListMessages(ctx context.Context, room uuid.UUID, after int64, limit int) ([]domain.Message, error) {
	var rows []messageRow
	if err := q.selectAll(ctx, &rows, `SELECT * FROM messages WHERE room_id = ? AND seq > ? ORDER BY seq LIMIT ?`,
		room, after, limit); err != nil {
		return nil, fmt.Errorf("list messages of %s: %w", room, err)
	}
	out := make([]domain.Message, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}

type inboundRow struct {
	AgentID        uuid.UUID  `db:"agent_id"`
	MessageID      uuid.UUID  `db:"message_id"`
	RoomID         uuid.UUID  `db:"room_id"`
	Seq            int64      `db:"seq"`
	State          string     `db:"state"`
	Settlement     *string    `db:"settlement"`
	ReplyMessageID *uuid.UUID `db:"reply_message_id"`
	LeaseID        *uuid.UUID `db:"lease_id"`
	DeliveryCount  int        `db:"delivery_count"`
	CreatedAt      time.Time  `db:"created_at"`
	DeliveredAt    *time.Time `db:"delivered_at"`
	SettledAt      *time.Time `db:"settled_at"`
	ContextOnly    bool       `db:"context_only"`
}

func (r inboundRow) domain() domain.Inbound {
	in := domain.Inbound{AgentID: r.AgentID, MessageID: r.MessageID, RoomID: r.RoomID, Seq: r.Seq,
		State: domain.InboundState(r.State), ReplyMessageID: r.ReplyMessageID, LeaseID: r.LeaseID,
		DeliveryCount: r.DeliveryCount, CreatedAt: utc(r.CreatedAt), DeliveredAt: utcPtr(r.DeliveredAt),
		SettledAt: utcPtr(r.SettledAt), ContextOnly: r.ContextOnly}
	if r.Settlement != nil {
		in.Settlement = domain.Settlement(*r.Settlement)
	}
	return in
}

// GetInbound reads one agent's queue row for a message.
func (q *Q) GetInbound(ctx context.Context, agent, message uuid.UUID) (domain.Inbound, error) {
	var r inboundRow
	if err := q.get(ctx, &r, `SELECT * FROM inbound WHERE agent_id = ? AND message_id = ?`, agent, message); err != nil {
		return domain.Inbound{}, fmt.Errorf("inbound %s of agent %s: %w", message, agent, err)
	}
	return r.domain(), nil
}

// ListUnsettled lists an agent's unsettled queue rows in message order (room optional),
// context-only rows included: an owned runtime's next turn shows them as context.
func (q *Q) ListUnsettled(ctx context.Context, agent uuid.UUID, room *uuid.UUID) ([]domain.Inbound, error) {
	query, args := `SELECT * FROM inbound WHERE agent_id = ? AND state <> ?`, []any{agent, domain.InboundSettled}
	if room != nil {
		query, args = query+` AND room_id = ?`, append(args, *room)
	}
	var rows []inboundRow
	if err := q.selectAll(ctx, &rows, query+` ORDER BY seq`, args...); err != nil {
		return nil, fmt.Errorf("unsettled inbound of %s: %w", agent, err)
	}
	out := make([]domain.Inbound, len(rows))
	for i, r := range rows {
		out[i] = r.domain()
	}
	return out, nil
}

// ErrSettledOtherwise: the message was already settled differently; a second, conflicting
// settlement is refused.
var ErrSettledOtherwise = fmt.Errorf("%w: the message is already settled differently", ErrConflict)

// Settle settles one inbound message of an agent: a reply posts text to the room, linked to
// its source; an ack settles without a room message. An identical retry returns the first
// result and changes nothing.
func (q *Q) Settle(ctx context.Context, agent, message uuid.UUID, how domain.Settlement, text string, at time.Time) (domain.Inbound, *domain.Message, error) {
	at = domain.Timestamp(at)
	var (
		in    domain.Inbound
		reply *domain.Message
	)
	err := q.atomic(ctx, func(q *Q) error {
		var err error
		if in, reply, err = q.settle(ctx, agent, message, how, text, at); err != nil {
			return err
		}
		return q.ackContextBefore(ctx, agent, in.RoomID, in.Seq, at)
	})
	if err != nil {
		if errors.Is(err, ErrSettledOtherwise) {
			return domain.Inbound{}, nil, err
		}
		return domain.Inbound{}, nil, fmt.Errorf("settle %s for agent %s: %w", message, agent, err)
	}
	return in, reply, nil
}

// ackContextBefore acknowledges the agent's context rows of the room older than seq: a pull
// receiver never claims context (it wakes no one), and it had the transcript up to the
// message it just settled; left alone, its context rows would stay unsettled for ever.
func (q *Q) ackContextBefore(ctx context.Context, agent, room uuid.UUID, seq int64, at time.Time) error {
	var ids []uuid.UUID
	if err := q.selectAll(ctx, &ids, `SELECT message_id FROM inbound
WHERE agent_id = ? AND room_id = ? AND context_only AND state <> ? AND seq < ? ORDER BY seq`,
		agent, room, domain.InboundSettled, seq); err != nil {
		return fmt.Errorf("context rows of agent %s before %d: %w", agent, seq, err)
	}
	for _, id := range ids {
		if _, _, err := q.settle(ctx, agent, id, domain.SettledAck, "", at); err != nil {
			return err
		}
	}
	return nil
}

// settle is Settle inside the caller's transaction.
func (q *Q) settle(ctx context.Context, agent, message uuid.UUID, how domain.Settlement, text string, at time.Time) (domain.Inbound, *domain.Message, error) {
	in, err := q.GetInbound(ctx, agent, message)
	if err != nil {
		return in, nil, err
	}
	if in.State == domain.InboundSettled {
		if in.Settlement != how {
			return in, nil, ErrSettledOtherwise
		}
		if how != domain.SettledReply {
			return in, nil, nil
		}
		prev, whole, err := q.replyOf(ctx, *in.ReplyMessageID)
		if err != nil {
			return in, nil, err
		}
		if whole != text {
			return in, nil, ErrSettledOtherwise
		}
		if prev, err = q.withQuiet(ctx, prev); err != nil {
			return in, nil, err
		}
		return in, &prev, nil
	}
	var reply *domain.Message
	if how == domain.SettledReply {
		// A reply longer than a message is posted as its parts, in order, each continuing the
		// one before; the inbound row names the first.
		parts := domain.SplitReply(text)
		var prev *uuid.UUID
		for i, part := range parts {
			m := domain.Message{ID: uuid.New(), RoomID: in.RoomID, AuthorKind: domain.ParticipantAgent,
				AuthorAgentID: &agent, Text: part, ReplyTo: &message, Continues: prev, CreatedAt: at}
			if len(parts) > 1 {
				m.Part, m.Parts = i+1, len(parts)
			}
			posted, err := q.postMessage(ctx, m)
			if err != nil {
				return in, nil, err
			}
			if i == 0 {
				reply = &posted
			}
			prev = &posted.ID
		}
		in.ReplyMessageID = &reply.ID
	}
	if _, err := q.exec(ctx, `
UPDATE inbound SET state = ?, settlement = ?, reply_message_id = ?, settled_at = ? WHERE agent_id = ? AND message_id = ?`,
		domain.InboundSettled, how, in.ReplyMessageID, at, agent, message); err != nil {
		return in, nil, err
	}
	in.State, in.Settlement, in.SettledAt = domain.InboundSettled, how, &at
	_, err = q.appendEvents(ctx, at, NewEvent(domain.EventMessageSettled, &in.RoomID, &agent, map[string]any{
		"message_id": message, "settlement": how, "reply_message_id": in.ReplyMessageID,
	}))
	return in, reply, err
}

// replyOf reads a reply by its first message: that message, and the whole reply's text (its
// parts joined, when it was posted in parts).
func (q *Q) replyOf(ctx context.Context, first uuid.UUID) (domain.Message, string, error) {
	m, err := q.GetMessage(ctx, first)
	if err != nil || m.Parts == 0 {
		return m, m.Text, err
	}
	var texts []string
	if err := q.selectAll(ctx, &texts, `
SELECT text FROM messages WHERE room_id = ? AND reply_to = ? AND author_agent_id = ? AND parts > 0 ORDER BY part`,
		m.RoomID, m.ReplyTo, m.AuthorAgentID); err != nil {
		return m, "", fmt.Errorf("parts of reply %s: %w", first, err)
	}
	return m, strings.Join(texts, ""), nil
}
