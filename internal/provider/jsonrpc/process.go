package jsonrpc

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/provider"
)

// errExited closes the connection of a process that exited.
var errExited = fmt.Errorf("the process exited: %w", provider.ErrRuntimeExited)

// Member is a runtime a Process serves.
type Member interface {
	comparable
	// MarkExited tells the runtime its process is gone.
	MarkExited()
}

// Process is one provider process spoken to over JSON-RPC: a runtime's own, or the one the
// members of a Shared runtime host share (Codex threads, Copilot sessions), each member
// reached by its provider session id.
type Process[R Member] struct {
	Child *provider.Child
	Conn  *Conn
	Log   *slog.Logger
	// Version is what the process reported of itself at start ("" when it did not).
	Version string
	s       *provider.Shared[R, *Process[R]]
}

// Pool holds a worker's live processes of one adapter, by Shared runtime host.
type Pool[R Member] struct {
	shared provider.SharedPool[R, *Process[R]]
}

// Attach gives r its process: a new one of its own when key is zero, else its Shared host's,
// started by the first member while later members wait for that. start spawns the child,
// opens the connection (Open) and runs the start handshake; a process whose start failed is
// killed.
func (pool *Pool[R]) Attach(ctx context.Context, key uuid.UUID, r R, log *slog.Logger, start func(p *Process[R]) error) (*Process[R], error) {
	if key != uuid.Nil {
		log = log.With("runtime_host", key)
	}
	s, err := pool.shared.Attach(ctx, key, r, func(s *provider.Shared[R, *Process[R]]) error {
		p := &Process[R]{Log: log, s: s}
		if err := start(p); err != nil {
			if p.Child != nil {
				p.Child.Kill(provider.ChildShutdownGrace)
			}
			return err
		}
		s.Proc = p
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.Proc, nil
}

// Open speaks JSON-RPC with child over its stdio; once child exits, every member has exited
// with it.
func (p *Process[R]) Open(child *provider.Child, opts Options) {
	if opts.Log == nil {
		opts.Log = p.Log
	}
	p.Child, p.Conn = child, New(child.Stdout, child.Stdin, opts)
	child.OnExit(func() {
		// Calls in flight fail now: the output may stay open far longer (a grandchild
		// holding it).
		p.Conn.Close(errExited)
		for _, r := range p.s.Exited() {
			r.MarkExited()
		}
	})
}

// Register routes a provider session's traffic to its runtime.
func (p *Process[R]) Register(session string, r R) { p.s.Register(session, r) }

// Route is the runtime of a provider session.
func (p *Process[R]) Route(session string) (R, bool) { return p.s.Route(session) }

// Leave detaches r; the last runtime out stops the process.
func (p *Process[R]) Leave(r R) {
	if p.s.Release(r) && p.Child != nil {
		p.Child.Kill(provider.ChildShutdownGrace)
	}
}

// Liveness reports the process and its connection.
func (p *Process[R]) Liveness() provider.Liveness {
	open := true
	select {
	case <-p.Conn.Done():
		open = false
	default:
	}
	return provider.LivenessOf(p.Child, open)
}

// Attached is a runtime's hold on its process: none until Set, safe for concurrent use.
type Attached[R Member] struct {
	mu sync.Mutex
	p  *Process[R]
}

// Set records the process the runtime attached to.
func (a *Attached[R]) Set(p *Process[R]) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.p = p
}

// Get is the process (nil before Set).
func (a *Attached[R]) Get() *Process[R] {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.p
}

// Leave detaches r from its process, if it has one; the last runtime out stops it.
func (a *Attached[R]) Leave(r R) {
	if p := a.Get(); p != nil {
		p.Leave(r)
	}
}

// Liveness reports the process and its connection (zero before Set).
func (a *Attached[R]) Liveness() provider.Liveness {
	if p := a.Get(); p != nil {
		return p.Liveness()
	}
	return provider.Liveness{}
}
