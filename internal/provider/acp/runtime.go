// Package acp is the Agent Client Protocol adapter: a generic ACP v1 client over a child's
// stdio, built on github.com/coder/acp-go-sdk. OpenCode (`opencode acp`), Cursor and
// jam-testagent are catalog rows on this adapter, not adapters of their own.
package acp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	spec    provider.Spec
	log     *slog.Logger
	stamper *provider.Stamper
	// roster is what the runtime has been told of its room.
	roster *provider.RosterTracker
	stderr *provider.TailBuffer

	// prepMu serializes Prepare and Teardown; mu guards the fields and is never held across
	// a protocol call, because the agent's updates are handled while a request is pending.
	prepMu  sync.Mutex
	mu      sync.Mutex
	child   *provider.Child
	conn    *sdk.ClientSideConnection
	session sdk.SessionId
	caps    sdk.AgentCapabilities
	// tools: the session was given Jam's MCP server, so its prompts mention the tools.
	tools    bool
	identity string
	// version is what the agent reported of itself in initialize.
	version  string
	prepared bool
	tornDown bool
	// stopping is set by Teardown before it waits for prepMu; prepCancel ends a Prepare in
	// flight so a teardown never waits out a hung handshake.
	stopping   bool
	prepCancel context.CancelFunc
	turn       *turnState
	preamble   string // the preamble this connection last saw
	exited     chan struct{}
	closeOnce  sync.Once
}

type turnState struct {
	id          string
	settle      *provider.Settlement
	ctx         context.Context
	interrupt   context.CancelFunc
	interrupted bool
}

var _ provider.Runtime = (*Runtime)(nil)

// New builds an unprepared ACP runtime.
func New(spec provider.Spec) (provider.Runtime, error) {
	if spec.Executable == "" {
		return nil, fmt.Errorf("acp runtime: no executable: %w", provider.ErrInvalidSpec)
	}
	if spec.Dir == "" {
		return nil, fmt.Errorf("acp runtime: no working directory: %w", provider.ErrInvalidSpec)
	}
	log := spec.Log
	if log == nil {
		log = slog.Default()
	}
	log = log.With("runtime_session", spec.RuntimeSession, "generation", spec.Generation, "transport", spec.Transport)
	return &Runtime{
		spec:    spec,
		log:     log,
		stamper: spec.Stamper(false),
		roster:  provider.NewRosterTracker(spec.Roster),
		stderr:  provider.NewTailBuffer(16 << 10),
		exited:  make(chan struct{}),
	}, nil
}

// Prepare spawns the agent, initializes protocol v1 and binds its session: session/load or
// session/resume of the bound provider session (as the agent advertises), else session/new.
// Anything it started is reaped when it fails or ctx ends first.
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
	// The readiness bound holds whatever the caller's deadline: an agent that never answers
	// initialize must not sit "starting" for the length of the activity.
	ctx, cancelReady := provider.WithReadiness(ctx, r.spec.ReadyTimeout, PrepareTimeout, "the agent")
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
	spawner := r.spec.Spawner
	if spawner == nil {
		spawner = provider.DefaultSpawner
	}
	child, err := spawner.Spawn(ctx, provider.Command{Path: r.spec.Executable, Args: r.spec.Args, Env: r.spec.Env,
		Dir: r.spec.Dir, Stderr: r.stderr})
	if err != nil {
		return provider.Prepared{}, fmt.Errorf("spawn acp agent: %w", err)
	}
	child.OnExit(func() { r.closeOnce.Do(func() { close(r.exited) }) })
	// The SDK starts reading at once and its SetLogger is a plain write: nothing is read
	// until the logger is set, or an agent that exits at once races it.
	logged := make(chan struct{})
	conn := sdk.NewClientSideConnection(&client{r: r}, child.Stdin,
		gatedReader{gate: logged, r: provider.GuardJSONLines(child.Stdout, provider.MaxProtocolLine, r.log)})
	conn.SetLogger(r.log)
	close(logged)
	r.mu.Lock()
	r.child, r.conn = child, conn
	r.mu.Unlock()

	if err := r.handshake(ctx, conn); err != nil {
		child.Kill(provider.ChildShutdownGrace)
		if tail := r.stderr.String(); tail != "" {
			r.log.Warn("acp agent failed to prepare", "stderr_tail", tail)
		}
		if nr := provider.NotReady(ctx); nr != nil {
			return provider.Prepared{}, fmt.Errorf("prepare acp runtime: %w", nr)
		}
		if ctx.Err() != nil && !errors.Is(err, provider.ErrExactResumeUnavailable) {
			return provider.Prepared{}, fmt.Errorf("prepare acp runtime: %w", errors.Join(context.Cause(ctx), err))
		}
		return provider.Prepared{}, fmt.Errorf("prepare acp runtime: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prepared = true
	return r.preparedLocked(), nil
}

func (r *Runtime) preparedLocked() provider.Prepared {
	pid := 0
	if r.child != nil {
		pid = r.child.PID()
	}
	return provider.Prepared{ProviderSessionID: string(r.session), Resumed: r.spec.ProviderSessionID != "",
		Identity: r.identity, Version: r.version, PID: pid}
}

// resumeFailed classifies a failed resume of the bound session: the agent's refusal is
// evidence that exact resume is unavailable; running out of time is not.
func resumeFailed(method, want string, ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s %s: %w", method, want, err)
	}
	return fmt.Errorf("%w: %s %s: %w", provider.ErrExactResumeUnavailable, method, want, err)
}

func (r *Runtime) handshake(ctx context.Context, conn *sdk.ClientSideConnection) error {
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
		r.stamper.Emit(provider.AgentEvent{Kind: domain.AgentRuntimeIdentity, Text: identity})
	}
	caps, cwd := init.AgentCapabilities, r.spec.Dir
	mcp := mcpServers(r.spec.MCP, caps.McpCapabilities)
	r.mu.Lock()
	r.tools = len(mcp) > 0
	r.mu.Unlock()
	if want := r.spec.ProviderSessionID; want != "" {
		id := sdk.SessionId(want)
		switch {
		case caps.LoadSession:
			// session/load replays history as updates; no turn is open, so they are dropped.
			if _, err := conn.LoadSession(ctx, sdk.LoadSessionRequest{SessionId: id, Cwd: cwd, McpServers: mcp}); err != nil {
				return resumeFailed("session/load", want, ctx, err)
			}
		case caps.SessionCapabilities.Resume != nil:
			if _, err := conn.ResumeSession(ctx, sdk.ResumeSessionRequest{SessionId: id, Cwd: cwd, McpServers: mcp}); err != nil {
				return resumeFailed("session/resume", want, ctx, err)
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
	r.stamper.Emit(provider.AgentEvent{Kind: domain.AgentProviderSessionBound, ProviderSessionID: string(ns.SessionId)})
	return nil
}

// RunTurn sends one session/prompt with the final-response envelope and maps the streamed
// updates to events. Cancelling ctx sends session/cancel; the turn then ends Cancelled.
func (r *Runtime) RunTurn(ctx context.Context, turn provider.Turn) (provider.TurnResult, error) {
	r.mu.Lock()
	if !r.prepared || r.tornDown {
		r.mu.Unlock()
		return provider.TurnResult{}, fmt.Errorf("run turn %s: %w", turn.ID, provider.ErrNotPrepared)
	}
	if r.turn != nil {
		r.mu.Unlock()
		return provider.TurnResult{}, fmt.Errorf("run turn %s: %w", turn.ID, provider.ErrTurnInProgress)
	}
	if !r.child.Alive() {
		r.mu.Unlock()
		return provider.TurnResult{}, fmt.Errorf("run turn %s: %w", turn.ID, provider.ErrRuntimeExited)
	}
	turnCtx, interrupt := context.WithCancel(ctx)
	defer interrupt()
	ts := &turnState{id: turn.ID, ctx: turnCtx, interrupt: interrupt,
		settle: provider.NewSettlement(turn.Messages, provider.SettlementOptions{ExplicitDisposition: true})}
	r.turn = ts
	membership := r.roster.Advance(turn.Roster)
	preamble := provider.Preamble(r.spec.Briefing, r.roster.Current())
	env := provider.Envelope{Style: provider.FinalResponse, Messages: turn.Messages, Tools: r.tools, Membership: membership}
	// ACP has no instruction channel: the preamble rides on the first prompt of a
	// connection and again only when it changed.
	if preamble != r.preamble {
		env.Preamble, r.preamble = preamble, preamble
	}
	conn, session := r.conn, r.session
	r.stamper.BeginTurn(turn.ID, turn.Source())
	r.mu.Unlock()

	r.stamper.Emit(provider.AgentEvent{Kind: domain.AgentTurnStarted})
	resp, err := r.prompt(turnCtx, conn, session, provider.RenderEnvelope(env))

	r.mu.Lock()
	interrupted := ts.interrupted || turnCtx.Err() != nil
	r.mu.Unlock()
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
		r.stamper.Emit(provider.AgentEvent{Kind: domain.AgentUsage, Usage: usageOf(resp.Usage)})
	}
	if outcome == domain.TurnComplete {
		// A silent turn acknowledges its messages (it has no final text to emit).
		ts.settle.StageSilentNoReply(r.emitDisposition)
	}
	res := provider.CloseTurn(r.stamper, ts.settle, outcome, turnErr)
	r.stamper.EndTurn()
	r.mu.Lock()
	r.turn = nil
	r.mu.Unlock()
	return res, nil
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
	case <-r.exited:
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
				r.log.Warn("session/cancel failed", "err", err)
			}
		}()
		select {
		case <-done:
		case <-t.C:
			r.log.Warn("acp agent ignored session/cancel; killing it", "grace", CancelGrace)
			r.mu.Lock()
			child := r.child
			r.mu.Unlock()
			child.Kill(provider.ChildShutdownGrace)
			abandon()
		}
	}()
	return conn.Prompt(reqCtx, sdk.PromptRequest{SessionId: session, Prompt: []sdk.ContentBlock{sdk.TextBlock(text)}})
}

func (r *Runtime) emitDisposition(d provider.Disposition) {
	d2 := d
	r.stamper.Emit(provider.AgentEvent{Kind: domain.AgentDispositionStaged, Disposition: &d2})
}

// Steer is unsupported: a message arriving mid-turn starts the next turn on the same session.
func (r *Runtime) Steer(context.Context, []provider.Message) error {
	return provider.ErrSteerUnsupported
}

// Interrupt ends the running turn as Cancelled (session/cancel).
func (r *Runtime) Interrupt(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.turn != nil {
		r.turn.interrupted = true
		r.turn.interrupt()
	}
	return nil
}

// Teardown retires the instance (it can no longer emit), closes the session where the agent
// supports it and reaps the process group. It is idempotent.
func (r *Runtime) Teardown(ctx context.Context, reason domain.CheckpointReason) error {
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
	// A turn of a child that is still alive is interrupted. A child that already died (the
	// registry tears a crashed runtime down) failed its turn: the prompt ends on the lost
	// transport as Failed, not as an interrupt's Cancelled.
	if r.turn != nil && r.child != nil && r.child.Alive() {
		r.turn.interrupted = true
		r.turn.interrupt()
	}
	child, conn, session, canClose := r.child, r.conn, r.session, r.caps.SessionCapabilities.Close != nil
	r.mu.Unlock()
	r.log.Info("acp runtime teardown", "reason", reason)
	if child == nil {
		return nil
	}
	if canClose && session != "" && child.Alive() {
		cctx, cancel := context.WithTimeout(ctx, closeTimeout)
		if _, err := conn.CloseSession(cctx, sdk.CloseSessionRequest{SessionId: session}); err != nil {
			r.log.Debug("session/close failed", "err", err)
		}
		cancel()
	}
	child.Kill(provider.ChildShutdownGrace)
	return nil
}

// Liveness reports the child and its transport.
func (r *Runtime) Liveness() provider.Liveness {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.child == nil {
		return provider.Liveness{}
	}
	open := false
	select {
	case <-r.conn.Done():
	default:
		open = true
	}
	return provider.Liveness{PID: r.child.PID(), ProcessAlive: r.child.Alive(), TransportOpen: open}
}

// Exited is closed when the agent process exits.
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

// ReadinessWarning says when the agent cannot continue a conversation after a restart.
func (r *Runtime) ReadinessWarning() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.prepared && !r.caps.LoadSession && r.caps.SessionCapabilities.Resume == nil {
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

func (r *Runtime) currentTurn() *turnState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.turn
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

// StageDisposition stages a settlement tool call (jam_reply_to_message / jam_no_reply over
// MCP) in the running turn.
func (r *Runtime) StageDisposition(d provider.Disposition) error {
	var s *provider.Settlement
	r.mu.Lock()
	if r.turn != nil {
		s = r.turn.settle
	}
	r.mu.Unlock()
	return provider.StageInTurn(s, d, r.emitDisposition)
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
