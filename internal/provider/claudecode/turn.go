package claudecode

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
)

// turnState is the Jam turn in flight. Claude runs the user lines Jam writes one run at a
// time (lines queued while a run works are taken together into the next run), each run
// ending with a `result` line; the Jam turn ends at a result once Claude has taken every
// line Jam wrote for the turn.
type turnState struct {
	*provider.TurnCore

	mu sync.Mutex
	// pending are the texts of lines written and not yet replayed (taken) by Claude.
	pending []string
	// closed: the turn ended; nothing more is steered into it.
	closed  bool
	results chan result
	// replayed is told each time Claude takes lines into a run.
	replayed chan struct{}
	usage    usageSum
}

// result is the part of a `result` line Jam reads.
type result struct {
	Subtype        string   `json:"subtype"`
	IsError        bool     `json:"is_error"`
	Result         string   `json:"result"`
	Errors         []string `json:"errors"`
	TerminalReason string   `json:"terminal_reason"`
	SessionID      string   `json:"session_id"`
	// Usage is this run's (total_cost_usd is cumulative over the process and never summed).
	Usage *struct {
		InputTokens              int64 `json:"input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
	} `json:"usage"`
}

// Result subtypes.
const (
	resultSuccess  = "success"
	resultMaxTurns = "error_max_turns"
)

// usageSum adds up the runs of one Jam turn.
type usageSum struct {
	seen                         bool
	input, cached, output, total int64
}

func (u *usageSum) add(res result) {
	if res.Usage == nil {
		return
	}
	x := res.Usage
	u.seen = true
	// Input counts every prompt token but those served from the cache, as the reference
	// does; cache creation is input.
	u.input += x.InputTokens + x.CacheCreationInputTokens
	u.cached += x.CacheReadInputTokens
	u.output += x.OutputTokens
	u.total += x.InputTokens + x.CacheCreationInputTokens + x.CacheReadInputTokens + x.OutputTokens
}

func (u *usageSum) event() *provider.Usage {
	if !u.seen {
		return nil
	}
	in, cached, out, total := u.input, u.cached, u.output, u.total
	return &provider.Usage{InputTokens: &in, CachedInputTokens: &cached, OutputTokens: &out, TotalTokens: &total}
}

// RunTurn writes the turn's messages as one user line and waits for Claude to finish every
// line of the turn (steered ones included). Cancelling ctx interrupts it; it then ends
// Cancelled.
func (r *Runtime) RunTurn(ctx context.Context, turn provider.Turn) (provider.TurnResult, error) {
	r.mu.Lock()
	capable := r.toolsOK
	r.mu.Unlock()
	ts, end, err := provider.OpenTurn(r.Lifecycle, ctx, turn, provider.SettlementOptions{DispositionCapable: capable, ExplicitDisposition: true},
		&r.mu, &r.turn, func(c *provider.TurnCore) *turnState {
			return &turnState{TurnCore: c, results: make(chan result, 16), replayed: make(chan struct{}, 1)}
		})
	if err != nil {
		return provider.TurnResult{}, err
	}
	defer end()
	r.mu.Lock()
	w, session, wasBound := r.w, r.session, r.bound
	r.mu.Unlock()

	r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentTurnStarted})
	env := r.envelope(turn.Messages, false)
	env.Membership = r.Roster.Advance(turn.Roster)
	text := provider.RenderEnvelope(env)
	ts.mu.Lock()
	ts.pending = append(ts.pending, text)
	ts.mu.Unlock()
	var outcome domain.TurnOutcome
	var turnErr error
	if err := w.line(userLine(text)); err != nil {
		outcome, turnErr = domain.TurnFailed, fmt.Errorf("%w: %w", provider.ErrRuntimeExited, err)
	} else {
		outcome, turnErr = r.await(ts)
	}

	ts.mu.Lock()
	ts.closed = true
	usage := ts.usage.event()
	ts.mu.Unlock()
	res := r.CloseTurn(ts.TurnCore, usage, outcome, turnErr)
	r.mu.Lock()
	diverged := r.diverged
	r.mu.Unlock()
	if !wasBound && !diverged && r.transcriptWritten(session) {
		// The first turn wrote the pinned session's transcript: from now on it resumes.
		r.mu.Lock()
		r.bound = true
		r.mu.Unlock()
		r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentProviderSessionBound, ProviderSessionID: session})
		res.ProviderSessionID = session
	}
	return res, nil
}

// transcriptWritten reports whether Claude keeps the session now.
func (r *Runtime) transcriptWritten(session string) bool {
	return r.checkTranscript(session) == nil
}

// envelope is a turn's (or a steer's) prompt: explicit dispositions when Jam's tools are
// connected, else the final response is the reply.
func (r *Runtime) envelope(msgs []provider.Message, steered bool) provider.Envelope {
	r.mu.Lock()
	capable := r.toolsOK
	r.mu.Unlock()
	if capable {
		return provider.Envelope{Style: provider.ExplicitDisposition, Messages: msgs, Steered: steered}
	}
	return provider.Envelope{Style: provider.FinalResponse, Messages: msgs}
}

// await waits for the turn's end: a result once every line was taken, the child's exit,
// or an interrupt.
func (r *Runtime) await(ts *turnState) (domain.TurnOutcome, error) {
	for {
		select {
		case res := <-ts.results:
			if !ts.finish(res) {
				continue // a line steered in is still queued: another run follows
			}
			return r.outcome(ts, res)
		case <-r.Exited():
			return domain.TurnFailed, fmt.Errorf("claude turn: %w", provider.ErrRuntimeExited)
		case <-ts.Ctx.Done():
			return r.interruptWait(ts)
		}
	}
}

// finish reports whether the turn ends with this result (nothing Jam wrote is still
// queued), and closes it then, so a later steer goes to the next turn.
func (ts *turnState) finish(res result) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.usage.add(res)
	if len(ts.pending) > 0 {
		return false
	}
	ts.closed = true
	return true
}

// outcome maps the turn's last result.
func (r *Runtime) outcome(ts *turnState, res result) (domain.TurnOutcome, error) {
	r.mu.Lock()
	diverged, want := r.diverged, r.session
	r.mu.Unlock()
	switch {
	case diverged:
		return domain.TurnFailed, fmt.Errorf("%w: claude answered in session %s, not %s", provider.ErrExactResumeUnavailable,
			domain.Truncate(res.SessionID, 80), want)
	case ts.Interrupted():
		return domain.TurnCancelled, nil
	case res.Subtype == resultSuccess && !res.IsError:
		ts.Settle.SetFinal(res.Result)
		return domain.TurnComplete, nil
	case res.Subtype == resultMaxTurns:
		// The agent ran out of turns: what it settled stands; the rest stays queued.
		r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentStatus, Text: "Claude stopped: it reached its limit of agentic turns"})
		return domain.TurnComplete, nil
	}
	detail := strings.Join(res.Errors, "; ")
	if detail == "" {
		detail = res.Result
	}
	if detail == "" {
		detail = res.Subtype
	}
	return domain.TurnFailed, fmt.Errorf("claude turn failed: %s", domain.Truncate(detail, 500))
}

// interruptWait asks Claude to stop and waits for the run to end, interrupting again any
// run that starts for a line still queued; a child that does not settle within
// InterruptGrace is killed, so it cannot keep working on an abandoned turn.
func (r *Runtime) interruptWait(ts *turnState) (domain.TurnOutcome, error) {
	ts.mu.Lock()
	ts.closed = true // nothing more is steered into an interrupted turn
	ts.mu.Unlock()
	deadline := time.NewTimer(InterruptGrace)
	defer deadline.Stop()
	send := func() {
		ctx, cancel := context.WithTimeout(context.Background(), ControlTimeout)
		defer cancel()
		if err := r.control(ctx, map[string]any{"subtype": "interrupt"}, nil); err != nil {
			r.Log.Debug("claude interrupt failed", "error", err)
		}
	}
	go send()
	for {
		select {
		case res := <-ts.results:
			ts.mu.Lock()
			ts.usage.add(res)
			left := len(ts.pending)
			ts.mu.Unlock()
			if left == 0 {
				return domain.TurnCancelled, nil
			}
			go send() // the queued line starts a run of its own: stop that one too
		case <-ts.replayed:
			go send() // a line taken after the interrupt: its run is stopped as well
		case <-r.Exited():
			return domain.TurnCancelled, nil
		case <-deadline.C:
			r.Log.Warn("claude did not end an interrupted turn; killing it", "grace", InterruptGrace)
			r.mu.Lock()
			child := r.child
			r.mu.Unlock()
			child.Kill(provider.ChildShutdownGrace)
			return domain.TurnCancelled, nil
		}
	}
}

// Steer adds messages to the running turn as another user line; Claude takes it into its
// current run or the next one, and the turn ends only once it has. Messages already in
// the turn are skipped.
func (r *Runtime) Steer(_ context.Context, msgs []provider.Message) error {
	r.mu.Lock()
	ts, w := r.turn, r.w
	r.mu.Unlock()
	if ts == nil {
		return provider.ErrNoTurn
	}
	fresh := ts.FreshMessages(msgs)
	if len(fresh) == 0 {
		return nil
	}
	text := provider.RenderEnvelope(r.envelope(fresh, true))
	ts.mu.Lock()
	if ts.closed {
		ts.mu.Unlock()
		return provider.ErrNoTurn
	}
	// Pending and active before Claude can see the line: the turn cannot end without it,
	// and a disposition for one of them is never refused.
	ts.pending = append(ts.pending, text)
	ts.Settle.Activate(fresh...)
	ts.mu.Unlock()
	if err := w.line(userLine(text)); err != nil {
		ts.mu.Lock()
		ts.pending = remove(ts.pending, text)
		ts.mu.Unlock()
		ts.Settle.Deactivate(fresh...)
		return fmt.Errorf("steer turn %s: %w: %w", ts.ID, provider.ErrNoTurn, err)
	}
	r.SteeredStatus(len(fresh))
	return nil
}

func remove(list []string, s string) []string {
	for i, x := range list {
		if x == s {
			return append(list[:i:i], list[i+1:]...)
		}
	}
	return list
}

// output maps claude's output lines. Lines outside a turn (a resumed session's setup) and of
// a subagent's work (parent_tool_use_id set) carry nothing Jam reports but tool activity.
func (r *Runtime) output(l line, raw []byte) {
	r.mu.Lock()
	ts := r.turn
	r.mu.Unlock()
	if ts == nil {
		return
	}
	switch l.Type {
	case "result":
		if res, ok := decode[result](r, "result", raw); ok {
			select {
			case ts.results <- res:
			default:
				r.Log.Warn("claude result dropped: nobody waits for it")
			}
		}
	case "user":
		if l.IsReplay {
			r.taken(ts, l.Message)
			return
		}
		r.toolResults(l.Message)
	case "assistant":
		r.assistant(l)
	case "stream_event":
		if l.ParentToolUseID == nil {
			r.streamEvent(l.Event)
		}
	case "system":
		r.system(l.Subtype, raw)
	}
}

// taken marks the lines Claude took into a run: a replay holds one line's text, or the
// texts of the lines queued together, joined.
func (r *Runtime) taken(ts *turnState, msg json.RawMessage) {
	m, ok := decode[struct {
		Content json.RawMessage `json:"content"`
	}](r, "replayed user line", msg)
	if !ok {
		return
	}
	text := contentText(m.Content)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var left []string
	for _, p := range ts.pending {
		if !strings.Contains(text, p) {
			left = append(left, p)
		}
	}
	ts.pending = left
	select {
	case ts.replayed <- struct{}{}:
	default:
	}
}

// contentText flattens a message content that is a string or a list of typed parts.
func contentText(content json.RawMessage) string {
	var s string
	if json.Unmarshal(content, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(content, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
		b.WriteByte('\n')
	}
	return b.String()
}

// block is one content block of an assistant or user message.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	IsError   bool            `json:"is_error"`
}

// assistant reports a finished assistant message's thoughts and tool calls (its text has
// streamed already as deltas).
func (r *Runtime) assistant(l line) {
	m, ok := decode[struct {
		Content []block `json:"content"`
	}](r, "assistant message", l.Message)
	if !ok {
		return
	}
	for _, b := range m.Content {
		switch b.Type {
		case "thinking":
			if b.Thinking != "" && l.ParentToolUseID == nil {
				r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentThought, Text: b.Thinking})
			}
		case "tool_use":
			r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentToolCall, Tool: &provider.ToolCall{
				ID: domain.Truncate(b.ID, 200), Title: domain.Truncate(toolTitle(b.Name, b.Input), 500), Kind: b.Name, Status: "pending"}})
		}
	}
}

// toolResults reports the results of tool calls.
func (r *Runtime) toolResults(msg json.RawMessage) {
	m, ok := decode[struct {
		Content json.RawMessage `json:"content"`
	}](r, "user message", msg)
	if !ok {
		return
	}
	var blocks []block
	if json.Unmarshal(m.Content, &blocks) != nil {
		return
	}
	for _, b := range blocks {
		if b.Type != "tool_result" {
			continue
		}
		status := "completed"
		if b.IsError {
			status = "failed"
		}
		r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentToolResult, Tool: &provider.ToolCall{
			ID: domain.Truncate(b.ToolUseID, 200), Status: status}})
	}
}

// streamEvent streams the assistant's text as it is written.
func (r *Runtime) streamEvent(raw json.RawMessage) {
	ev, ok := decode[struct {
		Type  string `json:"type"`
		Delta struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"delta"`
	}](r, "stream event", raw)
	if ok && ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" && ev.Delta.Text != "" {
		r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentTextDelta, Text: ev.Delta.Text})
	}
}

// system maps the system lines Jam reports: compaction, and Jam's tools dropping out.
func (r *Runtime) system(subtype string, raw []byte) {
	switch subtype {
	case "compact_boundary":
		r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentCompaction, Text: "the conversation was compacted"})
	case "init":
		init, ok := decode[struct {
			SessionID  string `json:"session_id"`
			MCPServers []struct {
				Name   string `json:"name"`
				Status string `json:"status"`
			} `json:"mcp_servers"`
		}](r, "system init", raw)
		if !ok {
			return
		}
		r.mu.Lock()
		want := r.session
		if init.SessionID != "" && init.SessionID != want && !r.diverged {
			// Never a silent fresh session: the turn fails and the messages stay queued.
			r.diverged = true
			r.Log.Error("claude runs another session than the one it was started on", "want", want, "got", init.SessionID)
		}
		r.mu.Unlock()
		if r.Spec.MCP == nil {
			return
		}
		for _, s := range init.MCPServers {
			if s.Name == r.Spec.MCP.Name && s.Status != "connected" {
				r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentStatus,
					Text: "Jam's tools are " + domain.Truncate(s.Status, 40) + " in Claude Code"})
			}
		}
	}
}

// toolTitle is a short description of a tool call: a command, a path, or the tool's name.
func toolTitle(name string, input json.RawMessage) string {
	var in struct {
		Command     string `json:"command"`
		FilePath    string `json:"file_path"`
		Path        string `json:"path"`
		Pattern     string `json:"pattern"`
		URL         string `json:"url"`
		Description string `json:"description"`
	}
	_ = json.Unmarshal(input, &in)
	for _, s := range []string{in.Command, in.FilePath, in.Path, in.Pattern, in.URL, in.Description} {
		if s != "" {
			return name + ": " + s
		}
	}
	return name
}
