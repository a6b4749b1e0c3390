package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"
)

// testClient is the client half: it records session updates and answers
// permission requests with a scripted choice.
type testClient struct {
	mu       sync.Mutex
	updates  []acp.SessionUpdate
	permReqs []acp.RequestPermissionRequest
	choose   func(acp.RequestPermissionRequest) acp.RequestPermissionOutcome
}

var _ acp.Client = (*testClient)(nil)

func (c *testClient) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.updates = append(c.updates, n.Update)
	return nil
}

func (c *testClient) RequestPermission(_ context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	c.mu.Lock()
	c.permReqs = append(c.permReqs, p)
	choose := c.choose
	c.mu.Unlock()
	if choose == nil {
		return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}, nil
	}
	return acp.RequestPermissionResponse{Outcome: choose(p)}, nil
}

// take returns and clears the recorded updates.
func (c *testClient) take() []acp.SessionUpdate {
	c.mu.Lock()
	defer c.mu.Unlock()
	u := c.updates
	c.updates = nil
	return u
}

func (c *testClient) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, acp.NewMethodNotFound(acp.ClientMethodFsReadTextFile)
}

func (c *testClient) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, acp.NewMethodNotFound(acp.ClientMethodFsWriteTextFile)
}

func (c *testClient) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalCreate)
}

func (c *testClient) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalKill)
}

func (c *testClient) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalOutput)
}

func (c *testClient) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalRelease)
}

func (c *testClient) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalWaitForExit)
}

// harness connects a client to an in-process agent over two io.Pipes.
type harness struct {
	client *testClient
	conn   *acp.ClientSideConnection
	stop   func()
}

func startAgent(t *testing.T, cfg config) *harness {
	t.Helper()
	c2aR, c2aW := io.Pipe()
	a2cR, a2cW := io.Pipe()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))

	ag := newAgent(cfg, &lockedWriter{w: a2cW}, logger)
	ag.exit = func(code int) { t.Errorf("agent tried to exit(%d) in-process", code) }
	asc := acp.NewAgentSideConnection(ag, ag.out, c2aR)
	asc.SetLogger(logger)
	ag.setConnection(asc)

	cl := &testClient{}
	csc := acp.NewClientSideConnection(cl, c2aW, a2cR)
	csc.SetLogger(logger)

	h := &harness{client: cl, conn: csc}
	h.stop = sync.OnceFunc(func() {
		_ = c2aW.Close() // agent sees EOF on "stdin"
		select {
		case <-asc.Done():
		case <-time.After(5 * time.Second):
			t.Error("agent connection did not finish after stdin closed")
		}
		_ = a2cW.Close()
	})
	t.Cleanup(h.stop)
	return h
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (h *harness) initialize(t *testing.T, ctx context.Context) acp.InitializeResponse {
	t.Helper()
	resp, err := h.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return resp
}

func (h *harness) newSession(t *testing.T, ctx context.Context) acp.SessionId {
	t.Helper()
	h.initialize(t, ctx)
	resp, err := h.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: t.TempDir(), McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatalf("session/new: %v", err)
	}
	return resp.SessionId
}

func (h *harness) prompt(ctx context.Context, sid acp.SessionId, text string) (acp.PromptResponse, error) {
	return h.conn.Prompt(ctx, acp.PromptRequest{SessionId: sid, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
}

// mustReply runs a turn that must end normally and returns the streamed reply.
func (h *harness) mustReply(t *testing.T, ctx context.Context, sid acp.SessionId, text string) string {
	t.Helper()
	resp, err := h.prompt(ctx, sid, text)
	if err != nil {
		t.Fatalf("prompt %q: %v", text, err)
	}
	if resp.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt %q: stopReason %q", text, resp.StopReason)
	}
	return agentText(h.client.take())
}

func agentChunks(us []acp.SessionUpdate) []string {
	var out []string
	for _, u := range us {
		if u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil {
			out = append(out, u.AgentMessageChunk.Content.Text.Text)
		}
	}
	return out
}

func agentText(us []acp.SessionUpdate) string { return strings.Join(agentChunks(us), "") }

func wantCode(t *testing.T, err error, code int, contains string) {
	t.Helper()
	var re *acp.RequestError
	if !errors.As(err, &re) {
		t.Fatalf("want RequestError %d, got %v", code, err)
	}
	if re.Code != code || !strings.Contains(re.Error(), contains) {
		t.Fatalf("want code %d containing %q, got %v", code, contains, re)
	}
}

func TestInitializeCapabilities(t *testing.T) {
	ctx := testCtx(t)
	resp := startAgent(t, config{StateDir: t.TempDir(), Name: "scripted"}).initialize(t, ctx)
	if resp.ProtocolVersion != 1 {
		t.Errorf("protocolVersion = %d", resp.ProtocolVersion)
	}
	caps := resp.AgentCapabilities
	if !caps.LoadSession || caps.SessionCapabilities.Close == nil || caps.SessionCapabilities.Resume == nil {
		t.Errorf("capabilities = %+v", caps)
	}
	if resp.AgentInfo == nil || resp.AgentInfo.Name != "scripted" || resp.AgentInfo.Version != "0.1.0" {
		t.Errorf("agentInfo = %+v", resp.AgentInfo)
	}

	h := startAgent(t, config{StateDir: t.TempDir(), NoLoad: true, NoResume: true})
	resp = h.initialize(t, ctx)
	caps = resp.AgentCapabilities
	if caps.LoadSession || caps.SessionCapabilities.Resume != nil || caps.SessionCapabilities.Close == nil {
		t.Errorf("--no-load --no-resume capabilities = %+v", caps)
	}
	_, err := h.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: "tas_000000000000000000000000", Cwd: "/", McpServers: []acp.McpServer{}})
	wantCode(t, err, -32601, "Method not found")
}

func TestPromptEchoEnvelopeAndPersistence(t *testing.T) {
	ctx := testCtx(t)
	state := t.TempDir()
	h := startAgent(t, config{StateDir: state})
	sid := h.newSession(t, ctx)

	if got := h.mustReply(t, ctx, sid, "  plain [[echo]] text  "); got != "echo: plain text" {
		t.Errorf("plain echo = %q", got)
	}

	envelope := "Context for the agent.\n" +
		"[message from=alice id=1]\nfirst message\n[end message]\n" +
		"[message from=bob id=2]\n  hello [[echo]] there\n  second line\n[end message]\n"
	resp, err := h.prompt(ctx, sid, envelope)
	if err != nil || resp.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("prompt: %v %v", resp, err)
	}
	chunks := agentChunks(h.client.take())
	want := "echo: hello there\n  second line"
	if len(chunks) != 2 || strings.Join(chunks, "") != want {
		t.Errorf("chunks = %q, want 2 chunks of %q", chunks, want)
	}

	// The session file is written atomically with private permissions.
	path := filepath.Join(state, "sessions", string(sid)+".json")
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("file mode = %v", info.Mode().Perm())
	}
	if dir, _ := os.Stat(filepath.Dir(path)); dir.Mode().Perm() != 0o700 {
		t.Errorf("dir mode = %v", dir.Mode().Perm())
	}
	var rec sessionRecord
	data, _ := os.ReadFile(path)
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.ID != string(sid) || len(rec.Turns) != 2 || rec.Turns[1].Prompt != "hello there\n  second line" || rec.Turns[1].Reply != want {
		t.Errorf("record = %+v", rec)
	}
}

func TestCountSurvivesRestartWithLoad(t *testing.T) {
	ctx := testCtx(t)
	state := t.TempDir()

	h := startAgent(t, config{StateDir: state})
	sid := h.newSession(t, ctx)
	if got := h.mustReply(t, ctx, sid, "[[count]] first"); got != "turns remembered: 0" {
		t.Fatalf("first count = %q", got)
	}
	if got := h.mustReply(t, ctx, sid, "second"); got != "echo: second" {
		t.Fatalf("second = %q", got)
	}
	h.stop()

	h2 := startAgent(t, config{StateDir: state})
	h2.initialize(t, ctx)
	// Strict: an unknown (not loaded) session cannot be prompted.
	_, err := h2.prompt(ctx, sid, "hi")
	wantCode(t, err, -32002, "session not found")

	if _, err := h2.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: sid, Cwd: "/", McpServers: []acp.McpServer{}}); err != nil {
		t.Fatalf("load: %v", err)
	}
	var replay []string
	for _, u := range h2.client.take() {
		switch {
		case u.UserMessageChunk != nil:
			replay = append(replay, "user:"+u.UserMessageChunk.Content.Text.Text)
		case u.AgentMessageChunk != nil:
			replay = append(replay, "agent:"+u.AgentMessageChunk.Content.Text.Text)
		}
	}
	wantReplay := []string{"user:first", "agent:turns remembered: 0", "user:second", "agent:echo: second"}
	if strings.Join(replay, "|") != strings.Join(wantReplay, "|") {
		t.Errorf("replay = %q", replay)
	}
	if got := h2.mustReply(t, ctx, sid, "[[count]]"); got != "turns remembered: 2" {
		t.Errorf("count after load = %q", got)
	}

	// Close forgets the session; resume brings it back without replay.
	if _, err := h2.conn.CloseSession(ctx, acp.CloseSessionRequest{SessionId: sid}); err != nil {
		t.Fatalf("close: %v", err)
	}
	_, err = h2.prompt(ctx, sid, "hi")
	wantCode(t, err, -32002, "session not found")
	if _, err := h2.conn.ResumeSession(ctx, acp.ResumeSessionRequest{SessionId: sid, Cwd: "/"}); err != nil {
		t.Fatalf("resume: %v", err)
	}
	if n := len(h2.client.take()); n != 0 {
		t.Errorf("resume replayed %d updates", n)
	}
	if got := h2.mustReply(t, ctx, sid, "[[count]]"); got != "turns remembered: 3" {
		t.Errorf("count after resume = %q", got)
	}
}

func TestSessionIDValidation(t *testing.T) {
	ctx := testCtx(t)
	h := startAgent(t, config{StateDir: t.TempDir()})
	h.initialize(t, ctx)
	_, err := h.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: "../../etc/passwd", Cwd: "/", McpServers: []acp.McpServer{}})
	wantCode(t, err, -32602, "invalid session id")
	_, err = h.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: "tas_0123456789abcdef01234567", Cwd: "/", McpServers: []acp.McpServer{}})
	wantCode(t, err, -32002, "session not found")
}
