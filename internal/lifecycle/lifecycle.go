// Package lifecycle is the seam between membership, messages and run intent, which the API
// and the local Band change, and the runtimes that follow them. roomctl.Starter implements
// Starter on the RoomSession workflows; Recorder records calls for tests that need no
// runtime.
package lifecycle

import (
	"context"
	"log/slog"
	"sync"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// Starter is told about every change that should start, stop or retire runtimes. Calls come
// after the change is durable and may repeat; implementations must be idempotent.
type Starter interface {
	// RoomBound: an owned agent's room binding is active (new, reused or unchanged). fresh
	// is true when this call made a new binding (not a reused tombstone): its room session
	// has never run and has nothing queued.
	RoomBound(ctx context.Context, b domain.Binding, fresh bool) error
	// RoomInbound: a message was queued for the binding's agent in its room (a poke; the
	// queue in the database is the truth).
	RoomInbound(ctx context.Context, b domain.Binding) error
	// RoomUnbound: the binding became an inactive tombstone; the runtime must stop.
	RoomUnbound(ctx context.Context, b domain.Binding) error
	// AgentRunIntent: the agent's persisted run intent changed (stop, start or restart).
	AgentRunIntent(ctx context.Context, agent uuid.UUID, intent domain.RunIntent, restart bool) error
	// AgentDeleting: stop every runtime of the agent before its records are deleted.
	AgentDeleting(ctx context.Context, agent uuid.UUID) error
}

// Call is one recorded Starter call.
type Call struct {
	Method  string
	Binding domain.Binding
	Agent   uuid.UUID
	Intent  domain.RunIntent
	Restart bool
	// Fresh is RoomBound's: the binding is new.
	Fresh bool
}

// Recorder is a Starter that starts nothing: it logs each call and keeps it for inspection.
type Recorder struct {
	Log   *slog.Logger
	mu    sync.Mutex
	calls []Call
}

// maxRecorded bounds the calls a Recorder keeps: it runs in `jam dev` and `jam server`.
const maxRecorded = 1000

func (r *Recorder) record(c Call) {
	r.mu.Lock()
	if len(r.calls) == maxRecorded {
		r.calls = append(r.calls[:0], r.calls[1:]...)
	}
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	if r.Log != nil {
		r.Log.Info("lifecycle (recorded, no runtime started)", "call", c.Method, "agent", c.Agent,
			"runtime_session", c.Binding.RuntimeSessionID, "room", c.Binding.RoomID)
	}
}

func (r *Recorder) RoomBound(_ context.Context, b domain.Binding, fresh bool) error {
	r.record(Call{Method: "RoomBound", Binding: b, Agent: b.AgentID, Fresh: fresh})
	return nil
}

func (r *Recorder) RoomInbound(_ context.Context, b domain.Binding) error {
	r.record(Call{Method: "RoomInbound", Binding: b, Agent: b.AgentID})
	return nil
}

func (r *Recorder) RoomUnbound(_ context.Context, b domain.Binding) error {
	r.record(Call{Method: "RoomUnbound", Binding: b, Agent: b.AgentID})
	return nil
}

func (r *Recorder) AgentRunIntent(_ context.Context, agent uuid.UUID, intent domain.RunIntent, restart bool) error {
	r.record(Call{Method: "AgentRunIntent", Agent: agent, Intent: intent, Restart: restart})
	return nil
}

func (r *Recorder) AgentDeleting(_ context.Context, agent uuid.UUID) error {
	r.record(Call{Method: "AgentDeleting", Agent: agent})
	return nil
}

// Calls returns a copy of the calls kept (the newest maxRecorded).
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}
