package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/acp-go-sdk"
)

// directivePattern matches [[name]] or [[name ARG]]; trailing blanks are
// swallowed so "a [[echo]] b" strips to "a b".
var directivePattern = regexp.MustCompile(`\[\[\s*([A-Za-z][A-Za-z_-]*)(?:\s+([^\[\]]*?))?\s*\]\][ \t]*`)

// directives is the scripted behaviour selected for one turn.
type directives struct {
	echo, crash, silent, thoughts, tools, usage bool
	fail, count, garbage, grandchild            bool
	roster                                      bool // report the room roster the client gave
	slow                                        time.Duration
	stubborn                                    time.Duration // sleep ignoring session/cancel, then reply
	permission                                  string        // tool kind; "" means no permission request
	env                                         []string      // variables whose values the reply reports
	toolCalls                                   []toolCall    // Jam MCP tools to call, in order
	saveMCP                                     bool          // write the session's MCP servers to the state dir
	grow                                        int           // MiB to allocate, touch and keep for the process's life
	wedge                                       bool          // hang the turn, emitting nothing, until it is cancelled
	wedgeOnce                                   bool          // wedge, unless an earlier process of this state dir already did
}

// apply records one directive and reports whether the name is known;
// unknown tokens are left in the text so typos are visible in the echo.
func (d *directives) apply(name, arg string) bool {
	switch strings.ToLower(name) {
	case "echo":
		d.echo = true
	case "crash":
		d.crash = true
	case "silent":
		d.silent = true
	case "thoughts":
		d.thoughts = true
	case "tools":
		d.tools = true
	case "usage":
		d.usage = true
	case "fail":
		d.fail = true
	case "count":
		d.count = true
	case "roster":
		d.roster = true
	case "garbage":
		d.garbage = true
	case "grandchild":
		d.grandchild = true
	case "slow":
		d.slow = seconds(arg)
	case "stubborn":
		d.stubborn = seconds(arg)
	case "permission":
		d.permission = "edit"
		if arg != "" {
			d.permission = arg
		}
	case "env":
		if arg != "" {
			d.env = append(d.env, arg)
		}
	case "save-mcp":
		d.saveMCP = true
	case "grow":
		d.grow = mebibytes(arg)
	case "wedge":
		d.wedge = true
	case "wedge-once":
		d.wedgeOnce = true
	case "retry-reply-tool":
		d.toolCalls = append(d.toolCalls, toolCall{kind: "retry-reply", arg: arg})
	case "reply-tool", "noreply-tool", "send-tool", "context-tool", "ask-tool", "retry-tool", "call-tool":
		d.toolCalls = append(d.toolCalls, toolCall{kind: strings.TrimSuffix(strings.ToLower(name), "-tool"), arg: arg})
	default:
		return false
	}
	return true
}

// seconds parses a directive's duration argument; missing or invalid means one second.
func seconds(arg string) time.Duration {
	secs := 1.0
	if arg != "" {
		v, err := strconv.ParseFloat(arg, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			v = 1.0
		}
		secs = v
	}
	return time.Duration(secs * float64(time.Second))
}

// maxGrow bounds [[grow N]] so a typo cannot take the machine's memory (16 GiB).
const maxGrow = 16 << 10

// mebibytes parses [[grow N]]'s argument: a whole number of MiB, 1 when missing or invalid.
func mebibytes(arg string) int {
	n, err := strconv.Atoi(strings.TrimSpace(arg))
	if err != nil || n < 1 {
		return 1
	}
	return min(n, maxGrow)
}

// parseDirectives collects every known directive in text.
func parseDirectives(text string) directives {
	var d directives
	for _, m := range directivePattern.FindAllStringSubmatch(text, -1) {
		d.apply(m[1], strings.TrimSpace(m[2]))
	}
	return d
}

// stripDirectives removes known directive tokens, keeping unknown ones.
func stripDirectives(text string) string {
	return directivePattern.ReplaceAllStringFunc(text, func(tok string) string {
		m := directivePattern.FindStringSubmatch(tok)
		var scratch directives
		if scratch.apply(m[1], strings.TrimSpace(m[2])) {
			return ""
		}
		return tok
	})
}

// merge overlays prompt directives on the --directives defaults: flags OR
// together, and a value given in the prompt wins over the default.
func (d directives) merge(o directives) directives {
	d.echo = d.echo || o.echo
	d.crash = d.crash || o.crash
	d.silent = d.silent || o.silent
	d.thoughts = d.thoughts || o.thoughts
	d.tools = d.tools || o.tools
	d.usage = d.usage || o.usage
	d.fail = d.fail || o.fail
	d.count = d.count || o.count
	d.roster = d.roster || o.roster
	d.garbage = d.garbage || o.garbage
	d.grandchild = d.grandchild || o.grandchild
	if o.slow > 0 {
		d.slow = o.slow
	}
	if o.stubborn > 0 {
		d.stubborn = o.stubborn
	}
	if o.permission != "" {
		d.permission = o.permission
	}
	d.env = append(d.env, o.env...)
	d.toolCalls = append(d.toolCalls, o.toolCalls...)
	d.saveMCP = d.saveMCP || o.saveMCP
	d.grow += o.grow
	d.wedge = d.wedge || o.wedge
	d.wedgeOnce = d.wedgeOnce || o.wedgeOnce
	return d
}

// promptBody returns what the turn is "about": the body of the last Jam
// envelope ("[message ...]" ... "[end message]") when present, otherwise
// the whole text. Directives are removed and the result trimmed. An
// unterminated final envelope runs to the end of the text.
func promptBody(text string) string {
	var (
		last, cur      []string
		found, inBlock bool
	)
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, "\r")
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "[message "):
			inBlock, cur = true, nil
		case inBlock && trimmed == "[end message]":
			inBlock, found, last = false, true, cur
		case inBlock:
			cur = append(cur, line)
		}
	}
	if inBlock {
		found, last = true, cur
	}
	if found {
		text = strings.Join(last, "\n")
	}
	return strings.TrimSpace(stripDirectives(text))
}

// turnOutcome is what a scripted turn produced.
type turnOutcome struct {
	reply string
	stop  acp.StopReason
	usage *acp.Usage
}

var cancelled = turnOutcome{stop: acp.StopReasonCancelled}

// runTurn plays the behaviours selected by d in a fixed order: grow, wedge, slow, stubborn, garbage,
// thoughts, tools, crash, fail, permission, grandchild, count, roster, env, reply, usage.
// priorTurns is the number of turns persisted before this one ([[count]]); room is the
// room line the client last gave this session ([[roster]]).
func (a *agent) runTurn(ctx context.Context, sid acp.SessionId, d directives, prompt, body string, priorTurns int, room string) (turnOutcome, error) {
	send := func(u acp.SessionUpdate) error {
		return a.peer().SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: u})
	}
	// Any failure after cancellation is the cancellation, not an error.
	failed := func(err error) (turnOutcome, error) {
		if ctx.Err() != nil {
			return cancelled, nil
		}
		return turnOutcome{}, err
	}

	if d.grow > 0 {
		growBallast(d.grow)
	}
	if d.wedgeOnce && a.firstWedge() {
		d.wedge = true
	}
	if d.wedge {
		// A hung turn: nothing on the stream until the client's session/cancel ends it.
		<-ctx.Done()
		return cancelled, nil
	}
	if d.slow > 0 {
		if err := sleepCtx(ctx, d.slow); err != nil {
			return cancelled, nil
		}
	}
	if d.stubborn > 0 {
		// An agent that ignores session/cancel: it keeps working and streams text into the
		// session after the client gave up on the turn. The thought first tells a test the
		// prompt arrived, so its cancel cannot beat the prompt to the agent.
		_ = a.peer().SessionUpdate(context.Background(), acp.SessionNotification{SessionId: sid,
			Update: acp.UpdateAgentThoughtText("ignoring any session/cancel")})
		time.Sleep(d.stubborn)
		_ = a.peer().SessionUpdate(context.Background(), acp.SessionNotification{SessionId: sid,
			Update: acp.UpdateAgentMessageText("late text from an abandoned turn")})
	}
	if d.garbage {
		if err := a.writeGarbage(); err != nil {
			return failed(err)
		}
	}
	if d.thoughts {
		if err := send(acp.UpdateAgentThoughtText("thinking about it")); err != nil {
			return failed(err)
		}
	}
	if d.tools {
		if err := send(acp.StartToolCall("tool_1", "Reading files",
			acp.WithStartKind(acp.ToolKindRead), acp.WithStartStatus(acp.ToolCallStatusPending))); err != nil {
			return failed(err)
		}
		if err := send(acp.UpdateToolCall("tool_1", acp.WithUpdateStatus(acp.ToolCallStatusCompleted))); err != nil {
			return failed(err)
		}
	}
	if d.crash {
		// Simulates an agent dying mid-turn with output already streamed.
		_ = send(acp.UpdateAgentMessageText("about to crash"))
		a.log.Warn("crashing on purpose", "session", sid)
		a.exit(3)
		return turnOutcome{}, fmt.Errorf("crash requested") // only reached when exit is stubbed
	}
	if d.fail {
		return turnOutcome{}, acp.NewInternalError(map[string]any{"error": "scripted failure ([[fail]])"})
	}

	var parts []string
	if d.grow > 0 {
		parts = append(parts, fmt.Sprintf("holding %d MiB", ballastMiB()))
	}
	if d.permission != "" {
		granted, ok, err := a.askPermission(ctx, sid, acp.ToolKind(d.permission))
		if err != nil {
			return failed(err)
		}
		if !ok {
			return cancelled, nil
		}
		if granted {
			parts = append(parts, "permission granted")
		} else {
			parts = append(parts, "permission denied")
		}
	}
	if d.grandchild {
		pid, err := spawnSleeper()
		if err != nil {
			return turnOutcome{}, acp.NewInternalError(map[string]any{"error": "spawn grandchild: " + err.Error()})
		}
		parts = append(parts, fmt.Sprintf("grandchild %d", pid))
	}
	settled := false
	if d.saveMCP {
		if err := a.saveMCPServers(sid); err != nil {
			return failed(err)
		}
		parts = append(parts, "saved MCP servers")
	}
	if len(d.toolCalls) > 0 {
		said, done, err := a.runTools(ctx, a.mcpServers(sid), d.toolCalls, prompt, body)
		if err != nil {
			return failed(err)
		}
		settled = done
		parts = append(parts, said...)
	}
	if d.count {
		parts = append(parts, fmt.Sprintf("turns remembered: %d", priorTurns))
	}
	if d.roster {
		if room == "" {
			room = "(none)"
		}
		parts = append(parts, "roster: "+room)
		if change := membershipChange(prompt); change != "" {
			parts = append(parts, "membership: "+change)
		}
	}
	for _, name := range d.env {
		v, ok := os.LookupEnv(name)
		if !ok {
			v = "(unset)"
		}
		parts = append(parts, fmt.Sprintf("env %s=%s", name, v))
	}
	if d.echo || len(parts) == 0 {
		parts = append(parts, "echo: "+body)
	}
	reply := strings.Join(parts, "\n")

	if d.silent || settled {
		// A message the agent settled with a tool needs no final text.
		reply = ""
	} else {
		// Two chunks so clients exercise their streaming/accumulation path.
		r := []rune(reply)
		for _, chunk := range []string{string(r[:len(r)/2]), string(r[len(r)/2:])} {
			if chunk == "" {
				continue
			}
			if err := send(acp.UpdateAgentMessageText(chunk)); err != nil {
				return failed(err)
			}
		}
	}

	out := turnOutcome{reply: reply, stop: acp.StopReasonEndTurn}
	if d.usage {
		if err := send(acp.SessionUpdate{UsageUpdate: &acp.SessionUsageUpdate{Used: 1234, Size: 200000}}); err != nil {
			return failed(err)
		}
		out.usage = &acp.Usage{InputTokens: 100, OutputTokens: 20, TotalTokens: 120}
	}
	if ctx.Err() != nil {
		return cancelled, nil
	}
	return out, nil
}

// askPermission announces tool call perm_1 and asks the client about it.
// ok=false means the request was cancelled (turn ends with "cancelled").
func (a *agent) askPermission(ctx context.Context, sid acp.SessionId, kind acp.ToolKind) (granted, ok bool, err error) {
	title := fmt.Sprintf("Scripted %s action", kind)
	start := acp.StartToolCall("perm_1", title, acp.WithStartKind(kind), acp.WithStartStatus(acp.ToolCallStatusPending))
	if err := a.peer().SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: start}); err != nil {
		return false, false, err
	}
	resp, err := a.peer().RequestPermission(ctx, acp.RequestPermissionRequest{
		SessionId: sid,
		ToolCall: acp.ToolCallUpdate{
			ToolCallId: "perm_1",
			Title:      acp.Ptr(title),
			Kind:       acp.Ptr(kind),
			Status:     acp.Ptr(acp.ToolCallStatusPending),
		},
		Options: []acp.PermissionOption{
			{OptionId: "allow", Name: "Allow", Kind: acp.PermissionOptionKindAllowOnce},
			{OptionId: "allow-always", Name: "Always allow", Kind: acp.PermissionOptionKindAllowAlways},
			{OptionId: "reject", Name: "Reject", Kind: acp.PermissionOptionKindRejectOnce},
		},
	})
	if err != nil {
		return false, false, err
	}
	if resp.Outcome.Cancelled != nil {
		return false, false, nil
	}
	if resp.Outcome.Selected == nil {
		return false, false, acp.NewInvalidParams(map[string]any{"error": "permission outcome has neither cancelled nor selected"})
	}
	switch id := string(resp.Outcome.Selected.OptionId); id {
	case "allow", "allow-always":
		granted = true
	case "reject":
	default:
		return false, false, acp.NewInvalidParams(map[string]any{"error": "unknown permission option " + strconv.Quote(id)})
	}
	status := acp.ToolCallStatusFailed
	if granted {
		status = acp.ToolCallStatusCompleted
	}
	upd := acp.UpdateToolCall("perm_1", acp.WithUpdateStatus(status))
	if err := a.peer().SessionUpdate(ctx, acp.SessionNotification{SessionId: sid, Update: upd}); err != nil {
		return false, false, err
	}
	return granted, true, nil
}

// garbageBlobSize is larger than common line limits (the Go SDK's is 10 MiB)
// so clients prove they survive oversize lines.
const garbageBlobSize = 20 << 20

// writeGarbage emits lines a robust client must tolerate: invalid JSON, a
// request for a method it does not know, and a 20 MiB notification.
func (a *agent) writeGarbage() error {
	var big bytes.Buffer
	big.Grow(garbageBlobSize + 128)
	big.WriteString(`{"jsonrpc":"2.0","method":"jam/garbage","params":{"blob":"`)
	big.Write(bytes.Repeat([]byte{'x'}, garbageBlobSize))
	big.WriteString("\"}}\n")
	for _, line := range [][]byte{
		[]byte("{not json\n"),
		[]byte(`{"jsonrpc":"2.0","id":"garbage-1","method":"jam/unknown","params":{}}` + "\n"),
		big.Bytes(),
	} {
		if err := a.out.writeRaw(line); err != nil {
			return err
		}
	}
	return nil
}

// ballast is the memory [[grow N]] took; it is kept (and so resident) for the life of the
// process, for tests of a memory watchdog.
var ballast struct {
	mu   sync.Mutex
	held [][]byte
}

// growBallast allocates n MiB and writes every page of it, so it is resident, not just
// reserved.
func growBallast(n int) {
	const page = 4096
	ballast.mu.Lock()
	defer ballast.mu.Unlock()
	for range n {
		b := make([]byte, 1<<20)
		for i := 0; i < len(b); i += page {
			b[i] = 1
		}
		ballast.held = append(ballast.held, b)
	}
}

// ballastMiB is how much [[grow]] holds.
func ballastMiB() int {
	ballast.mu.Lock()
	defer ballast.mu.Unlock()
	return len(ballast.held)
}

// sleepCtx waits d in small steps so a cancel ends the wait promptly.
func sleepCtx(ctx context.Context, d time.Duration) error {
	const step = 20 * time.Millisecond
	deadline := time.Now().Add(d)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return nil
		}
		t := time.NewTimer(min(left, step))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// roomLinePrefix starts the line of the room section Jam's preamble gives ("You are NAME,
// an agent in the room ... Participants: ...").
const roomLinePrefix = "You are "

// roomLine is the room line of a prompt ("" when it has none).
func roomLine(prompt string) string {
	for _, line := range strings.Split(prompt, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), roomLinePrefix) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// membershipChange is what the prompt says changed in the room since the last turn.
func membershipChange(prompt string) string {
	const marker = "[room membership changed since your last turn]"
	for _, line := range strings.Split(prompt, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), marker); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

// firstWedge reports whether no process of this state directory wedged on [[wedge-once]]
// before, and marks that one has: a provider restarted after a wedge (the watchdog's
// recycle) answers the same message instead of hanging again.
func (a *agent) firstWedge() bool {
	if a.cfg.StateDir == "" {
		return true
	}
	f, err := os.OpenFile(filepath.Join(a.cfg.StateDir, "wedged-once"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return false // marked already (or unwritable: answer rather than hang)
	}
	_ = f.Close()
	return true
}
