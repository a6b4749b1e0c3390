package provider

import (
	"context"
	"fmt"
	"sync"

	"github.com/google/uuid"
)

// SharedPool holds the live processes that serve a Shared runtime host's rooms, one per host:
// adapters whose provider runs several sessions in one process (Codex threads, Copilot
// sessions) attach each room's runtime R to its host's process P.
type SharedPool[R comparable, P any] struct {
	mu    sync.Mutex
	procs map[uuid.UUID]*Shared[R, P]
}

// Shared is one provider process and the runtimes it serves, each reached by its provider
// session id.
type Shared[R comparable, P any] struct {
	// Key is the Shared host; zero for a session's own process (never pooled).
	Key uuid.UUID
	// Proc is the adapter's process, filled in by the start function.
	Proc P
	pool *SharedPool[R, P]

	mu      sync.Mutex
	routes  map[string]R
	members map[R]bool
	dead    bool
	// ready is closed once the first member's start ended; err says how.
	ready chan struct{}
	err   error
}

// Attach gives r its process: a new one of its own when key is zero, else its host's, started
// by the first member (start fills in Proc) while later members wait for that. A start that
// fails leaves no process behind for the next member.
func (pool *SharedPool[R, P]) Attach(ctx context.Context, key uuid.UUID, r R, start func(*Shared[R, P]) error) (*Shared[R, P], error) {
	if key == uuid.Nil {
		s := newShared(pool, key)
		s.members[r] = true
		err := start(s)
		close(s.ready)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	pool.mu.Lock()
	if pool.procs == nil {
		pool.procs = map[uuid.UUID]*Shared[R, P]{}
	}
	s, ok := pool.procs[key]
	if ok {
		s.mu.Lock()
		ok = !s.dead
		if ok {
			s.members[r] = true
		}
		s.mu.Unlock()
	}
	if ok {
		pool.mu.Unlock()
		select {
		case <-s.ready:
		case <-ctx.Done():
			s.Release(r)
			return nil, fmt.Errorf("wait for the shared provider process: %w", context.Cause(ctx))
		}
		if s.err != nil {
			s.Release(r)
			return nil, s.err
		}
		return s, nil
	}
	s = newShared(pool, key)
	s.members[r] = true
	pool.procs[key] = s
	pool.mu.Unlock()
	s.err = start(s)
	close(s.ready)
	if s.err != nil {
		s.Release(r)
		return nil, s.err
	}
	return s, nil
}

func newShared[R comparable, P any](pool *SharedPool[R, P], key uuid.UUID) *Shared[R, P] {
	return &Shared[R, P]{Key: key, pool: pool, routes: map[string]R{}, members: map[R]bool{}, ready: make(chan struct{})}
}

// Exited marks the process gone (a later member starts a new one) and returns the runtimes it
// served: each has exited with it.
func (s *Shared[R, P]) Exited() []R {
	s.mu.Lock()
	s.dead = true
	members := make([]R, 0, len(s.members))
	for r := range s.members {
		members = append(members, r)
	}
	s.mu.Unlock()
	s.forget()
	return members
}

// forget drops a pooled process from its pool.
func (s *Shared[R, P]) forget() {
	if s.Key == uuid.Nil {
		return
	}
	s.pool.mu.Lock()
	if s.pool.procs[s.Key] == s {
		delete(s.pool.procs, s.Key)
	}
	s.pool.mu.Unlock()
}

// Register routes a provider session's traffic to its runtime.
func (s *Shared[R, P]) Register(route string, r R) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.routes[route] = r
}

// Route is the runtime of a provider session.
func (s *Shared[R, P]) Route(route string) (R, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.routes[route]
	return r, ok
}

// Release detaches a runtime; it reports whether it was the last, whose caller stops the
// process (it is out of the pool by then, so no new member joins it).
func (s *Shared[R, P]) Release(r R) (last bool) {
	s.mu.Lock()
	delete(s.members, r)
	for id, m := range s.routes {
		if m == r {
			delete(s.routes, id)
		}
	}
	last = len(s.members) == 0
	s.mu.Unlock()
	if last {
		s.forget()
	}
	return last
}
