// Package codex is the provider.Runtime of `codex app-server` (OpenAI Codex): one app-server
// child per runtime session (one per Shared host, its member rooms routed by thread id), one
// Codex thread bound to each session (thread/start, or thread/resume of
// the bound thread, never a silent fresh one), one Codex turn per Jam turn, steering with
// turn/steer, Jam's tool registry as dynamic tools (settlement through jam_reply_to_message and
// jam_no_reply), and
// command and file-change approvals through the permission broker.
package codex

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/tools"
)

// Bounds of the adapter's own waits.
var (
	// PrepareTimeout bounds the handshake when the spec names no readiness bound.
	PrepareTimeout = 60 * time.Second
	// InterruptGrace is how long an interrupted turn may take to end before the app-server
	// is killed: it would otherwise keep working on an abandoned turn.
	InterruptGrace = 10 * time.Second
	// OverloadDelays are the waits before retrying a turn the model refused as overloaded
	// (Codex has already retried its stream by then) and a turn/start refused with -32001.
	OverloadDelays = []time.Duration{2 * time.Second, 8 * time.Second}
)

// ClientVersion is what Jam reports to the app-server.
const ClientVersion = "1"

// identity is the name Jam gives the provider in events.
const identity = "Codex"

// Runtime is one `codex app-server` child serving one runtime session.
type Runtime struct {
	spec    provider.Spec
	log     *slog.Logger
	stamper *provider.Stamper
	// roster is what the runtime has been told of its room.
	roster *provider.RosterTracker
	stderr *provider.TailBuffer

	// prepMu serializes Prepare and Teardown; mu guards the fields below and is never held
	// across a protocol call.
	prepMu     sync.Mutex
	mu         sync.Mutex
	p          *proc
	thread     string
	version    string
	prepared   bool
	tornDown   bool
	stopping   bool
	prepCancel context.CancelFunc
	turn       *turnState
	// tools are Jam's runtime tools, offered as dynamic tools.
	tools     provider.ToolCaller
	exited    chan struct{}
	closeOnce sync.Once
}

var _ provider.Runtime = (*Runtime)(nil)

// New builds an unprepared Codex runtime.
func New(spec provider.Spec) (provider.Runtime, error) {
	if spec.Executable == "" {
		return nil, fmt.Errorf("codex runtime: no executable: %w", provider.ErrInvalidSpec)
	}
	if spec.Dir == "" {
		return nil, fmt.Errorf("codex runtime: no working directory: %w", provider.ErrInvalidSpec)
	}
	log := spec.Log
	if log == nil {
		log = slog.Default()
	}
	log = log.With("runtime_session", spec.RuntimeSession, "generation", spec.Generation, "transport", spec.Transport)
	r := &Runtime{
		spec: spec, log: log, tools: spec.Tools,
		stamper: spec.Stamper(true),
		roster:  provider.NewRosterTracker(spec.Roster),
		stderr:  provider.NewTailBuffer(16 << 10),
		exited:  make(chan struct{}),
	}
	if r.tools == nil {
		// Settlement needs the disposition tools even where Jam wires no registry (adapter
		// tests): the built-in registry limited to them, staging into this runtime.
		local := tools.Builtin().Session(tools.Identity{AgentID: spec.AgentID, RoomID: spec.RoomID,
			RuntimeSession: spec.RuntimeSession, Generation: spec.Generation}, nil, domain.ScopeSettle)
		local.Bind(r)
		r.tools = local
	}
	return r, nil
}

// Prepare spawns the app-server, initializes it and binds the thread: thread/resume of the
// bound thread, else thread/start. Anything it started is reaped when it fails.
func (r *Runtime) Prepare(ctx context.Context) (provider.Prepared, error) {
	r.prepMu.Lock()
	defer r.prepMu.Unlock()
	r.mu.Lock()
	switch {
	case r.tornDown || r.stopping:
		r.mu.Unlock()
		return provider.Prepared{}, fmt.Errorf("prepare: %w", provider.ErrNotPrepared)
	case r.prepared:
		p := r.preparedLocked()
		r.mu.Unlock()
		return p, nil
	}
	ctx, cancelReady := provider.WithReadiness(ctx, r.spec.ReadyTimeout, PrepareTimeout, "the app-server")
	defer cancelReady()
	ctx, cancelPrep := context.WithCancel(ctx)
	defer cancelPrep()
	r.prepCancel = cancelPrep
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.prepCancel = nil
		r.mu.Unlock()
	}()

	p, err := r.attach(ctx)
	if err == nil {
		r.mu.Lock()
		r.p = p
		r.mu.Unlock()
		err = r.handshake(ctx, p)
		if err != nil {
			p.release(r)
		}
	}
	if err != nil {
		if tail := r.stderr.String(); tail != "" {
			r.log.Warn("codex app-server failed to prepare", "stderr_tail", tail)
		}
		if nr := provider.NotReady(ctx); nr != nil {
			return provider.Prepared{}, fmt.Errorf("prepare codex runtime: %w", nr)
		}
		return provider.Prepared{}, fmt.Errorf("prepare codex runtime: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prepared = true
	return r.preparedLocked(), nil
}

func (r *Runtime) preparedLocked() provider.Prepared {
	pid := 0
	if r.p != nil {
		pid = r.p.child.PID()
	}
	return provider.Prepared{ProviderSessionID: r.thread, Resumed: r.spec.ProviderSessionID != "",
		Identity: identity, Version: r.version, PID: pid}
}

// threadResult is the part of a thread/start or thread/resume result Jam reads.
type threadResult struct {
	Thread struct {
		ID         string `json:"id"`
		Path       string `json:"path"`
		CLIVersion string `json:"cliVersion"`
	} `json:"thread"`
	Model string `json:"model"`
}

// handshake binds the session's thread on the initialized process: thread/resume of the
// bound thread (exactly that one, or ErrExactResumeUnavailable), else thread/start.
func (r *Runtime) handshake(ctx context.Context, p *proc) error {
	c := p.c
	r.stamper.Emit(provider.AgentEvent{Kind: domain.AgentRuntimeIdentity, Text: identity})
	params := r.threadParams()
	var res threadResult
	if want := r.spec.ProviderSessionID; want != "" {
		params["threadId"] = want
		if err := c.call(ctx, "thread/resume", params, &res); err != nil {
			if ctx.Err() != nil {
				return err // out of time is not evidence the thread is gone
			}
			return fmt.Errorf("%w: thread/resume %s: %w", provider.ErrExactResumeUnavailable, want, err)
		}
		if res.Thread.ID != want {
			return fmt.Errorf("%w: thread/resume %s answered with thread %q", provider.ErrExactResumeUnavailable, want, res.Thread.ID)
		}
	} else {
		if err := c.call(ctx, "thread/start", params, &res); err != nil {
			return err
		}
		if res.Thread.ID == "" {
			return errors.New("thread/start: the app-server returned no thread id")
		}
	}
	r.mu.Lock()
	r.thread, r.version = res.Thread.ID, domain.Truncate(res.Thread.CLIVersion, 100)
	r.mu.Unlock()
	p.register(res.Thread.ID, r)
	if r.spec.ProviderSessionID == "" {
		r.stamper.Emit(provider.AgentEvent{Kind: domain.AgentProviderSessionBound, ProviderSessionID: res.Thread.ID})
	}
	return nil
}

// Teardown retires the instance (it can no longer emit), ends a running turn and detaches
// from its process; the last runtime out reaps the process group (closing stdin stops the
// app-server, whose threads are already on disk). It is idempotent.
func (r *Runtime) Teardown(_ context.Context, reason domain.CheckpointReason) error {
	r.stamper.Retire()
	r.mu.Lock()
	r.stopping = true
	if r.prepCancel != nil {
		r.prepCancel()
	}
	r.mu.Unlock()
	r.prepMu.Lock()
	defer r.prepMu.Unlock()
	r.mu.Lock()
	if r.tornDown {
		r.mu.Unlock()
		return nil
	}
	r.tornDown = true
	if r.turn != nil && r.p != nil && r.p.child.Alive() {
		r.turn.interrupted = true
		r.turn.interrupt()
	}
	p := r.p
	r.mu.Unlock()
	r.log.Info("codex runtime teardown", "reason", reason)
	if p != nil {
		p.release(r)
	}
	// Detached, this runtime's process is gone for it, whether or not others still use it.
	r.closeOnce.Do(func() { close(r.exited) })
	return nil
}

// Liveness reports the child and its transport.
func (r *Runtime) Liveness() provider.Liveness {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.p == nil {
		return provider.Liveness{}
	}
	open := false
	select {
	case <-r.p.c.Done():
	default:
		open = true
	}
	return provider.Liveness{PID: r.p.child.PID(), ProcessAlive: r.p.child.Alive(), TransportOpen: open}
}

// Exited is closed when the app-server process exits.
func (r *Runtime) Exited() <-chan struct{} { return r.exited }

// IdlePolicy is the spec's, else the catalog row's.
func (r *Runtime) IdlePolicy() domain.IdlePolicy {
	if r.spec.IdlePolicy != "" {
		return r.spec.IdlePolicy
	}
	if row, ok := domain.LookupTransport(r.spec.Transport); ok {
		return row.IdlePolicy
	}
	return domain.IdleAllow
}

// ReadinessWarning has nothing to say: an app-server that answered the handshake is ready.
func (r *Runtime) ReadinessWarning() string { return "" }

// threadID is the bound thread.
func (r *Runtime) threadID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.thread
}

// emitDisposition reports a staged disposition (it runs under the settlement's lock).
func (r *Runtime) emitDisposition(d provider.Disposition) {
	r.stamper.Emit(provider.AgentEvent{Kind: domain.AgentDispositionStaged, Disposition: &d})
}

// paramsOf decodes a notification's or request's params; a malformed one is logged.
func paramsOf[T any](r *Runtime, method string, raw json.RawMessage) (T, bool) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		r.log.Warn("codex sent params Jam cannot read", "method", method, "error", err)
		return v, false
	}
	return v, true
}
