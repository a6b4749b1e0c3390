package store

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lib/pq"
)

// On Postgres, event ids come from a sequence and writers in different scopes run side by
// side, so id 11 may commit while id 10's transaction is still open. A reader that tailed
// "after 11" would skip 10 for ever. Readers therefore stop at the settled horizon: the
// highest id below which every id is committed or will never be.
//
// A round reads the sequence's last issued id V, then the transactions holding the writer
// lock (every writer takes it before it reserves an id). Any id ≤ V was reserved by a
// transaction that held the lock when V was read; if it still runs, it is among those
// holders. Once none of them holds the lock any more, each has committed or rolled back,
// and V is settled. Postgres releases a transaction's locks only after its commit is visible
// to new snapshots, and the events are read by a later statement than the round's, so a
// settled id is visible to that read.
//
// Rounds whose writers are still running stay pending; a later round drains them. Rounds
// are taken one at a time per process (the mutex spans the query), so a round is only ever
// checked against holders read after its own. SQLite has one writer at a time and issues
// ids in commit order: every id it shows is settled.
type horizon struct {
	mu      sync.Mutex
	settled int64
	pending []horizonRound
	// rekick is set while a timer is armed to wake the tailers for a pending round.
	rekick bool
}

type horizonRound struct {
	upTo    int64
	writers []string // virtual transaction ids (backend/local), unique while they run
}

// maxPendingRounds bounds memory while a long writer holds rounds open.
const maxPendingRounds = 16

// rekickAfter is how soon the tailers look again while a round waits on running writers.
// A writer that commits events wakes them anyway; this covers one that rolls back or
// writes no events.
const rekickAfter = 5 * time.Millisecond

var horizonQuery = fmt.Sprintf(`
WITH issued AS MATERIALIZED (
  SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END AS v FROM event_ids)
SELECT issued.v AS v, ARRAY(
  SELECT l.virtualtransaction FROM pg_locks l
  WHERE issued.v IS NOT NULL AND l.locktype = 'advisory' AND l.granted
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
    AND l.classid = %d AND l.objid = %d AND l.objsubid = 1
    AND l.pid <> pg_backend_pid()) AS writers
FROM issued`, uint64(writerLockKey)>>32, uint64(writerLockKey)&0xffffffff)

// settledEventID returns the settled horizon on Postgres without waiting: ids committed by
// writers still beside others may show a little later (the tailers are woken again).
func (s *Store) settledEventID(ctx context.Context) (int64, error) {
	settled, _, err := s.horizonRound(ctx)
	return settled, err
}

// settledEventIDNow waits until every id issued when it was called is settled: what
// "now" means for a reader that starts tailing. The writers it waits for are transactions
// already running, so the wait is as long as the slowest of them.
func (s *Store) settledEventIDNow(ctx context.Context) (int64, error) {
	settled, issued, err := s.horizonRound(ctx)
	for wait := 200 * time.Microsecond; err == nil && settled < issued; wait = min(2*wait, 20*time.Millisecond) {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(wait):
		}
		settled, _, err = s.horizonRound(ctx)
	}
	return settled, err
}

// horizonRound takes one round and returns the settled horizon and the last issued id. The
// sequence is read before the holders (the MATERIALIZED CTE is evaluated before the
// subquery that depends on it).
func (s *Store) horizonRound(ctx context.Context) (settled, issued int64, err error) {
	h := &s.horizon
	h.mu.Lock()
	defer h.mu.Unlock()
	var r struct {
		V       int64          `db:"v"`
		Writers pq.StringArray `db:"writers"`
	}
	if err := s.db.GetContext(ctx, &r, horizonQuery); err != nil {
		return 0, 0, fmt.Errorf("event horizon: %w", classify(err))
	}
	kept := h.pending[:0]
	for _, p := range h.pending {
		if !slices.ContainsFunc(p.writers, func(w string) bool { return slices.Contains(r.Writers, w) }) {
			h.settled = max(h.settled, p.upTo) // all its writers have ended
			continue
		}
		if p.upTo > h.settled {
			kept = append(kept, p)
		}
	}
	h.pending = kept
	switch {
	case len(r.Writers) == 0:
		h.settled, h.pending = max(h.settled, r.V), h.pending[:0]
	case r.V > h.settled:
		round := horizonRound{upTo: r.V, writers: slices.Clone(r.Writers)}
		if len(h.pending) == maxPendingRounds {
			h.pending[len(h.pending)-1] = round // keep the oldest: they drain first
		} else {
			h.pending = append(h.pending, round)
		}
	}
	if len(h.pending) > 0 && !h.rekick {
		h.rekick = true
		time.AfterFunc(rekickAfter, func() {
			h.mu.Lock()
			h.rekick = false
			h.mu.Unlock()
			s.runEventHooks()
		})
	}
	return h.settled, r.V, nil
}
