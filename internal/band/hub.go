// Package band is Jam's local Band: rooms, participants, messages, the durable per-agent
// inbound queue, pull-receive leases and the event stream, all in Jam's own store. The API
// reaches it through the Band interface so a remote Band can replace it later.
package band

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
)

const (
	// tailBatch bounds one read of the event log.
	tailBatch = 500
	// tailPoll is the fallback poll when no wake-up arrives (a lost NOTIFY, say).
	tailPoll = time.Second
	// pruneEvery is how many tailed events pass between retention prunes.
	pruneEvery = 1000
)

// Hub tails the event log in id order and fans each event out to the subscriptions whose
// filter it matches. It is woken in-process when a transaction that wrote events commits,
// across processes by Postgres NOTIFY, and polls as a fallback. The store lists events only
// up to its settled horizon, so tailing "after the last id" never skips an event.
type Hub struct {
	store *store.Store
	log   *slog.Logger
	wake  chan struct{}

	mu   sync.Mutex
	subs map[*Subscription]struct{}
	last int64
}

// Subscription receives matching events on C until it is closed. A subscriber that falls a
// whole buffer behind is dropped: C is closed and Overflowed reports true.
type Subscription struct {
	C          <-chan domain.Event
	c          chan domain.Event
	filter     store.EventFilter
	hub        *Hub
	overflowed bool
	closed     bool
}

// NewHub builds a hub over the store's event log; Run starts it.
func NewHub(st *store.Store, log *slog.Logger) *Hub {
	h := &Hub{store: st, log: log, wake: make(chan struct{}, 1), subs: map[*Subscription]struct{}{}}
	st.OnEventsCommitted(h.Wake)
	return h
}

// Wake asks the tailer to read the log now; calls coalesce.
func (h *Hub) Wake() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Start positions the tailer after the newest event existing now and tails the log in the
// background until ctx ends: every event committed after Start returns is broadcast.
func (h *Hub) Start(ctx context.Context) error {
	_, newest, err := h.store.EventBounds(ctx)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.last = newest
	h.mu.Unlock()
	go func() {
		if err := h.store.ListenEvents(ctx, h.Wake); err != nil {
			h.log.Warn("event notifications unavailable; polling", "error", err)
		}
	}()
	go h.tail(ctx)
	return nil
}

func (h *Hub) tail(ctx context.Context) {
	t := time.NewTicker(tailPoll)
	defer t.Stop()
	sincePrune := 0
	for {
		select {
		case <-ctx.Done():
			h.closeAll()
			return
		case <-h.wake:
		case <-t.C:
		}
		n, err := h.drain(ctx)
		if err != nil && ctx.Err() == nil {
			h.log.Warn("event tail failed", "error", err)
		}
		if sincePrune += n; sincePrune >= pruneEvery {
			sincePrune = 0
			if _, err := h.store.PruneEvents(ctx, store.EventRetention); err != nil && ctx.Err() == nil {
				h.log.Warn("event retention prune failed", "error", err)
			}
		}
	}
}

func (h *Hub) drain(ctx context.Context) (int, error) {
	total := 0
	for {
		h.mu.Lock()
		after := h.last
		h.mu.Unlock()
		evs, err := h.store.ListEvents(ctx, after, store.EventFilter{}, tailBatch)
		if err != nil {
			return total, err
		}
		h.broadcast(evs)
		total += len(evs)
		if len(evs) < tailBatch {
			return total, nil
		}
	}
}

func (h *Hub) broadcast(evs []domain.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range evs {
		for s := range h.subs {
			if !s.filter.Matches(e) {
				continue
			}
			select {
			case s.c <- e:
			default:
				s.overflowed = true
				h.dropLocked(s)
			}
		}
		h.last = e.ID
	}
}

// Subscribe starts delivering events that match f, with a buffer of buf events.
func (h *Hub) Subscribe(f store.EventFilter, buf int) *Subscription {
	c := make(chan domain.Event, buf)
	s := &Subscription{C: c, c: c, filter: f, hub: h}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

// Close stops delivery; it is safe to call more than once.
func (s *Subscription) Close() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	s.hub.dropLocked(s)
}

// Overflowed reports whether the hub dropped this subscriber for falling behind.
func (s *Subscription) Overflowed() bool {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return s.overflowed
}

func (h *Hub) dropLocked(s *Subscription) {
	if s.closed {
		return
	}
	s.closed = true
	delete(h.subs, s)
	close(s.c)
}

func (h *Hub) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		h.dropLocked(s)
	}
}
