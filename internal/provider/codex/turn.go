package codex

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
)

// turnState is the Jam turn in flight; a Codex turn (or, after a failure, its retry or a
// compaction) runs inside it.
type turnState struct {
	*provider.TurnCore

	mu sync.Mutex
	// codexTurn is the Codex turn running now ("" between attempts).
	codexTurn string
	// completed receives each Codex turn's end.
	completed chan turnInfo
	// failure is the last error Codex reported that it will not retry.
	failure string
	usage   usageSum
}

// turnInfo is a Codex turn as turn/start and turn/completed describe it.
type turnInfo struct {
	ID     string     `json:"id"`
	Status string     `json:"status"`
	Error  *turnError `json:"error"`
}

// turnError is a failed turn's error; CodexErrorInfo says what kind (a string such as
// "contextWindowExceeded", or an object such as {"httpConnectionFailed": {...}}).
type turnError struct {
	Message        string          `json:"message"`
	CodexErrorInfo json.RawMessage `json:"codexErrorInfo"`
}

func (t *turnState) current() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.codexTurn
}

// Outcomes of one Codex turn inside a Jam turn.
const (
	statusCompleted   = "completed"
	statusInterrupted = "interrupted"
	statusFailed      = "failed"
)

// apology is posted (to a human's message) when the conversation no longer fits the
// model's context window even after compaction.
const apology = "I could not answer: this conversation no longer fits my model's context window, even after compacting it. " +
	"An operator can start a fresh session for this room."

// RunTurn sends the turn's messages as one Codex turn and maps its events. It retries a
// turn the model refused as overloaded (unless something was already staged), and for a
// context window exceeded compacts the thread once, retries, then apologizes. Cancelling
// ctx interrupts the turn (turn/interrupt); it then ends Cancelled.
func (r *Runtime) RunTurn(ctx context.Context, turn provider.Turn) (provider.TurnResult, error) {
	ts, end, err := provider.OpenTurn(r.Lifecycle, ctx, turn, provider.SettlementOptions{DispositionCapable: true, ExplicitDisposition: true},
		&r.mu, &r.turn, func(c *provider.TurnCore) *turnState {
			return &turnState{TurnCore: c, completed: make(chan turnInfo, 4)}
		})
	if err != nil {
		return provider.TurnResult{}, err
	}
	defer end()

	r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentTurnStarted})
	prompt := provider.RenderEnvelope(provider.Envelope{Style: provider.ExplicitDisposition, Messages: turn.Messages,
		Membership: r.Roster.Advance(turn.Roster)})
	outcome, turnErr := r.runLadder(ts, prompt)

	ts.mu.Lock()
	usage := ts.usage.event()
	ts.mu.Unlock()
	return r.CloseTurn(ts.TurnCore, usage, outcome, turnErr), nil
}

// runLadder runs Codex turns until the Jam turn has an outcome.
func (r *Runtime) runLadder(ts *turnState, prompt string) (domain.TurnOutcome, error) {
	overloads, compacted := 0, false
	for {
		info, err := r.codexTurn(ts, "turn/start", map[string]any{"threadId": r.threadID(),
			"input": []map[string]any{{"type": "text", "text": prompt}}})
		switch {
		case errors.Is(err, errInterrupted):
			return domain.TurnCancelled, nil
		case errors.Is(err, provider.ErrRuntimeExited):
			return domain.TurnFailed, err
		case err != nil:
			return domain.TurnFailed, err
		}
		switch info.Status {
		case statusCompleted:
			return domain.TurnComplete, nil
		case statusInterrupted:
			return domain.TurnCancelled, nil
		}
		kind, detail := classify(info.Error)
		if info.Error == nil {
			ts.mu.Lock()
			if ts.failure != "" {
				detail = ts.failure
			}
			ts.mu.Unlock()
		}
		if ts.Settle.HasDispositions() && kind == failOverloaded {
			// The agent already answered: a later refusal does not discard the answer.
			return domain.TurnComplete, nil
		}
		switch {
		case kind == failOverloaded && overloads < len(OverloadDelays):
			r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentStatus, Text: "the model is overloaded; retrying the turn"})
			if !sleep(ts.Ctx, OverloadDelays[overloads]) {
				return domain.TurnCancelled, nil
			}
			overloads++
			continue
		case kind == failContext && !compacted:
			compacted = true
			r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentCompaction, Text: "the context window is full; compacting the thread"})
			if _, err := r.codexTurn(ts, "thread/compact/start", map[string]any{"threadId": r.threadID()}); err != nil {
				if errors.Is(err, errInterrupted) {
					return domain.TurnCancelled, nil
				}
				return domain.TurnFailed, fmt.Errorf("compact the thread: %w", err)
			}
			continue
		case kind == failContext:
			ts.Settle.SetFinal(apology)
			return domain.TurnComplete, nil
		}
		return domain.TurnFailed, fmt.Errorf("codex turn failed: %s", detail)
	}
}

// codeOverloaded is the app-server's "server overloaded; retry" error code.
const codeOverloaded = -32001

// errInterrupted: the Jam turn was interrupted while a Codex turn ran.
var errInterrupted = errors.New("turn interrupted")

// codexTurn starts one Codex turn (turn/start, or thread/compact/start whose compaction runs
// as a turn) and waits for its end. A -32001 refusal of the start is retried with delay. An
// interrupt sends turn/interrupt and waits InterruptGrace for the turn to end, then kills
// the app-server.
func (r *Runtime) codexTurn(ts *turnState, method string, params map[string]any) (turnInfo, error) {
	c := r.conn()
	for attempt := 0; ; attempt++ {
		var res struct {
			Turn turnInfo `json:"turn"`
		}
		err := c.Call(ts.Ctx, method, params, &res)
		var rerr *jsonrpc.Error
		if errors.As(err, &rerr) && rerr.Code == codeOverloaded && attempt < len(OverloadDelays) {
			if !sleep(ts.Ctx, OverloadDelays[attempt]) {
				return turnInfo{}, errInterrupted
			}
			continue
		}
		if err != nil {
			if ts.Ctx.Err() != nil {
				return turnInfo{}, errInterrupted
			}
			if errors.Is(err, jsonrpc.ErrClosed) {
				return turnInfo{}, fmt.Errorf("%w: %w", provider.ErrRuntimeExited, err)
			}
			return turnInfo{}, err
		}
		if res.Turn.ID != "" {
			ts.mu.Lock()
			ts.codexTurn = res.Turn.ID
			ts.mu.Unlock()
		}
		break
	}
	for {
		select {
		case info := <-ts.completed:
			// A turn that ended before turn/start answered is still this one.
			ts.mu.Lock()
			if ts.codexTurn != "" && info.ID != ts.codexTurn {
				ts.mu.Unlock()
				continue
			}
			ts.codexTurn = ""
			ts.mu.Unlock()
			return info, nil
		case <-r.Exited():
			return turnInfo{}, fmt.Errorf("codex turn: %w", provider.ErrRuntimeExited)
		case <-ts.Ctx.Done():
			return r.interruptWait(ts)
		}
	}
}

// interruptWait asks Codex to end the running turn and waits for it to; an app-server that
// does not end it within InterruptGrace is killed, so it cannot keep working on (and
// writing into the thread of) an abandoned turn.
func (r *Runtime) interruptWait(ts *turnState) (turnInfo, error) {
	id := ts.current()
	if id != "" {
		ctx, cancel := context.WithTimeout(context.Background(), InterruptGrace)
		err := r.conn().Call(ctx, "turn/interrupt", map[string]any{"threadId": r.threadID(), "turnId": id}, nil)
		cancel()
		if err != nil {
			r.Log.Debug("turn/interrupt failed", "error", err)
		}
	}
	t := time.NewTimer(InterruptGrace)
	defer t.Stop()
	for {
		select {
		case info := <-ts.completed:
			if id != "" && info.ID != id {
				continue
			}
			return info, errInterrupted
		case <-r.Exited():
			return turnInfo{}, errInterrupted
		case <-t.C:
			r.Log.Warn("codex did not end an interrupted turn; killing it", "grace", InterruptGrace)
			r.proc.Get().Child.Kill(provider.ChildShutdownGrace)
			return turnInfo{}, errInterrupted
		}
	}
}

func (r *Runtime) conn() *jsonrpc.Conn { return r.proc.Get().Conn }

// Kinds of failed Codex turns the ladder tells apart.
const (
	failOther = iota
	failOverloaded
	failContext
)

// classify reads a failed turn's error: an overloaded or unavailable model, a full context
// window, or anything else (with its text).
func classify(e *turnError) (kind int, detail string) {
	if e == nil {
		return failOther, "no error was given"
	}
	detail = e.Message
	var name string
	if json.Unmarshal(e.CodexErrorInfo, &name) == nil {
		switch name {
		case "contextWindowExceeded":
			return failContext, detail
		case "serverOverloaded":
			return failOverloaded, detail
		}
		return failOther, detail
	}
	var obj map[string]struct {
		HTTPStatusCode int `json:"httpStatusCode"`
	}
	if json.Unmarshal(e.CodexErrorInfo, &obj) == nil {
		for _, v := range obj {
			switch v.HTTPStatusCode {
			case 429, 500, 502, 503, 504, 529:
				return failOverloaded, detail
			}
		}
	}
	return failOther, detail
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Steer adds messages to the running turn (turn/steer); their settlement joins the turn's.
// Messages already in the turn are skipped. Without a running Codex turn it fails, and the
// caller carries the messages over to the next turn.
func (r *Runtime) Steer(ctx context.Context, msgs []provider.Message) error {
	r.mu.Lock()
	ts := r.turn
	r.mu.Unlock()
	if ts == nil {
		return provider.ErrNoTurn
	}
	id := ts.current()
	if id == "" {
		return provider.ErrNoTurn
	}
	fresh := ts.FreshMessages(msgs)
	if len(fresh) == 0 {
		return nil
	}
	// Active before the model can see them, so a disposition for one is never refused.
	ts.Settle.Activate(fresh...)
	text := provider.RenderEnvelope(provider.Envelope{Style: provider.ExplicitDisposition, Messages: fresh, Steered: true})
	err := r.conn().Call(ctx, "turn/steer", map[string]any{"threadId": r.threadID(), "expectedTurnId": id,
		"input": []map[string]any{{"type": "text", "text": text}}}, nil)
	if err != nil {
		ts.Settle.Deactivate(fresh...)
		return fmt.Errorf("steer turn %s: %w: %w", ts.ID, provider.ErrNoTurn, err)
	}
	r.SteeredStatus(len(fresh))
	return nil
}

// usageSum adds up the per-request token counts Codex reports during a turn.
type usageSum struct {
	seen                                    bool
	input, cached, output, reasoning, total int64
}

func (u *usageSum) event() *provider.Usage {
	if !u.seen {
		return nil
	}
	// Input excludes what the provider served from its cache, as the reference counts it.
	in, cached, out, reasoning, total := u.input-u.cached, u.cached, u.output, u.reasoning, u.total
	return &provider.Usage{InputTokens: &in, CachedInputTokens: &cached, OutputTokens: &out, ReasoningTokens: &reasoning, TotalTokens: &total}
}

// notification maps the app-server's notifications for this runtime's thread.
func (r *Runtime) notification(method string, raw json.RawMessage) {
	r.mu.Lock()
	ts := r.turn
	r.mu.Unlock()
	if ts == nil {
		return // the replay of a resumed thread, warnings before the first turn
	}
	switch method {
	case "turn/started":
		if p, ok := paramsOf[struct {
			Turn turnInfo `json:"turn"`
		}](r, method, raw); ok && p.Turn.ID != "" {
			ts.mu.Lock()
			if ts.codexTurn == "" {
				ts.codexTurn = p.Turn.ID
			}
			ts.mu.Unlock()
		}
	case "turn/completed":
		if p, ok := paramsOf[struct {
			Turn turnInfo `json:"turn"`
		}](r, method, raw); ok {
			select {
			case ts.completed <- p.Turn:
			default:
				r.Log.Warn("codex turn end dropped: nobody waits for it", "turn", p.Turn.ID)
			}
		}
	case "item/agentMessage/delta":
		if p, ok := paramsOf[struct {
			Delta string `json:"delta"`
		}](r, method, raw); ok && p.Delta != "" {
			r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentTextDelta, Text: p.Delta})
		}
	case "item/started", "item/completed":
		if p, ok := paramsOf[struct {
			Item item `json:"item"`
		}](r, method, raw); ok {
			r.item(ts, method == "item/completed", p.Item)
		}
	case "thread/tokenUsage/updated":
		if p, ok := paramsOf[struct {
			TokenUsage struct {
				Last struct {
					TotalTokens           int64 `json:"totalTokens"`
					InputTokens           int64 `json:"inputTokens"`
					CachedInputTokens     int64 `json:"cachedInputTokens"`
					OutputTokens          int64 `json:"outputTokens"`
					ReasoningOutputTokens int64 `json:"reasoningOutputTokens"`
				} `json:"last"`
				Total struct {
					TotalTokens int64 `json:"totalTokens"`
				} `json:"total"`
				ModelContextWindow *int64 `json:"modelContextWindow"`
			} `json:"tokenUsage"`
		}](r, method, raw); ok {
			l := p.TokenUsage.Last
			ts.mu.Lock()
			ts.usage.seen = true
			ts.usage.input += l.InputTokens
			ts.usage.cached += l.CachedInputTokens
			ts.usage.output += l.OutputTokens
			ts.usage.reasoning += l.ReasoningOutputTokens
			ts.usage.total += l.TotalTokens
			ts.mu.Unlock()
			if w := p.TokenUsage.ModelContextWindow; w != nil && *w > 0 {
				r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentContextGauge,
					Text:  fmt.Sprintf("context %d/%d tokens", l.InputTokens+l.OutputTokens, *w),
					Extra: map[string]json.Number{"used": json.Number(fmt.Sprint(l.InputTokens + l.OutputTokens)), "size": json.Number(fmt.Sprint(*w))}})
			}
		}
	case "error":
		if p, ok := paramsOf[struct {
			Error     turnError `json:"error"`
			WillRetry bool      `json:"willRetry"`
		}](r, method, raw); ok {
			if p.WillRetry {
				r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentStatus, Text: p.Error.Message})
			} else {
				ts.mu.Lock()
				ts.failure = p.Error.Message
				ts.mu.Unlock()
			}
		}
	}
}

// item is the part of a thread item Jam reads.
type item struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	Text    string          `json:"text"`
	Command json.RawMessage `json:"command"`
	Status  string          `json:"status"`
	Summary []string        `json:"summary"`
	Tool    string          `json:"tool"`
}

// item maps one thread item: the agent's messages (the last one is the turn's final text),
// its reasoning summaries, and its commands and file changes as tool calls.
func (r *Runtime) item(ts *turnState, completed bool, it item) {
	switch it.Type {
	case "agentMessage":
		if completed {
			ts.Settle.SetFinal(it.Text)
		}
	case "reasoning":
		if completed && len(it.Summary) > 0 {
			r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentThought, Text: strings.Join(it.Summary, "\n")})
		}
	case "commandExecution", "fileChange", "mcpToolCall", "dynamicToolCall", "webSearch":
		kind := domain.AgentToolCall
		if completed {
			kind = domain.AgentToolResult
		}
		title := it.Tool
		if title == "" {
			title = commandText(it.Command)
		}
		if title == "" {
			title = it.Type
		}
		r.Stamper.Emit(provider.AgentEvent{Kind: kind, Tool: &provider.ToolCall{ID: domain.Truncate(it.ID, 200),
			Title: domain.Truncate(title, 500), Kind: it.Type, Status: it.Status}})
	case "contextCompaction":
		if completed {
			r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentCompaction, Text: "the thread was compacted"})
		}
	}
}

// commandText renders a command given as a string or an argv.
func commandText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var argv []string
	if json.Unmarshal(raw, &argv) == nil {
		return strings.Join(argv, " ")
	}
	return ""
}
