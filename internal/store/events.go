package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/lib/pq"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/schema"
)

// EventRetention is how many of the newest events the log keeps; a client resuming from an
// older id is told it missed events.
const EventRetention = 100_000

// eventsChannel is the Postgres NOTIFY channel that wakes other processes' event tailers.
const eventsChannel = "jam_events"

// nextSeq reserves n consecutive numbers of a counter and returns the last one. The counter
// row stays locked until the transaction ends, so numbers are issued in commit order.
func (q *Q) nextSeq(ctx context.Context, name string, n int64) (int64, error) {
	var last int64
	if err := q.get(ctx, &last, `UPDATE counters SET value = value + ? WHERE name = ? RETURNING value`, n, name); err != nil {
		return 0, fmt.Errorf("counter %s: %w", name, err)
	}
	return last, nil
}

// NewEvent builds an event with a JSON payload.
func NewEvent(kind domain.EventKind, room, agent *uuid.UUID, payload any) domain.Event {
	raw, err := json.Marshal(payload)
	if err != nil {
		// Payloads are Jam's own structs; failing to encode one is a programming error.
		panic(fmt.Sprintf("encode %s event: %v", kind, err))
	}
	return domain.Event{Kind: kind, RoomID: room, AgentID: agent, Payload: raw}
}

// appendEvents writes events to the log inside the caller's transaction and arranges for
// the tailers to be woken once it commits.
func (q *Q) appendEvents(ctx context.Context, at time.Time, evs ...domain.Event) ([]domain.Event, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	first, err := q.reserveEvents(ctx, len(evs))
	if err != nil {
		return nil, err
	}
	for i := range evs {
		evs[i].ID = first + int64(i)
	}
	return evs, q.insertEvents(ctx, at, evs)
}

// reserveEvents takes n consecutive event ids and returns the first. A writer that needs an
// id before it writes the event (a message's seq is its message_posted event's id) reserves
// first and inserts later, in the same transaction.
func (q *Q) reserveEvents(ctx context.Context, n int) (int64, error) {
	if !q.inTx {
		return 0, fmt.Errorf("append events: %w", errNotInTx)
	}
	last, err := q.nextSeq(ctx, "events", int64(n))
	if err != nil {
		return 0, err
	}
	return last - int64(n) + 1, nil
}

// insertEvents writes events whose ids were reserved, in one statement, and on Postgres
// notifies the other processes' tailers in the same round trip.
func (q *Q) insertEvents(ctx context.Context, at time.Time, evs []domain.Event) error {
	at = domain.Timestamp(at)
	values := make([]string, len(evs))
	args := make([]any, 0, 6*len(evs)+1)
	for i := range evs {
		evs[i].CreatedAt = at
		values[i] = "(?, ?, ?, ?, ?, ?)"
		args = append(args, evs[i].ID, evs[i].Kind, evs[i].RoomID, evs[i].AgentID, string(evs[i].Payload), at)
	}
	insert := `INSERT INTO events (id, kind, room_id, agent_id, payload, created_at) VALUES ` + strings.Join(values, ", ")
	if q.store.dialect == schema.Postgres {
		insert = `WITH written AS (` + insert + ` RETURNING 1) SELECT pg_notify(?, '') FROM written LIMIT 1`
		args = append(args, eventsChannel)
	}
	if _, err := q.exec(ctx, insert, args...); err != nil {
		return fmt.Errorf("append %d events (%s…): %w", len(evs), evs[0].Kind, err)
	}
	q.appendedEvents = true
	return nil
}

// EventFilter narrows an event listing; nil fields match everything.
type EventFilter struct {
	Room  *uuid.UUID
	Agent *uuid.UUID
}

// Matches reports whether an event passes the filter.
func (f EventFilter) Matches(e domain.Event) bool {
	if f.Room != nil && (e.RoomID == nil || *e.RoomID != *f.Room) {
		return false
	}
	if f.Agent != nil && (e.AgentID == nil || *e.AgentID != *f.Agent) {
		return false
	}
	return true
}

type eventRow struct {
	ID        int64      `db:"id"`
	Kind      string     `db:"kind"`
	RoomID    *uuid.UUID `db:"room_id"`
	AgentID   *uuid.UUID `db:"agent_id"`
	Payload   string     `db:"payload"`
	CreatedAt time.Time  `db:"created_at"`
}

// ListEvents returns up to limit events after id `after`, in id order.
func (q *Q) ListEvents(ctx context.Context, after int64, f EventFilter, limit int) ([]domain.Event, error) {
	var where []string
	args := []any{after}
	if f.Room != nil {
		where = append(where, "room_id = ?")
		args = append(args, *f.Room)
	}
	if f.Agent != nil {
		where = append(where, "agent_id = ?")
		args = append(args, *f.Agent)
	}
	query := `SELECT id, kind, room_id, agent_id, payload, created_at FROM events WHERE id > ?`
	for _, w := range where {
		query += " AND " + w
	}
	query += ` ORDER BY id LIMIT ?`
	args = append(args, limit)
	var rows []eventRow
	if err := q.selectAll(ctx, &rows, query, args...); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	out := make([]domain.Event, len(rows))
	for i, r := range rows {
		out[i] = domain.Event{ID: r.ID, Kind: domain.EventKind(r.Kind), RoomID: r.RoomID, AgentID: r.AgentID,
			Payload: json.RawMessage(r.Payload), CreatedAt: utc(r.CreatedAt)}
	}
	return out, nil
}

// EventBounds returns the oldest retained and the newest event ids (0, 0 when empty).
func (q *Q) EventBounds(ctx context.Context) (oldest, newest int64, err error) {
	var b struct {
		Oldest *int64 `db:"oldest"`
		Newest *int64 `db:"newest"`
	}
	if err := q.get(ctx, &b, `SELECT MIN(id) AS oldest, MAX(id) AS newest FROM events`); err != nil {
		return 0, 0, fmt.Errorf("event bounds: %w", err)
	}
	if b.Oldest != nil {
		oldest = *b.Oldest
	}
	if b.Newest != nil {
		newest = *b.Newest
	}
	return oldest, newest, nil
}

// PruneEvents drops events older than the newest `keep`.
func (q *Q) PruneEvents(ctx context.Context, keep int64) (int64, error) {
	_, newest, err := q.EventBounds(ctx)
	if err != nil || newest <= keep {
		return 0, err
	}
	res, err := q.exec(ctx, `DELETE FROM events WHERE id <= ?`, newest-keep)
	if err != nil {
		return 0, fmt.Errorf("prune events: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// OnEventsCommitted registers fn to run after every transaction that appended events
// commits, in this process. Tailers use it to wake without polling.
func (s *Store) OnEventsCommitted(fn func()) {
	s.hooksMu.Lock()
	defer s.hooksMu.Unlock()
	s.eventHooks = append(s.eventHooks, fn)
}

func (s *Store) eventsCommitted() {
	s.hooksMu.Lock()
	hooks := append([]func(){}, s.eventHooks...)
	s.hooksMu.Unlock()
	for _, fn := range hooks {
		fn()
	}
}

// ListenEvents calls fn whenever another process commits events (Postgres LISTEN/NOTIFY),
// until ctx ends. On SQLite, which one process owns, it returns at once.
func (s *Store) ListenEvents(ctx context.Context, fn func()) error {
	if s.dialect != schema.Postgres {
		return nil
	}
	l := pq.NewListener(s.dsn, 100*time.Millisecond, 10*time.Second, nil)
	defer l.Close()
	if err := l.Listen(eventsChannel); err != nil {
		return fmt.Errorf("listen %s: %w", eventsChannel, err)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-l.Notify:
			// A nil notification means the connection was re-established; events may have
			// been missed, which a wake-up also covers.
			fn()
		case <-time.After(90 * time.Second):
			go func() { _ = l.Ping() }()
		}
	}
}
