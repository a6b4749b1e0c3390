// Package acp is the Agent Client Protocol adapter: a generic ACP v1 client over a child's
// stdio, built on github.com/coder/acp-go-sdk. OpenCode (`opencode acp`), Cursor and
// jam-testagent are catalog rows on this adapter, not adapters of their own.
package acp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
)

// Timeouts of the adapter's own bounded waits.
const (
	// PrepareTimeout bounds the handshake when the spec names no readiness bound.
	PrepareTimeout = 60 * time.Second
	// closeTimeout bounds session/close during teardown.
	closeTimeout = 3 * time.Second
)

// CancelGrace is how long an interrupted turn may take to answer "cancelled" before the
// adapter gives up on it and kills the agent. A variable so tests can shorten it.
var CancelGrace = 10 * time.Second

// ClientVersion is reported to agents in clientInfo.
var ClientVersion = "dev"

// Runtime is one ACP agent process serving one runtime session.
type Runtime struct {
	*provider.Lifecycle

	// mu guards the fields below and is never held across a protocol call, because the
	// agent's updates are handled while a request is pending.
	mu      sync.Mutex
	child   *provider.Child
	conn    *sdk.ClientSideConnection
	session sdk.SessionId
	caps    sdk.AgentCapabilities
	// mcpTools: the session was given Jam's MCP server, so its prompts mention the tools.
	mcpTools bool
	identity string
	// version is what the agent reported of itself in initialize.
	version  string
	preamble string // the preamble this connection last saw
}

var _ provider.Runtime = (*Runtime)(nil)

// New builds an unprepared ACP runtime.
func New(spec provider.Spec) (provider.Runtime, error) {
	lc, err := provider.NewLifecycle(spec, provider.LifecycleConfig{Name: "acp", Who: "the agent", ReadyFallback: PrepareTimeout})
	if err != nil {
		return nil, err
	}
	r := &Runtime{Lifecycle: lc}
	lc.Bind(provider.Adapter{Start: r.start, Handshake: r.handshake, Release: r.release,
		Prepared: r.prepared, Liveness: r.liveness})
	return r, nil
}

// start spawns the agent and opens its ACP connection.
func (r *Runtime) start(ctx context.Context) error {
	child, err := r.Spawn(ctx, r.Spec.Args)
	if err != nil {
		return err
	}
	child.OnExit(r.MarkExited)
	// The SDK starts reading at once and its SetLogger is a plain write: nothing is read
	// until the logger is set, or an agent that exits at once races it.
	logged := make(chan struct{})
	conn := sdk.NewClientSideConnection(&client{r: r}, child.Stdin,
		gatedReader{gate: logged, r: provider.GuardJSONLines(child.Stdout, provider.MaxProtocolLine, r.Log)})
	conn.SetLogger(r.Log)
	close(logged)
	r.mu.Lock()
	r.child, r.conn = child, conn
	r.mu.Unlock()
	return nil
}

// prepared is the bound session: session/load or session/resume of the bound provider
// session (as the agent advertises), else session/new.
func (r *Runtime) prepared() provider.Prepared {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid := 0
	if r.child != nil {
		pid = r.child.PID()
	}
	return provider.Prepared{ProviderSessionID: string(r.session), Resumed: r.Spec.ProviderSessionID != "",
		Identity: r.identity, Version: r.version, PID: pid}
}

// handshake initializes protocol v1 and binds the session.
func (r *Runtime) handshake(ctx context.Context) error {
	r.mu.Lock()
	conn := r.conn
	r.mu.Unlock()
	init, err := conn.Initialize(ctx, sdk.InitializeRequest{
		ProtocolVersion: sdk.ProtocolVersionNumber,
		// No fs or terminal capability: the agent works in its own workspace.
		ClientCapabilities: sdk.ClientCapabilities{},
		ClientInfo:         &sdk.Implementation{Name: "jam", Version: ClientVersion},
	})
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if init.ProtocolVersion != sdk.ProtocolVersionNumber {
		return fmt.Errorf("initialize: %w: the agent speaks ACP protocol %d, Jam speaks %d", provider.ErrIncompatible,
			init.ProtocolVersion, sdk.ProtocolVersionNumber)
	}
	identity, version := "", ""
	if init.AgentInfo != nil {
		identity, version = domain.Truncate(init.AgentInfo.Name, 200), domain.Truncate(init.AgentInfo.Version, 100)
	}
	r.mu.Lock()
	r.caps, r.identity, r.version = init.AgentCapabilities, identity, version
	r.mu.Unlock()
	if identity != "" {
		r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentRuntimeIdentity, Text: identity})
	}
	caps, cwd := init.AgentCapabilities, r.Spec.Dir
	mcp := mcpServers(r.Spec.MCP, caps.McpCapabilities)
	r.mu.Lock()
	r.mcpTools = len(mcp) > 0
	r.mu.Unlock()
	if want := r.Spec.ProviderSessionID; want != "" {
		id := sdk.SessionId(want)
		switch {
		case caps.LoadSession:
			// session/load replays history as updates; no turn is open, so they are dropped.
			if _, err := conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: id, Cwd: cwd, McpServers: mcp}); err != nil {
				return provider.ResumeFailed(ctx, "session/load "+want, err)
			}
		case caps.SessionCapabilities.Resume != nil:
			if _, err := conn.ResumeSession(ctx, sdk.ResumeSessionRequest{SessionId: id, Cwd: cwd, McpServers: mcp}); err != nil {
				return provider.ResumeFailed(ctx, "session/resume "+want, err)
			}
		default:
			return fmt.Errorf("%w: the agent advertises neither session/load nor session/resume", provider.ErrExactResumeUnavailable)
		}
		r.mu.Lock()
		r.session = id
		r.mu.Unlock()
		return nil
	}
	ns, err := conn.NewSession(ctx, sdk.NewSessionRequest{Cwd: cwd, McpServers: mcp})
	if err != nil {
		return fmt.Errorf("session/new: %w", err)
	}
	if ns.SessionId == "" {
		return errors.New("session/new: the agent returned no session id")
	}
	r.mu.Lock()
	r.session = ns.SessionId
	r.mu.Unlock()
	r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentProviderSessionBound, ProviderSessionID: string(ns.SessionId)})
	return nil
}

// RunTurn sends one session/prompt with the final-response envelope and maps the streamed
// updates to events. Cancelling ctx sends session/cancel; the turn then ends Cancelled.
func (r *Runtime) RunTurn(ctx context.Context, turn provider.Turn) (provider.TurnResult, error) {
	ts, err := r.BeginTurn(ctx, turn, provider.SettlementOptions{ExplicitDisposition: true})
	if err != nil {
		return provider.TurnResult{}, err
	}
	defer r.EndTurn(ts)
	turnCtx := ts.Ctx
	membership := r.Roster.Advance(turn.Roster)
	preamble := provider.Preamble(r.Spec.Briefing, r.Roster.Current())
	r.mu.Lock()
	env := provider.Envelope{Style: provider.FinalResponse, Messages: turn.Messages, Tools: r.mcpTools, Membership: membership}
	// ACP has no instruction channel: the preamble rides on the first prompt of a
	// connection and again only when it changed.
	if preamble != r.preamble {
		env.Preamble, r.preamble = preamble, preamble
	}
	conn, session := r.conn, r.session
	r.mu.Unlock()

	r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentTurnStarted})
	resp, err := r.prompt(turnCtx, conn, session, provider.RenderEnvelope(env))

	interrupted := ts.Interrupted() || turnCtx.Err() != nil
	exited := false
	if err != nil {
		exited = r.transportLost(conn)
	}
	outcome, turnErr := domain.TurnComplete, error(nil)
	switch {
	case err != nil && interrupted:
		// Interrupted, even when that took killing an agent that ignored session/cancel;
		// its exit reaches the registry through Exited.
		outcome = domain.TurnCancelled
	case exited:
		outcome, turnErr = domain.TurnFailed, fmt.Errorf("turn %s: %w: %w", turn.ID, provider.ErrRuntimeExited, err)
	case err != nil:
		outcome, turnErr = domain.TurnFailed, fmt.Errorf("turn %s: %w", turn.ID, err)
	case interrupted || resp.StopReason == sdk.StopReasonCancelled:
		// An interrupt is terminal, even when the agent finished anyway.
		outcome = domain.TurnCancelled
	}
	if err == nil && resp.Usage != nil {
		r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentUsage, Usage: usageOf(resp.Usage)})
	}
	if outcome == domain.TurnComplete {
		// A silent turn acknowledges its messages (it has no final text to emit).
		ts.Settle.StageSilentNoReply(r.EmitDisposition)
	}
	return provider.CloseTurn(r.Stamper, ts.Settle, outcome, turnErr), nil
}

// transportLost reports whether the agent's connection is gone, waiting briefly for the
// process to be reaped so a crash is told apart from a protocol error.
func (r *Runtime) transportLost(conn *sdk.ClientSideConnection) bool {
	select {
	case <-conn.Done():
	default:
		return !r.child.Alive()
	}
	t := time.NewTimer(provider.ChildShutdownGrace)
	defer t.Stop()
	select {
	case <-r.Exited():
	case <-t.C:
	}
	return true
}

// prompt runs session/prompt. The request itself is not bound to ctx: on cancellation the
// agent is told with session/cancel and answers the prompt with "cancelled". An agent that
// ignores the cancel for CancelGrace is killed: it would otherwise keep streaming the
// abandoned turn's output into the session, where the next turn would read it as its own.
func (r *Runtime) prompt(ctx context.Context, conn *sdk.ClientSideConnection, session sdk.SessionId, text string) (sdk.PromptResponse, error) {
	if err := ctx.Err(); err != nil {
		// Cancelled before it was sent: nothing to cancel on the agent's side.
		return sdk.PromptResponse{}, err
	}
	reqCtx, abandon := context.WithCancel(context.Background())
	defer abandon()
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		// The grace starts before the notification: writing it blocks if the agent stopped
		// reading its stdin.
		t := time.NewTimer(CancelGrace)
		defer t.Stop()
		go func() {
			if err := conn.Cancel(context.Background(), sdk.CancelNotification{SessionId: session}); err != nil {
				r.Log.Warn("session/cancel failed", "err", err)
			}
		}()
		select {
		case <-done:
		case <-t.C:
			r.Log.Warn("acp agent ignored session/cancel; killing it", "grace", CancelGrace)
			r.mu.Lock()
			child := r.child
			r.mu.Unlock()
			child.Kill(provider.ChildShutdownGrace)
			abandon()
		}
	}()
	return conn.Prompt(reqCtx, sdk.PromptRequest{SessionId: session, Prompt: []sdk.ContentBlock{sdk.TextBlock(text)}})
}

// Steer is unsupported: a message arriving mid-turn starts the next turn on the same session.
func (r *Runtime) Steer(context.Context, []provider.Message) error {
	return provider.ErrSteerUnsupported
}

// release closes the session where the agent supports it and reaps the process group.
func (r *Runtime) release(ctx context.Context) {
	r.mu.Lock()
	child, conn, session, canClose := r.child, r.conn, r.session, r.caps.SessionCapabilities.Close != nil
	r.mu.Unlock()
	if child == nil {
		return
	}
	if canClose && session != "" && child.Alive() {
		cctx, cancel := context.WithTimeout(ctx, closeTimeout)
		if _, err := conn.CloseSession(cctx, sdk.CloseSessionRequest{SessionId: session}); err != nil {
			r.Log.Debug("session/close failed", "err", err)
		}
		cancel()
	}
	child.Kill(provider.ChildShutdownGrace)
}

// liveness reports the child and its transport.
func (r *Runtime) liveness() provider.Liveness {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.child == nil {
		return provider.Liveness{}
	}
	open := true
	select {
	case <-r.conn.Done():
		open = false
	default:
	}
	return provider.LivenessOf(r.child, open)
}

// ReadinessWarning says when the agent cannot continue a conversation after a restart.
func (r *Runtime) ReadinessWarning() string {
	prepared := r.IsPrepared()
	r.mu.Lock()
	defer r.mu.Unlock()
	if prepared && !r.caps.LoadSession && r.caps.SessionCapabilities.Resume == nil {
		return "this agent supports neither session/load nor session/resume: after its process stops, the room cannot continue the same conversation"
	}
	return ""
}

// Identity is the name the agent reported for itself.
func (r *Runtime) Identity() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.identity
}

func usageOf(u *sdk.Usage) *provider.Usage {
	in, out, total := int64(u.InputTokens), int64(u.OutputTokens), int64(u.TotalTokens)
	return &provider.Usage{InputTokens: &in, OutputTokens: &out, TotalTokens: &total,
		CachedInputTokens: intPtr(u.CachedReadTokens), ReasoningTokens: intPtr(u.ThoughtTokens)}
}

func intPtr(p *int) *int64 {
	if p == nil {
		return nil
	}
	v := int64(*p)
	return &v
}

// mcpServers announces Jam's tools to the agent: the Streamable HTTP endpoint when the
// agent takes HTTP MCP servers, else the `jam mcp` stdio bridge every agent must take.
// Without an endpoint (or a bridge for a stdio-only agent) the agent gets none.
func mcpServers(e *provider.MCPEndpoint, caps sdk.McpCapabilities) []sdk.McpServer {
	if e == nil {
		return []sdk.McpServer{}
	}
	if caps.Http && e.URL != "" {
		var headers []sdk.HttpHeader
		for k, v := range e.Headers() {
			headers = append(headers, sdk.HttpHeader{Name: k, Value: v})
		}
		return []sdk.McpServer{{Http: &sdk.McpServerHttpInline{Type: "http", Name: e.Name, Url: e.URL, Headers: headers}}}
	}
	if e.BridgeCommand == "" {
		return []sdk.McpServer{}
	}
	env := make([]sdk.EnvVariable, 0, len(e.BridgeEnv))
	for _, kv := range e.BridgeEnv {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env = append(env, sdk.EnvVariable{Name: k, Value: v})
		}
	}
	return []sdk.McpServer{{Stdio: &sdk.McpServerStdio{Name: e.Name, Command: e.BridgeCommand, Args: append([]string{}, e.BridgeArgs...), Env: env}}}
}

// gatedReader reads from r once gate is closed.
type gatedReader struct {
	gate <-chan struct{}
	r    io.Reader
}

func (g gatedReader) Read(p []byte) (int, error) {
	<-g.gate
	return g.r.Read(p)
}
