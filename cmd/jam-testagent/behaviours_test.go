package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"
)

// Tests of the scripted behaviours selected by directives.

func TestSlowThenCancel(t *testing.T) {
	ctx := testCtx(t)
	h := startAgent(t, config{StateDir: t.TempDir()})
	sid := h.newSession(t, ctx)

	type result struct {
		resp acp.PromptResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := h.prompt(ctx, sid, "[[slow 5]] never")
		done <- result{resp, err}
	}()
	time.Sleep(200 * time.Millisecond) // let the turn start waiting
	start := time.Now()
	if err := h.conn.Cancel(ctx, acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || r.resp.StopReason != acp.StopReasonCancelled {
			t.Fatalf("cancelled turn = %+v, %v", r.resp, r.err)
		}
		// The contract is < 200 ms; allow slack for loaded CI machines.
		d := time.Since(start)
		t.Logf("cancel latency %v", d)
		if d > time.Second {
			t.Errorf("cancel took %v", d)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("prompt did not end after session/cancel")
	}
	if chunks := agentChunks(h.client.take()); len(chunks) != 0 {
		t.Errorf("cancelled turn replied %q", chunks)
	}
	if got := h.mustReply(t, ctx, sid, "[[count]]"); got != "turns remembered: 0" {
		t.Errorf("cancelled turn was persisted: %q", got)
	}
}

func TestSilentAndFail(t *testing.T) {
	ctx := testCtx(t)
	h := startAgent(t, config{StateDir: t.TempDir()})
	sid := h.newSession(t, ctx)

	resp, err := h.prompt(ctx, sid, "[[silent]] shh")
	if err != nil || resp.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("silent: %+v %v", resp, err)
	}
	if n := len(agentChunks(h.client.take())); n != 0 {
		t.Errorf("silent sent %d chunks", n)
	}

	_, err = h.prompt(ctx, sid, "[[fail]] boom")
	wantCode(t, err, -32603, "scripted failure")
	if got := h.mustReply(t, ctx, sid, "[[count]]"); got != "turns remembered: 1" {
		t.Errorf("count after silent+fail = %q", got)
	}
}

func TestPermission(t *testing.T) {
	cases := []struct {
		name, text string
		choose     func(acp.RequestPermissionRequest) acp.RequestPermissionOutcome
		wantStop   acp.StopReason
		wantReply  string
		wantKind   acp.ToolKind
	}{
		{"allow", "[[permission]] do it", pick("allow"), acp.StopReasonEndTurn, "permission granted", acp.ToolKindEdit},
		{"allow-always", "[[permission execute]]", pick("allow-always"), acp.StopReasonEndTurn, "permission granted", acp.ToolKindExecute},
		{"reject", "[[permission]] do it", pick("reject"), acp.StopReasonEndTurn, "permission denied", acp.ToolKindEdit},
		{"cancelled", "[[permission]] do it", nil, acp.StopReasonCancelled, "", acp.ToolKindEdit},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			h := startAgent(t, config{StateDir: t.TempDir()})
			h.client.choose = tc.choose
			sid := h.newSession(t, ctx)
			resp, err := h.prompt(ctx, sid, tc.text)
			if err != nil || resp.StopReason != tc.wantStop {
				t.Fatalf("prompt: %+v %v", resp, err)
			}
			updates := h.client.take()
			if got := agentText(updates); got != tc.wantReply {
				t.Errorf("reply = %q, want %q", got, tc.wantReply)
			}
			if len(updates) == 0 || updates[0].ToolCall == nil || updates[0].ToolCall.ToolCallId != "perm_1" ||
				updates[0].ToolCall.Kind != tc.wantKind || updates[0].ToolCall.Status != acp.ToolCallStatusPending {
				t.Errorf("first update is not the pending perm_1 tool call: %+v", updates)
			}
			if len(h.client.permReqs) != 1 {
				t.Fatalf("permission requests = %d", len(h.client.permReqs))
			}
			var opts []string
			for _, o := range h.client.permReqs[0].Options {
				opts = append(opts, string(o.OptionId)+"="+string(o.Kind))
			}
			if strings.Join(opts, ",") != "allow=allow_once,allow-always=allow_always,reject=reject_once" {
				t.Errorf("options = %v", opts)
			}
		})
	}
}

func pick(id string) func(acp.RequestPermissionRequest) acp.RequestPermissionOutcome {
	return func(acp.RequestPermissionRequest) acp.RequestPermissionOutcome {
		return acp.NewRequestPermissionOutcomeSelected(acp.PermissionOptionId(id))
	}
}

func TestCombinedThoughtsToolsUsage(t *testing.T) {
	ctx := testCtx(t)
	h := startAgent(t, config{StateDir: t.TempDir(), Directives: "[[thoughts]]"})
	sid := h.newSession(t, ctx)
	resp, err := h.prompt(ctx, sid, "[[tools]] [[usage]] hi")
	if err != nil || resp.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt: %+v %v", resp, err)
	}
	if u := resp.Usage; u == nil || u.InputTokens != 100 || u.OutputTokens != 20 || u.TotalTokens != 120 || u.ThoughtTokens != nil {
		t.Errorf("usage = %+v", resp.Usage)
	}
	var kinds []string
	for _, u := range h.client.take() {
		switch {
		case u.AgentThoughtChunk != nil:
			kinds = append(kinds, "thought:"+u.AgentThoughtChunk.Content.Text.Text)
		case u.ToolCall != nil:
			kinds = append(kinds, "tool_call:"+string(u.ToolCall.ToolCallId)+":"+string(u.ToolCall.Kind))
		case u.ToolCallUpdate != nil:
			kinds = append(kinds, "tool_call_update:"+string(*u.ToolCallUpdate.Status))
		case u.AgentMessageChunk != nil:
			kinds = append(kinds, "chunk")
		case u.UsageUpdate != nil:
			kinds = append(kinds, "usage:"+strconv.Itoa(u.UsageUpdate.Used)+"/"+strconv.Itoa(u.UsageUpdate.Size))
		}
	}
	want := "thought:thinking about it|tool_call:tool_1:read|tool_call_update:completed|chunk|chunk|usage:1234/200000"
	if got := strings.Join(kinds, "|"); got != want {
		t.Errorf("updates = %s\nwant      %s", got, want)
	}
}

func TestGrandchildDirective(t *testing.T) {
	ctx := testCtx(t)
	h := startAgent(t, config{StateDir: t.TempDir()})
	sid := h.newSession(t, ctx)
	got := h.mustReply(t, ctx, sid, "[[grandchild]]")
	pid, err := strconv.Atoi(strings.TrimPrefix(got, "grandchild "))
	if err != nil {
		t.Fatalf("reply = %q", got)
	}
	p, _ := os.FindProcess(pid)
	if err := p.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("grandchild %d not running: %v", pid, err)
	}
	_ = p.Kill()
}

// TestGarbageRaw drives the agent with raw JSON lines because the SDK client
// itself cannot read a 20 MiB line; it checks that raw output never splits
// or interleaves with protocol messages.
func TestGarbageRaw(t *testing.T) {
	c2aR, c2aW := io.Pipe()
	a2cR, a2cW := io.Pipe()
	ag := newAgent(config{StateDir: t.TempDir()}, &lockedWriter{w: a2cW}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	asc := acp.NewAgentSideConnection(ag, ag.out, c2aR)
	asc.SetLogger(ag.log)
	ag.setConnection(asc)
	t.Cleanup(func() { _ = c2aW.Close(); <-asc.Done(); _ = a2cW.Close() })

	lines := make(chan []byte, 64)
	go func() {
		r := bufio.NewReader(a2cR)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				close(lines)
				return
			}
			lines <- line
		}
	}()
	next := func() []byte {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("agent output closed")
			}
			return l
		case <-time.After(10 * time.Second):
			t.Fatal("timed out waiting for agent output")
		}
		return nil
	}
	send := func(s string) {
		if _, err := io.WriteString(c2aW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`)
	next()
	send(`{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}`)
	var created struct {
		Result struct {
			SessionID string `json:"sessionId"`
		} `json:"result"`
	}
	if err := json.Unmarshal(next(), &created); err != nil {
		t.Fatal(err)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"` + created.Result.SessionID + `","prompt":[{"type":"text","text":"[[garbage]] still here"}]}}`)

	var sawBad, sawUnknown, sawBig bool
	var reply strings.Builder
	for {
		l := bytes.TrimSuffix(next(), []byte("\n"))
		switch {
		case string(l) == "{not json":
			sawBad = true
			continue
		case len(l) > garbageBlobSize:
			sawBig = json.Valid(l)
			continue
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Update struct {
					Content struct{ Text string } `json:"content"`
				} `json:"update"`
			} `json:"params"`
			Result struct {
				StopReason string `json:"stopReason"`
			} `json:"result"`
		}
		if err := json.Unmarshal(l, &msg); err != nil {
			t.Fatalf("interleaved or broken line (%d bytes): %v", len(l), err)
		}
		if msg.Method == "jam/unknown" {
			sawUnknown = true
			send(`{"jsonrpc":"2.0","id":"garbage-1","error":{"code":-32601,"message":"Method not found"}}`)
			continue
		}
		if msg.Method == "session/update" {
			reply.WriteString(msg.Params.Update.Content.Text)
			continue
		}
		if string(msg.ID) == "3" {
			if msg.Result.StopReason != "end_turn" {
				t.Errorf("stopReason = %q", msg.Result.StopReason)
			}
			break
		}
	}
	if !sawBad || !sawUnknown || !sawBig {
		t.Errorf("garbage lines seen: bad=%v unknown=%v big=%v", sawBad, sawUnknown, sawBig)
	}
	if reply.String() != "echo: still here" {
		t.Errorf("reply = %q", reply.String())
	}
}

func TestDirectiveParsing(t *testing.T) {
	d := parseDirectives("[[slow 0.25]] x [[PERMISSION execute]] [[bogus 1]] [[usage]]")
	if d.slow != 250*time.Millisecond || d.permission != "execute" || !d.usage || d.crash {
		t.Errorf("parsed = %+v", d)
	}
	if d := parseDirectives("[[permission]]"); d.permission != "edit" {
		t.Errorf("default permission kind = %q", d.permission)
	}
	if got := promptBody("a [[slow 1]] b [[bogus]]"); got != "a b [[bogus]]" {
		t.Errorf("body = %q", got)
	}
	merged := parseDirectives("[[slow 2]] [[thoughts]]").merge(parseDirectives("[[slow 0.5]]"))
	if merged.slow != 500*time.Millisecond || !merged.thoughts {
		t.Errorf("merged = %+v", merged)
	}
}

func TestDefaultStateDirStaysOutOfTheWorkspace(t *testing.T) {
	t.Setenv("JAM_TESTAGENT_STATE_DIR", "")
	t.Setenv("XDG_STATE_HOME", "/srv/state")
	if got := defaultStateDir(); got != "/srv/state/jam-testagent" {
		t.Fatalf("with XDG_STATE_HOME: %q", got)
	}
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "/home/ann")
	if got := defaultStateDir(); got != "/home/ann/.local/state/jam-testagent" {
		t.Fatalf("with HOME: %q", got)
	}
	t.Setenv("JAM_TESTAGENT_STATE_DIR", "/x")
	if got := defaultStateDir(); got != "/x" {
		t.Fatalf("explicit: %q", got)
	}
}
