package copilot

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
)

// turnState is the Jam turn in flight: the session.send that began it and the sends that
// steered into it.
type turnState struct {
	*provider.TurnCore
	// ends receives session.idle and session.error.
	ends chan end

	mu sync.Mutex
	// sent counts the prompts Jam sent in this turn; taken the user messages Copilot
	// took from them (user.message events). An idle before every prompt was taken is not
	// the turn's end: the rest run next.
	sent, taken int
	// closed: the turn has ended (or is ending) for Jam; a steer now goes to the next turn.
	closed bool
	// idle: the last event was session.idle (the agent is not running).
	idle    bool
	failure string
	usage   usageSum
}

// end is how Copilot said the agent stopped.
type end struct {
	idle   bool
	reason string
}

// Errors of session.send while the runtime is alive.
var errAbortGrace = fmt.Errorf("copilot did not end an aborted turn within %s", InterruptGrace)

// ErrorGrace is how long after a session.error Jam waits for the session.idle that
// normally follows before it ends the turn anyway.
var ErrorGrace = 2 * time.Second

// RunTurn sends the turn's messages (session.send) and maps the session's events until it
// is idle. Cancelling ctx aborts the turn (session.abort); it then ends Cancelled.
func (r *Runtime) RunTurn(ctx context.Context, turn provider.Turn) (provider.TurnResult, error) {
	ts, endTurn, err := provider.OpenTurn(r.Lifecycle, ctx, turn, provider.SettlementOptions{DispositionCapable: true, ExplicitDisposition: true},
		&r.mu, &r.turn, func(c *provider.TurnCore) *turnState {
			return &turnState{TurnCore: c, ends: make(chan end, 8), sent: 1}
		})
	if err != nil {
		return provider.TurnResult{}, err
	}
	defer endTurn()
	turnCtx, c := ts.Ctx, r.conn()
	r.mu.Lock()
	session, wasBound := r.session, r.bound
	r.mu.Unlock()

	r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentTurnStarted})
	prompt := provider.RenderEnvelope(provider.Envelope{Style: provider.ExplicitDisposition, Messages: turn.Messages,
		Membership: r.Roster.Advance(turn.Roster)})
	var (
		outcome domain.TurnOutcome
		turnErr error
		sent    bool
	)
	err = c.Call(turnCtx, "session.send", map[string]any{"sessionId": session, "prompt": prompt}, nil)
	switch {
	case err != nil && turnCtx.Err() != nil:
		// Cancelled while the send was in flight: it may have been taken, so abort it.
		sent = true
		outcome, turnErr = r.abort(ts)
	case err != nil && !r.Liveness().ProcessAlive:
		outcome, turnErr = domain.TurnFailed, fmt.Errorf("%w: %w", provider.ErrRuntimeExited, err)
	case err != nil:
		outcome, turnErr = domain.TurnFailed, err
	default:
		sent = true
		outcome, turnErr = r.await(ts)
	}

	ts.mu.Lock()
	ts.closed = true
	usage := ts.usage.event()
	ts.mu.Unlock()
	res := r.CloseTurn(ts.TurnCore, usage, outcome, turnErr)
	if sent && !wasBound {
		// The session holds a message now, so Copilot keeps it: from now on it resumes.
		r.mu.Lock()
		r.bound = true
		r.mu.Unlock()
		r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentProviderSessionBound, ProviderSessionID: session})
		res.ProviderSessionID = session
	}
	return res, nil
}

// await waits for the turn's end: the session idle with every prompt taken, an error, the
// process gone, or an interrupt.
func (r *Runtime) await(ts *turnState) (domain.TurnOutcome, error) {
	for {
		select {
		case e := <-ts.ends:
			if e.idle {
				ts.mu.Lock()
				rest := ts.sent - ts.taken
				failure := ts.failure
				// Decided with the count under one lock: a steer either counted before this
				// (and runs in this turn) or finds the turn closed.
				ts.closed = rest <= 0
				ts.mu.Unlock()
				if rest > 0 {
					continue // a steered prompt runs next, in this turn
				}
				if failure != "" {
					return domain.TurnFailed, fmt.Errorf("copilot turn failed: %s", failure)
				}
				return domain.TurnComplete, nil
			}
			// An error normally comes before the idle that ends the run; wait briefly for it.
			t := time.NewTimer(ErrorGrace)
			select {
			case <-ts.ends:
			case <-t.C:
			case <-ts.Ctx.Done():
			}
			t.Stop()
			if ts.Settle.HasDispositions() {
				// The agent already answered: a later failure does not discard the answer.
				return domain.TurnComplete, nil
			}
			return domain.TurnFailed, fmt.Errorf("copilot turn failed: %s", e.reason)
		case <-r.Exited():
			return domain.TurnFailed, fmt.Errorf("copilot turn: %w", provider.ErrRuntimeExited)
		case <-ts.Ctx.Done():
			return r.abort(ts)
		}
	}
}

// abort asks Copilot to stop the running turn and waits for the session to go idle; a
// server that does not stop within InterruptGrace is killed, so it cannot keep working on
// (and writing into the session of) an abandoned turn.
func (r *Runtime) abort(ts *turnState) (domain.TurnOutcome, error) {
	ctx, cancel := context.WithTimeout(context.Background(), InterruptGrace)
	defer cancel()
	if err := r.conn().Call(ctx, "session.abort", map[string]any{"sessionId": r.sessionID()}, nil); err != nil {
		r.Log.Debug("session.abort failed", "error", err)
	}
	for {
		select {
		case e := <-ts.ends:
			if e.idle {
				return domain.TurnCancelled, nil
			}
		case <-r.Exited():
			return domain.TurnCancelled, nil
		case <-ctx.Done():
			r.Log.Warn("copilot did not end an aborted turn; killing it", "error", errAbortGrace)
			// On a Shared host the host's other rooms lose their runtime too, and wake
			// again on their next message: a server still running an abandoned turn would
			// keep writing into this room's session.
			r.srv.Get().Child.Kill(provider.ChildShutdownGrace)
			return domain.TurnCancelled, nil
		}
	}
}

// Steer sends messages into the running turn (session.send in immediate mode: Copilot takes
// them into the agent's run at its next step); their settlement joins the turn's. Messages
// already in the turn are skipped. Without a running turn it fails, and the caller carries
// the messages over to the next turn.
func (r *Runtime) Steer(ctx context.Context, msgs []provider.Message) error {
	r.mu.Lock()
	ts := r.turn
	r.mu.Unlock()
	if ts == nil || ts.Ctx.Err() != nil {
		return provider.ErrNoTurn
	}
	fresh := ts.FreshMessages(msgs)
	if len(fresh) == 0 {
		return nil
	}
	ts.mu.Lock()
	if ts.closed {
		ts.mu.Unlock()
		return provider.ErrNoTurn
	}
	ts.sent++
	ts.mu.Unlock()
	// Active before the model can see them, so a disposition for one is never refused.
	ts.Settle.Activate(fresh...)
	text := provider.RenderEnvelope(provider.Envelope{Style: provider.ExplicitDisposition, Messages: fresh, Steered: true})
	err := r.conn().Call(ctx, "session.send", map[string]any{"sessionId": r.sessionID(), "prompt": text, "mode": "immediate"}, nil)
	if err != nil {
		ts.mu.Lock()
		ts.sent--
		// The turn may be waiting, idle, for this very prompt: let it look again.
		recheck := ts.idle && ts.sent-ts.taken <= 0
		ts.mu.Unlock()
		if recheck {
			select {
			case ts.ends <- end{idle: true}:
			default:
			}
		}
		ts.Settle.Deactivate(fresh...)
		return fmt.Errorf("steer turn %s: %w: %w", ts.ID, provider.ErrNoTurn, err)
	}
	r.SteeredStatus(len(fresh))
	return nil
}

// usageSum adds up the per-request token counts Copilot reports during a turn.
type usageSum struct {
	seen                  bool
	input, cached, output int64
}

func (u *usageSum) event() *provider.Usage {
	if !u.seen {
		return nil
	}
	// Input excludes what the provider served from its cache, as the reference counts it.
	in, cached, out := u.input-u.cached, u.cached, u.output
	if in < 0 {
		in = u.input
	}
	total := u.input + u.output
	return &provider.Usage{InputTokens: &in, CachedInputTokens: &cached, OutputTokens: &out, TotalTokens: &total}
}

// sessionEvent is the params of a session.event notification.
type sessionEvent struct {
	SessionID string `json:"sessionId"`
	Event     struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	} `json:"event"`
}

// notification maps a session event of this runtime's session (the server routed it).
func (r *Runtime) notification(raw json.RawMessage) {
	ev, ok := decode[sessionEvent](r, "session.event", raw)
	if !ok {
		return
	}
	r.mu.Lock()
	ts := r.turn
	r.mu.Unlock()
	typ, data := ev.Event.Type, ev.Event.Data
	switch typ {
	case "permission.requested":
		go r.permission(ts, data)
		return
	case "external_tool.requested":
		go r.externalTool(data)
		return
	}
	if ts == nil {
		return // the history of a resumed session, events after a turn ended
	}
	ts.mu.Lock()
	ts.idle = typ == "session.idle"
	ts.mu.Unlock()
	switch typ {
	case "user.message":
		ts.mu.Lock()
		ts.taken++
		ts.mu.Unlock()
	case "assistant.message_delta":
		if d, ok := decode[struct {
			DeltaContent string `json:"deltaContent"`
		}](r, typ, data); ok && d.DeltaContent != "" {
			r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentTextDelta, Text: d.DeltaContent})
		}
	case "assistant.message":
		if d, ok := decode[struct {
			Content string `json:"content"`
		}](r, typ, data); ok && d.Content != "" {
			ts.Settle.SetFinal(d.Content)
		}
	case "assistant.reasoning":
		if d, ok := decode[struct {
			Content string `json:"content"`
		}](r, typ, data); ok && d.Content != "" {
			r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentThought, Text: d.Content})
		}
	case "assistant.usage":
		if d, ok := decode[struct {
			InputTokens     int64 `json:"inputTokens"`
			OutputTokens    int64 `json:"outputTokens"`
			CacheReadTokens int64 `json:"cacheReadTokens"`
		}](r, typ, data); ok {
			ts.mu.Lock()
			ts.usage.seen = true
			ts.usage.input += d.InputTokens
			ts.usage.output += d.OutputTokens
			ts.usage.cached += d.CacheReadTokens
			ts.mu.Unlock()
		}
	case "tool.execution_start", "tool.execution_complete":
		if d, ok := decode[struct {
			ToolCallID string `json:"toolCallId"`
			ToolName   string `json:"toolName"`
			Success    *bool  `json:"success"`
		}](r, typ, data); ok {
			kind, status := domain.AgentToolCall, "in_progress"
			if typ == "tool.execution_complete" {
				kind, status = domain.AgentToolResult, "completed"
				if d.Success != nil && !*d.Success {
					status = "failed"
				}
			}
			r.Stamper.Emit(provider.AgentEvent{Kind: kind, Tool: &provider.ToolCall{ID: domain.Truncate(d.ToolCallID, 200),
				Title: domain.Truncate(d.ToolName, 500), Kind: "tool", Status: status}})
		}
	case "session.compaction_complete":
		r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentCompaction, Text: "the session was compacted"})
	case "session.idle":
		select {
		case ts.ends <- end{idle: true}:
		default:
			r.Log.Warn("copilot idle dropped: nobody waits for it")
		}
	case "session.error":
		d, _ := decode[struct {
			ErrorType string `json:"errorType"`
			Message   string `json:"message"`
		}](r, typ, data)
		reason := domain.Truncate(d.Message, 1000)
		if reason == "" {
			reason = "copilot reported an error (" + domain.Truncate(d.ErrorType, 100) + ")"
		}
		ts.mu.Lock()
		ts.failure = reason
		ts.mu.Unlock()
		select {
		case ts.ends <- end{reason: reason}:
		default:
		}
	default:
		r.Log.Debug("copilot event", "type", typ)
	}
}
