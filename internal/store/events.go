package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
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
	ids, err := q.reserveEvents(ctx, len(evs))
	if err != nil {
		return nil, err
	}
	for i := range evs {
		evs[i].ID = ids[i]
	}
	return evs, q.insertEvents(ctx, at, evs)
}

// reserveEvents takes n event ids, ascending. A writer that needs an id before it writes the
// event (a message's seq is its message_posted event's id) reserves first and inserts later,
// in the same transaction. SQLite issues consecutive ids from the counters row, locked to
// the end of the transaction, so in commit order. Postgres issues them from the event_ids
// sequence: not necessarily consecutive, and a later id may commit first; readers stop at
// the settled horizon (horizon.go), which no id still to be committed is below.
func (q *Q) reserveEvents(ctx context.Context, n int) ([]int64, error) {
	if !q.inTx {
		return nil, fmt.Errorf("append events: %w", errNotInTx)
	}
	if q.store.dialect == schema.Postgres {
		var ids []int64
		if err := q.selectAll(ctx, &ids, `SELECT nextval('event_ids') FROM generate_series(1, ?::int)`, n); err != nil {
			return nil, fmt.Errorf("reserve %d event ids: %w", n, err)
		}
		slices.Sort(ids)
		return ids, nil
	}
	last, err := q.nextSeq(ctx, "events", int64(n))
	if err != nil {
		return nil, err
	}
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = last - int64(n) + 1 + int64(i)
	}
	return ids, nil
}

// insertEvents writes events whose ids were reserved, in one statement; the tailers are
// woken once the transaction commits.
func (q *Q) insertEvents(ctx context.Context, at time.Time, evs []domain.Event) error {
	if err := q.execAll(ctx, q.eventsInsert(at, evs)); err != nil {
		return fmt.Errorf("append %d events (%s…): %w", len(evs), evs[0].Kind, err)
	}
	return nil
}

// eventsInsert is the statement that writes events whose ids were reserved; running it in
// this transaction wakes the tailers once the transaction commits.
func (q *Q) eventsInsert(at time.Time, evs []domain.Event) statement {
	at = domain.Timestamp(at)
	values := make([]string, len(evs))
	args := make([]any, 0, 6*len(evs))
	for i := range evs {
		evs[i].CreatedAt = at
		values[i] = "(?, ?, ?, ?, ?, ?)"
		args = append(args, evs[i].ID, evs[i].Kind, evs[i].RoomID, evs[i].AgentID, string(evs[i].Payload), at)
	}
	q.appendedEvents = true
	return statement{query: `INSERT INTO events (id, kind, room_id, agent_id, payload, created_at) VALUES ` + strings.Join(values, ", "), args: args}
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

// ListEvents returns up to limit events after id `after`, in id order. It never returns an
// id above the settled horizon (horizon.go), so a reader that goes on "after the last id it
// got" never skips an event a slower transaction commits later.
func (q *Q) ListEvents(ctx context.Context, after int64, f EventFilter, limit int) ([]domain.Event, error) {
	query := `SELECT id, kind, room_id, agent_id, payload, created_at FROM events WHERE id > ?`
	args := []any{after}
	if q.store.dialect == schema.Postgres {
		settled, err := q.store.settledEventID(ctx)
		if err != nil {
			return nil, fmt.Errorf("list events: %w", err)
		}
		if settled <= after {
			return nil, nil
		}
		query, args = query+` AND id <= ?`, append(args, settled)
	}
	if f.Room != nil {
		query, args = query+` AND room_id = ?`, append(args, *f.Room)
	}
	if f.Agent != nil {
		query, args = query+` AND agent_id = ?`, append(args, *f.Agent)
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

// EventBounds returns the oldest retained event id and the newest settled one (0, 0 when
// empty). On Postgres it waits until every id issued when it was called is settled, so a
// reader that starts after `newest` misses nothing committed later, and every id a client
// was shown earlier is at most `newest`.
func (q *Q) EventBounds(ctx context.Context) (oldest, newest int64, err error) {
	oldest, latest, err := q.eventRange(ctx)
	if err != nil || q.store.dialect != schema.Postgres {
		return oldest, latest, err
	}
	if newest, err = q.store.settledEventIDNow(ctx); err != nil {
		return 0, 0, fmt.Errorf("event bounds: %w", err)
	}
	return oldest, newest, nil
}

func (q *Q) eventRange(ctx context.Context) (oldest, newest int64, err error) {
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
	if s.notifyKick != nil {
		select {
		case s.notifyKick <- struct{}{}:
		default: // one is pending already; it covers this commit too
		}
	}
	s.runEventHooks()
}

func (s *Store) runEventHooks() {
	s.hooksMu.Lock()
	hooks := append([]func(){}, s.eventHooks...)
	s.hooksMu.Unlock()
	for _, fn := range hooks {
		fn()
	}
}

// notifyLoop tells other processes' tailers that events were committed. The NOTIFY is its
// own statement after the commit, not part of the writing transaction: Postgres serialises
// the commits of notifying transactions on one lock, which would line every writer up
// again. Kicks that arrive while one is sent coalesce into one more. A NOTIFY lost to a
// crash between commit and send costs the other processes their fallback poll.
func (s *Store) notifyLoop() {
	defer close(s.notifyDone)
	send := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = s.db.ExecContext(ctx, `SELECT pg_notify($1, '')`, eventsChannel)
	}
	for {
		select {
		case <-s.notifyKick:
			send()
		case <-s.notifyStop:
			select {
			case <-s.notifyKick:
				send()
			default:
			}
			return
		}
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
