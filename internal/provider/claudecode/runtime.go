// Package claudecode is the provider.Runtime of headless Claude Code: one long-lived
// `claude -p --input-format stream-json --output-format stream-json` child per runtime
// session with its stdin held open for its life. A session is pinned with --session-id (a
// UUID Jam picks) or resumed exactly with --resume (never a silent fresh session); each Jam
// turn is a `user` line, messages arriving mid-turn are further `user` lines, an interrupt
// is a control request, and `result` lines end the turn. Tool permissions come over the
// stdio control protocol (can_use_tool) to the permission broker; Jam's tools are Jam's MCP
// endpoint (--mcp-config), which makes the runtime disposition-capable; the briefing and
// the room's rules are --append-system-prompt-file. CLAUDE_CONFIG_DIR is the session's
// provider-state directory and the working directory never changes, so Claude's
// transcripts stay with the session and resume works after a park.
package claudecode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
)

// Bounds of the adapter's own waits.
var (
	// PrepareTimeout bounds the start handshake when the spec names no readiness bound.
	PrepareTimeout = 60 * time.Second
	// InterruptGrace is how long an interrupted turn may take to end before the child is
	// killed: it would otherwise keep working on an abandoned turn.
	InterruptGrace = 10 * time.Second
	// ControlTimeout bounds a control request's answer outside the start handshake.
	ControlTimeout = 10 * time.Second
	// ToolsWait bounds the wait for claude to connect Jam's MCP server at start.
	ToolsWait = 15 * time.Second
)

// identity is the name Jam gives the provider in events.
const identity = "Claude Code"

// Runtime is one `claude` child serving one runtime session.
type Runtime struct {
	spec    provider.Spec
	log     *slog.Logger
	stamper *provider.Stamper
	// roster is what the runtime has been told of its room.
	roster *provider.RosterTracker
	stderr *provider.TailBuffer
	// configDir is CLAUDE_CONFIG_DIR: where Jam writes the MCP configuration and the
	// system prompt file, and Claude its transcripts.
	configDir string

	// prepMu serializes Prepare and Teardown; mu guards the fields below and is never held
	// across a write to the child.
	prepMu     sync.Mutex
	mu         sync.Mutex
	child      *provider.Child
	w          *writer
	session    string
	bound      bool // Jam has been told the session (it resumed, or a turn wrote it)
	version    string
	toolsOK    bool // Jam's tools are connected: the runtime settles through them
	diverged   bool // claude reported another session than the one it was started on
	warning    string
	prepared   bool
	tornDown   bool
	stopping   bool
	prepCancel context.CancelFunc
	turn       *turnState
	controls   map[string]chan controlAnswer
	asks       map[string]context.CancelFunc
	nextID     int
	exited     chan struct{}
	closeOnce  sync.Once
}

var _ provider.Runtime = (*Runtime)(nil)

// New builds an unprepared Claude Code runtime.
func New(spec provider.Spec) (provider.Runtime, error) {
	if spec.Executable == "" {
		return nil, fmt.Errorf("claude runtime: no executable: %w", provider.ErrInvalidSpec)
	}
	if spec.Dir == "" {
		return nil, fmt.Errorf("claude runtime: no working directory: %w", provider.ErrInvalidSpec)
	}
	if spec.StateDir == "" {
		// The transcripts, the MCP configuration (with its token) and the system prompt
		// live in the session's own directory, never the operator's.
		return nil, fmt.Errorf("claude runtime: no provider-state directory: %w", provider.ErrInvalidSpec)
	}
	log := spec.Log
	if log == nil {
		log = slog.Default()
	}
	log = log.With("runtime_session", spec.RuntimeSession, "generation", spec.Generation, "transport", spec.Transport)
	return &Runtime{
		spec: spec, log: log, configDir: spec.StateDir,
		stamper:  spec.Stamper(false),
		roster:   provider.NewRosterTracker(spec.Roster),
		stderr:   provider.NewTailBuffer(16 << 10),
		controls: map[string]chan controlAnswer{}, asks: map[string]context.CancelFunc{},
		exited: make(chan struct{}),
	}, nil
}

// Prepare spawns claude and waits for it to answer the initialize control request: the
// bound session resumed exactly (its transcript must exist, or ErrExactResumeUnavailable),
// else a new session pinned to a fresh UUID. Anything it started is reaped when it fails.
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
	ctx, cancelReady := provider.WithReadiness(ctx, r.spec.ReadyTimeout, PrepareTimeout, "claude")
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

	err := r.start(ctx)
	if err != nil {
		r.mu.Lock()
		child := r.child
		r.mu.Unlock()
		if child != nil {
			child.Kill(provider.ChildShutdownGrace)
		}
		r.removeToolConfig()
		if tail := r.stderr.String(); tail != "" {
			r.log.Warn("claude failed to prepare", "stderr_tail", tail)
		}
		if nr := provider.NotReady(ctx); nr != nil {
			return provider.Prepared{}, fmt.Errorf("prepare claude runtime: %w", nr)
		}
		return provider.Prepared{}, fmt.Errorf("prepare claude runtime: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prepared = true
	return r.preparedLocked(), nil
}

// preparedLocked reports the session only once Claude keeps it: a resumed one at once, a
// new one after its first turn (TurnResult.ProviderSessionID), so Jam never binds a session
// whose transcript was never written.
func (r *Runtime) preparedLocked() provider.Prepared {
	p := provider.Prepared{Resumed: r.spec.ProviderSessionID != "", Identity: identity, Version: r.version}
	if r.bound {
		p.ProviderSessionID = r.session
	}
	if r.child != nil {
		p.PID = r.child.PID()
	}
	return p
}

// start spawns the child and runs the initialize handshake.
func (r *Runtime) start(ctx context.Context) error {
	session := r.spec.ProviderSessionID
	resume := session != ""
	if resume {
		if err := r.checkTranscript(session); err != nil {
			return err
		}
	} else {
		session = uuid.NewString()
	}
	args, err := r.argv(session, resume)
	if err != nil {
		return err
	}
	spawner := r.spec.Spawner
	if spawner == nil {
		spawner = provider.DefaultSpawner
	}
	child, err := spawner.Spawn(ctx, provider.Command{Path: r.spec.Executable, Args: args, Env: r.spec.Env,
		Dir: r.spec.Dir, Stderr: r.stderr})
	if err != nil {
		return fmt.Errorf("spawn claude: %w", err)
	}
	r.mu.Lock()
	r.child, r.w, r.session, r.bound = child, &writer{w: child.Stdin}, session, resume
	r.mu.Unlock()
	child.OnExit(r.childExited)
	go r.read(provider.GuardJSONLines(child.Stdout, provider.MaxProtocolLine, r.log))

	r.stamper.Emit(provider.AgentEvent{Kind: domain.AgentRuntimeIdentity, Text: identity})
	var init struct {
		Version string `json:"claude_code_version"`
	}
	if err := r.control(ctx, map[string]any{"subtype": "initialize"}, &init); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	r.mu.Lock()
	r.version = domain.Truncate(init.Version, 100)
	r.mu.Unlock()
	if r.spec.MCP != nil {
		r.checkTools(ctx)
	}
	if resume {
		r.stamper.Emit(provider.AgentEvent{Kind: domain.AgentProviderSessionBound, ProviderSessionID: session})
	}
	return nil
}

// checkTranscript fails closed when the bound session's transcript is not in the config
// directory: claude would refuse to resume it, and Jam never starts a fresh one silently.
// Claude finds a session by id in any project directory, so any one will do.
func (r *Runtime) checkTranscript(session string) error {
	id, err := uuid.Parse(session)
	if err != nil {
		return fmt.Errorf("%w: %q is not a Claude session id", provider.ErrExactResumeUnavailable, domain.Truncate(session, 80))
	}
	found, err := filepath.Glob(filepath.Join(r.configDir, "projects", "*", id.String()+".jsonl"))
	if err != nil || len(found) == 0 {
		return fmt.Errorf("%w: claude session %s has no transcript under %s", provider.ErrExactResumeUnavailable, id, r.configDir)
	}
	return nil
}

// checkTools waits for claude to connect Jam's MCP server (it connects in the background
// after start). Without it the runtime still runs, settling by its final text (a human's
// message gets it as the reply), and says why.
func (r *Runtime) checkTools(ctx context.Context) {
	status, err := r.toolStatus(ctx)
	ok := status == "connected"
	r.stamper.SetCapable(ok)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.toolsOK = ok
	if !ok {
		r.warning = "Claude Code could not connect to Jam's tools; it answers humans with its final text only"
		r.log.Warn("jam's MCP server is not connected in claude", "status", status, "error", err)
	}
}

// toolStatus polls mcp_status until Jam's server is no longer pending, within ToolsWait.
func (r *Runtime) toolStatus(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, ToolsWait)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var st struct {
			Servers []struct {
				Name   string `json:"name"`
				Status string `json:"status"`
			} `json:"mcpServers"`
		}
		if err := r.control(ctx, map[string]any{"subtype": "mcp_status"}, &st); err != nil {
			return "", err
		}
		status := "absent"
		for _, s := range st.Servers {
			if s.Name == r.spec.MCP.Name {
				status = s.Status
			}
		}
		if status != "pending" {
			return status, nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return status, context.Cause(ctx)
		}
	}
}

// Teardown retires the instance (it can no longer emit), ends a running turn, closes stdin
// (Claude's shutdown signal) and reaps the process group. It is idempotent.
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
	if r.turn != nil {
		r.turn.interrupted = true
		r.turn.interrupt()
	}
	child := r.child
	r.mu.Unlock()
	r.log.Info("claude runtime teardown", "reason", reason)
	if child != nil {
		child.Kill(provider.ChildShutdownGrace)
	}
	r.removeToolConfig()
	r.closeOnce.Do(func() { close(r.exited) })
	return nil
}

// childExited runs once the process is gone: control requests waiting for an answer and
// permission asks end with it.
func (r *Runtime) childExited() {
	r.mu.Lock()
	for id, ch := range r.controls {
		close(ch)
		delete(r.controls, id)
	}
	for _, cancel := range r.asks {
		cancel()
	}
	r.mu.Unlock()
	r.closeOnce.Do(func() { close(r.exited) })
}

// Liveness reports the child and its transport.
func (r *Runtime) Liveness() provider.Liveness {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.child == nil {
		return provider.Liveness{}
	}
	alive := r.child.Alive()
	return provider.Liveness{PID: r.child.PID(), ProcessAlive: alive, TransportOpen: alive && !r.w.broken()}
}

// Exited is closed when the child exits.
func (r *Runtime) Exited() <-chan struct{} { return r.exited }

// IdlePolicy is the spec's, else the catalog row's (KeepAlive for Claude Code).
func (r *Runtime) IdlePolicy() domain.IdlePolicy {
	if r.spec.IdlePolicy != "" {
		return r.spec.IdlePolicy
	}
	if row, ok := domain.LookupTransport(r.spec.Transport); ok {
		return row.IdlePolicy
	}
	return domain.IdleKeepAlive
}

// ReadinessWarning says when Jam's tools did not connect.
func (r *Runtime) ReadinessWarning() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.warning
}

// StageDisposition stages a settlement tool call (over Jam's MCP endpoint) in the running
// turn.
func (r *Runtime) StageDisposition(d provider.Disposition) error {
	var s *provider.Settlement
	r.mu.Lock()
	if r.turn != nil {
		s = r.turn.settle
	}
	r.mu.Unlock()
	return provider.StageInTurn(s, d, func(d provider.Disposition) {
		r.stamper.Emit(provider.AgentEvent{Kind: domain.AgentDispositionStaged, Disposition: &d})
	})
}

// removeToolConfig deletes the MCP configuration: its token dies with the instance.
func (r *Runtime) removeToolConfig() {
	if err := os.Remove(r.toolConfigPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		r.log.Warn("remove claude MCP configuration", "error", err)
	}
}

// decode reads a line's payload; a malformed one is logged.
func decode[T any](r *Runtime, what string, raw json.RawMessage) (T, bool) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		r.log.Warn("claude sent a line Jam cannot read", "what", what, "error", err)
		return v, false
	}
	return v, true
}
