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
	*provider.Lifecycle
	// configDir is CLAUDE_CONFIG_DIR: where Jam writes the MCP configuration and the
	// system prompt file, and Claude its transcripts.
	configDir string

	// mu guards the fields below and is never held across a write to the child.
	mu       sync.Mutex
	child    *provider.Child
	w        *writer
	session  string
	bound    bool // Jam has been told the session (it resumed, or a turn wrote it)
	version  string
	toolsOK  bool // Jam's tools are connected: the runtime settles through them
	diverged bool // claude reported another session than the one it was started on
	warning  string
	turn     *turnState
	controls map[string]chan controlAnswer
	asks     map[string]context.CancelFunc
	nextID   int
}

var _ provider.Runtime = (*Runtime)(nil)

// New builds an unprepared Claude Code runtime. The transcripts, the MCP configuration
// (with its token) and the system prompt live in the session's provider-state directory,
// never the operator's, so it needs one.
func New(spec provider.Spec) (provider.Runtime, error) {
	lc, err := provider.NewLifecycle(spec, provider.LifecycleConfig{Name: "claude", Who: "claude",
		ReadyFallback: PrepareTimeout, IdleFallback: domain.IdleKeepAlive, NeedStateDir: true})
	if err != nil {
		return nil, err
	}
	r := &Runtime{Lifecycle: lc, configDir: spec.StateDir,
		controls: map[string]chan controlAnswer{}, asks: map[string]context.CancelFunc{}}
	lc.Bind(provider.Adapter{Start: r.start, Handshake: r.handshake, Release: r.release,
		Prepared: r.prepared, Liveness: r.liveness})
	return r, nil
}

// prepared reports the session only once Claude keeps it: a resumed one at once, a new one
// after its first turn (TurnResult.ProviderSessionID), so Jam never binds a session whose
// transcript was never written.
func (r *Runtime) prepared() provider.Prepared {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := provider.Prepared{Resumed: r.Spec.ProviderSessionID != "", Identity: identity, Version: r.version}
	if r.bound {
		p.ProviderSessionID = r.session
	}
	if r.child != nil {
		p.PID = r.child.PID()
	}
	return p
}

// start spawns the child: the bound session resumed exactly (its transcript must exist, or
// ErrExactResumeUnavailable), else a new session pinned to a fresh UUID.
func (r *Runtime) start(ctx context.Context) error {
	session := r.Spec.ProviderSessionID
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
	child, err := r.Spawn(ctx, args)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.child, r.w, r.session, r.bound = child, &writer{w: child.Stdin}, session, resume
	r.mu.Unlock()
	child.OnExit(r.childExited)
	go r.read(child.Stdout)
	return nil
}

// handshake waits for claude to answer the initialize control request and, when Jam's
// tools are configured, to connect them.
func (r *Runtime) handshake(ctx context.Context) error {
	r.mu.Lock()
	session, resume := r.session, r.bound
	r.mu.Unlock()
	r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentRuntimeIdentity, Text: identity})
	var init struct {
		Version string `json:"claude_code_version"`
	}
	if err := r.control(ctx, map[string]any{"subtype": "initialize"}, &init); err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	r.mu.Lock()
	r.version = domain.Truncate(init.Version, 100)
	r.mu.Unlock()
	if r.Spec.MCP != nil {
		r.checkTools(ctx)
	}
	if resume {
		r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentProviderSessionBound, ProviderSessionID: session})
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
	r.Stamper.SetCapable(ok)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.toolsOK = ok
	if !ok {
		r.warning = "Claude Code could not connect to Jam's tools; it answers humans with its final text only"
		r.Log.Warn("jam's MCP server is not connected in claude", "status", status, "error", err)
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
			if s.Name == r.Spec.MCP.Name {
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

// release closes stdin (Claude's shutdown signal), reaps the process group and removes the
// MCP configuration.
func (r *Runtime) release(context.Context) {
	r.mu.Lock()
	child := r.child
	r.mu.Unlock()
	if child != nil {
		child.Kill(provider.ChildShutdownGrace)
	}
	r.removeToolConfig()
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
	r.MarkExited()
}

// liveness reports the child and its transport.
func (r *Runtime) liveness() provider.Liveness {
	r.mu.Lock()
	defer r.mu.Unlock()
	return provider.LivenessOf(r.child, r.w != nil && !r.w.broken())
}

// ReadinessWarning says when Jam's tools did not connect.
func (r *Runtime) ReadinessWarning() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.warning
}

// removeToolConfig deletes the MCP configuration: its token dies with the instance.
func (r *Runtime) removeToolConfig() {
	if err := os.Remove(r.toolConfigPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		r.Log.Warn("remove claude MCP configuration", "error", err)
	}
}

// decode reads a line's payload; a malformed one is logged.
func decode[T any](r *Runtime, what string, raw json.RawMessage) (T, bool) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		r.Log.Warn("claude sent a line Jam cannot read", "what", what, "error", err)
		return v, false
	}
	return v, true
}
