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
	"strings"
	"sync"
	"time"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/provider/jsonrpc"
	"github.com/jam-dev/jam/internal/provider/settletools"
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
	*provider.Lifecycle

	// mu guards the fields below and is never held across a protocol call.
	srv     jsonrpc.Attached[*Runtime]
	mu      sync.Mutex
	session string
	bound   bool // Jam has been told the session (it resumed, or a turn was sent on it)
	version string
	// cfg is the session configuration, built before the server starts.
	cfg  map[string]any
	turn *turnState
}

var _ provider.Runtime = (*Runtime)(nil)

// New builds an unprepared Copilot runtime. Jam's tools are offered as the session's
// external tools.
func New(spec provider.Spec) (provider.Runtime, error) {
	lc, err := provider.NewLifecycle(spec, provider.LifecycleConfig{Name: "copilot", Who: "copilot",
		ReadyFallback: PrepareTimeout, Capable: true, SettleTools: settletools.For})
	if err != nil {
		return nil, err
	}
	r := &Runtime{Lifecycle: lc}
	lc.Bind(provider.Adapter{Start: r.attach, Handshake: r.handshake, Release: func(context.Context) { r.srv.Leave(r) },
		Prepared: r.prepared, Liveness: r.srv.Liveness})
	return r, nil
}

// prepared reports the session only once Copilot keeps it: a resumed one at once, a new
// one after its first turn (TurnResult.ProviderSessionID). Copilot saves no session that
// never had a message, so binding one at create would make a reap before the first turn
// unresumable.
func (r *Runtime) prepared() provider.Prepared {
	pid := r.srv.Liveness().PID
	r.mu.Lock()
	defer r.mu.Unlock()
	p := provider.Prepared{Resumed: r.Spec.ProviderSessionID != "", Identity: identity, Version: r.version, PID: pid}
	if r.bound {
		p.ProviderSessionID = r.session
	}
	return p
}

// handshake creates the session on the connected server, or resumes the bound one exactly.
func (r *Runtime) handshake(ctx context.Context) error {
	r.mu.Lock()
	cfg := r.cfg
	r.mu.Unlock()
	srv := r.srv.Get()
	c := srv.Conn
	r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentRuntimeIdentity, Text: identity})

	var res struct {
		SessionID string `json:"sessionId"`
	}
	if want := r.Spec.ProviderSessionID; want != "" {
		cfg["sessionId"] = want
		if err := c.Call(ctx, "session.resume", cfg, &res); err != nil {
			return provider.ResumeFailed(ctx, "session.resume "+domain.Truncate(want, 80), err)
		}
		if res.SessionID != want {
			return fmt.Errorf("%w: session.resume %s answered with session %q", provider.ErrExactResumeUnavailable,
				domain.Truncate(want, 80), domain.Truncate(res.SessionID, 80))
		}
	} else {
		if err := c.Call(ctx, "session.create", cfg, &res); err != nil {
			return err
		}
		if res.SessionID == "" {
			return errors.New("session.create: copilot returned no session id")
		}
	}
	resumed := r.Spec.ProviderSessionID != ""
	r.mu.Lock()
	r.session, r.bound = res.SessionID, resumed
	r.mu.Unlock()
	srv.Register(res.SessionID, r)
	if resumed {
		r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentProviderSessionBound, ProviderSessionID: res.SessionID})
	}
	return nil
}

// conn is the live connection (nil before start).
func (r *Runtime) conn() *jsonrpc.Conn { return r.srv.Get().Conn }

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
	set := r.Spec.Settings
	specs := r.Tools.Specs()
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
		"workingDirectory":  r.Spec.Dir,
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
	env := r.Spec.Env
	if r.Spec.GuestEnv != nil {
		env = r.Spec.GuestEnv
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
	pre := provider.Preamble(r.Spec.Briefing, r.Spec.Roster)
	if pre == "" {
		return jamRules
	}
	return strings.TrimSpace(pre) + "\n\n" + jamRules
}

// decode reads an event's data; a malformed one is logged.
func decode[T any](r *Runtime, what string, raw json.RawMessage) (T, bool) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		r.Log.Warn("copilot sent data Jam cannot read", "what", what, "error", err)
		return v, false
	}
	return v, true
}
