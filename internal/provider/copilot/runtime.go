// Package copilot is the provider.Runtime of the GitHub Copilot CLI's SDK server
// (`copilot --headless --stdio`): one server child per runtime session (one per Shared
// host, its member rooms' sessions routed by session id), spoken to in JSON-RPC 2.0 with
// Content-Length framing. A session is created (session.create) or
// resumed exactly (session.resume of the bound session, never a silent fresh one); each
// Jam turn is a session.send, messages arriving mid-turn are further sends in the
// protocol's immediate mode, an interrupt is session.abort, and session.idle or
// session.error ends the turn. Jam's tool registry is given as the session's external
// tools (answered through session.tools.handlePendingToolCall), which makes the runtime
// disposition-capable; Copilot's own tool permissions go to the permission broker. The
// model provider a template configures (base URL, wire API, key variable) is passed in the
// session configuration, the only place the SDK server takes one.
package copilot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/tools"
)

// Bounds of the adapter's own waits.
var (
	// PrepareTimeout bounds the handshake when the spec names no readiness bound.
	PrepareTimeout = 90 * time.Second
	// InterruptGrace is how long an aborted turn may take to end before the server is
	// killed: it would otherwise keep working on an abandoned turn.
	InterruptGrace = 10 * time.Second
)

// ProtocolVersion is the SDK protocol version Jam speaks; `connect` must report it.
const ProtocolVersion = 3

// identity is the name Jam gives the provider in events.
const identity = "GitHub Copilot"

// ErrProtocolVersion: the server speaks an SDK protocol Jam does not.
var ErrProtocolVersion = fmt.Errorf("incompatible Copilot SDK protocol: %w", provider.ErrIncompatible)

// Runtime is one `copilot --headless --stdio` child serving one runtime session.
type Runtime struct {
	spec    provider.Spec
	log     *slog.Logger
	stamper *provider.Stamper
	// roster is what the runtime has been told of its room.
	roster *provider.RosterTracker
	stderr *provider.TailBuffer
	// tools are Jam's runtime tools, offered as the session's external tools.
	tools provider.ToolCaller

	// prepMu serializes Prepare and Teardown; mu guards the fields below and is never held
	// across a protocol call.
	prepMu     sync.Mutex
	mu         sync.Mutex
	srv        *server
	session    string
	bound      bool // Jam has been told the session (it resumed, or a turn was sent on it)
	version    string
	prepared   bool
	tornDown   bool
	stopping   bool
	prepCancel context.CancelFunc
	turn       *turnState
	exited     chan struct{}
	closeOnce  sync.Once
}

var _ provider.Runtime = (*Runtime)(nil)

// New builds an unprepared Copilot runtime.
func New(spec provider.Spec) (provider.Runtime, error) {
	if spec.Executable == "" {
		return nil, fmt.Errorf("copilot runtime: no executable: %w", provider.ErrInvalidSpec)
	}
	if spec.Dir == "" {
		return nil, fmt.Errorf("copilot runtime: no working directory: %w", provider.ErrInvalidSpec)
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

// Prepare spawns the server, connects and binds the session: session.resume of the bound
// session, else session.create. Anything it started is reaped when it fails.
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
	ctx, cancelReady := provider.WithReadiness(ctx, r.spec.ReadyTimeout, PrepareTimeout, "copilot")
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

	if err := r.start(ctx); err != nil {
		r.mu.Lock()
		srv := r.srv
		r.srv = nil
		r.mu.Unlock()
		if srv != nil {
			srv.release(r)
		}
		if tail := r.stderr.String(); tail != "" {
			r.log.Warn("copilot failed to prepare", "stderr_tail", tail)
		}
		if nr := provider.NotReady(ctx); nr != nil {
			return provider.Prepared{}, fmt.Errorf("prepare copilot runtime: %w", nr)
		}
		return provider.Prepared{}, fmt.Errorf("prepare copilot runtime: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prepared = true
	return r.preparedLocked(), nil
}

// preparedLocked reports the session only once Copilot keeps it: a resumed one at once, a
// new one after its first turn (TurnResult.ProviderSessionID). Copilot saves no session
// that never had a message, so binding one at create would make a reap before the first
// turn unresumable.
func (r *Runtime) preparedLocked() provider.Prepared {
	p := provider.Prepared{Resumed: r.spec.ProviderSessionID != "", Identity: identity, Version: r.version}
	if r.bound {
		p.ProviderSessionID = r.session
	}
	if r.srv != nil {
		p.PID = r.srv.child.PID()
	}
	return p
}

// start spawns the child, checks the protocol version and creates or resumes the session.
func (r *Runtime) start(ctx context.Context) error {
	cfg, err := r.sessionConfig()
	if err != nil {
		return err
	}
	srv, err := r.attach(ctx)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.srv, r.version = srv, srv.version
	r.mu.Unlock()
	c := srv.c
	r.stamper.Emit(provider.AgentEvent{Kind: domain.AgentRuntimeIdentity, Text: identity})

	var res struct {
		SessionID string `json:"sessionId"`
	}
	if want := r.spec.ProviderSessionID; want != "" {
		cfg["sessionId"] = want
		if err := c.call(ctx, "session.resume", cfg, &res); err != nil {
			if ctx.Err() != nil {
				return err // out of time is not evidence the session is gone
			}
			return fmt.Errorf("%w: session.resume %s: %w", provider.ErrExactResumeUnavailable, domain.Truncate(want, 80), err)
		}
		if res.SessionID != want {
			return fmt.Errorf("%w: session.resume %s answered with session %q", provider.ErrExactResumeUnavailable,
				domain.Truncate(want, 80), domain.Truncate(res.SessionID, 80))
		}
	} else {
		if err := c.call(ctx, "session.create", cfg, &res); err != nil {
			return err
		}
		if res.SessionID == "" {
			return errors.New("session.create: copilot returned no session id")
		}
	}
	resumed := r.spec.ProviderSessionID != ""
	r.mu.Lock()
	r.session, r.bound = res.SessionID, resumed
	r.mu.Unlock()
	srv.register(res.SessionID, r)
	if resumed {
		r.stamper.Emit(provider.AgentEvent{Kind: domain.AgentProviderSessionBound, ProviderSessionID: res.SessionID})
	}
	return nil
}

// Teardown retires the instance (it can no longer emit), aborts a running turn and reaps
// the process group (Copilot writes each session event as it happens, so nothing is lost).
// It is idempotent.
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
	srv := r.srv
	r.mu.Unlock()
	r.log.Info("copilot runtime teardown", "reason", reason)
	if srv != nil {
		// The last runtime out reaps the process group.
		srv.release(r)
	}
	// Detached, this runtime's server is gone for it, whether or not others still use it.
	r.closeOnce.Do(func() { close(r.exited) })
	return nil
}

// Liveness reports the child and its transport.
func (r *Runtime) Liveness() provider.Liveness {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv == nil {
		return provider.Liveness{}
	}
	open := false
	select {
	case <-r.srv.c.Done():
	default:
		open = true
	}
	alive := r.srv.child.Alive()
	return provider.Liveness{PID: r.srv.child.PID(), ProcessAlive: alive, TransportOpen: alive && open}
}

// Exited is closed when the child exits.
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

// ReadinessWarning has nothing to say: a server that created or resumed the session, with
// Jam's tools in its configuration, is ready.
func (r *Runtime) ReadinessWarning() string { return "" }

// StageDisposition stages a settlement tool call in the running turn.
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

// conn is the live connection (nil before start).
func (r *Runtime) conn() *conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.srv.c
}

// sessionID is the session the runtime works on.
func (r *Runtime) sessionID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.session
}

// jamRules tell Copilot how it works in a room; the per-turn envelope repeats the part
// about settling each message.
const jamRules = `## Working in a Jam room
You are an agent in a chat room, run by Jam. Each turn brings one or more room messages, each in a block with its id and author. Settle every message with a tool: jam_reply_to_message {message_id, text} posts your answer to the room as a reply to that message; jam_no_reply {message_id, reason} settles it without an answer. Only these tools reach the room; your final assistant text does not. Answer messages from other agents only when they need an answer, so agents do not talk in circles. Jam's other tools: jam_send_message {text} posts a new room message, jam_room_context reads the room (participants with ids, recent messages), jam_ask_question {question, recipient_id?} asks a human and waits for the answer.`

// sessionConfig is the session.create (and session.resume) configuration: model, working
// directory, streaming, permission requests, Jam's instructions and tools, and the model
// provider the template configures.
func (r *Runtime) sessionConfig() (map[string]any, error) {
	set := r.spec.Settings
	specs := r.tools.Specs()
	defs := make([]map[string]any, 0, len(specs))
	for _, s := range specs {
		d := map[string]any{"name": s.Name, "description": s.Description,
			// Jam's tools are Jam's to allow: the registry checks each call's scope itself.
			"skipPermission": true}
		if len(s.InputSchema) > 0 {
			d["parameters"] = s.InputSchema
		}
		defs = append(defs, d)
	}
	cfg := map[string]any{
		"workingDirectory":  r.spec.Dir,
		"streaming":         true,
		"requestPermission": true,
		"tools":             defs,
		"systemMessage":     map[string]any{"mode": "append", "content": r.instructions()},
	}
	if m := set[domain.SettingKeyModel]; m != "" {
		cfg["model"] = m
	}
	if base := set[domain.SettingKeyProviderBaseURL]; base != "" {
		p := map[string]any{"type": "openai", "baseUrl": base, "wireApi": wireAPI(set[domain.SettingKeyProviderWireAPI])}
		if name := set[domain.SettingKeyProviderEnvKey]; name != "" {
			key, ok := r.lookupEnv(name)
			if !ok || key == "" {
				return nil, fmt.Errorf("%w: the model provider's key variable %s is not set for this runtime", provider.ErrCredentialMissing, name)
			}
			p["apiKey"] = key
		}
		cfg["provider"] = p
	}
	return cfg, nil
}

// wireAPI is Copilot's name for a template's model_provider_wire_api ("chat" is Chat
// Completions, Copilot's "completions"; the default).
func wireAPI(v string) string {
	if v == "responses" {
		return "responses"
	}
	return "completions"
}

// lookupEnv reads a variable of the provider's own environment: inside its sandbox
// (Spec.GuestEnv) when it runs in one, else the child's environment.
func (r *Runtime) lookupEnv(name string) (string, bool) {
	env := r.spec.Env
	if r.spec.GuestEnv != nil {
		env = r.spec.GuestEnv
	}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

// instructions are appended to Copilot's system message: the operator's briefing and the
// room, then how to work in it.
func (r *Runtime) instructions() string {
	pre := provider.Preamble(r.spec.Briefing, r.spec.Roster)
	if pre == "" {
		return jamRules
	}
	return strings.TrimSpace(pre) + "\n\n" + jamRules
}

// decode reads an event's data; a malformed one is logged.
func decode[T any](r *Runtime, what string, raw json.RawMessage) (T, bool) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		r.log.Warn("copilot sent data Jam cannot read", "what", what, "error", err)
		return v, false
	}
	return v, true
}
