package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
)

// fakeBackend records what the tools asked of Jam; current is the live generation.
type fakeBackend struct {
	mu      sync.Mutex
	current int64
	sent    []string
	asked   []QuestionRequest
	answer  QuestionAnswer
	askErr  error
	sendErr error         // the next send fails with it (once)
	gate    chan struct{} // when set, a send waits for it
	repos   []domain.RepoRequest
}

func (b *fakeBackend) Current(_ context.Context, id Identity) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if id.Generation != b.current {
		return ErrRetired
	}
	return nil
}

func (b *fakeBackend) SendMessage(_ context.Context, _ Identity, text string) (domain.Message, error) {
	b.mu.Lock()
	gate := b.gate
	b.mu.Unlock()
	if gate != nil {
		<-gate
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.sendErr; err != nil {
		b.sendErr = nil
		return domain.Message{}, err
	}
	b.sent = append(b.sent, text)
	return domain.Message{ID: uuid.New(), Text: text}, nil
}

func (b *fakeBackend) RoomContext(_ context.Context, id Identity, limit int) (RoomContext, error) {
	return RoomContext{Room: "lab", You: "demo", Participants: []ContextParticipant{{ID: id.AgentID, Kind: domain.ParticipantAgent, Name: "demo", You: true}}}, nil
}

func (b *fakeBackend) Ask(_ context.Context, _ Identity, q QuestionRequest) (QuestionAnswer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asked = append(b.asked, q)
	return b.answer, b.askErr
}

func (b *fakeBackend) Repository(_ context.Context, _ Identity, action domain.WorkspaceAction, req domain.RepoRequest) (domain.RepoResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.repos = append(b.repos, req)
	return domain.RepoResult{Dir: req.Dir, Branch: string(action)}, nil
}

// stagerFunc stages through a real settlement.
type stagerOf struct{ s *provider.Settlement }

func (st stagerOf) StageDisposition(d provider.Disposition) error {
	_, err := st.s.Stage(d, nil)
	return err
}

func newSession(t *testing.T, gen int64, scopes ...domain.ToolScope) (*Session, *fakeBackend, provider.Message) {
	t.Helper()
	msg := provider.Message{ID: uuid.New(), AuthorKind: domain.ParticipantHuman, AuthorName: "ada", Text: "hi"}
	be := &fakeBackend{current: gen}
	if len(scopes) == 0 {
		scopes = RuntimeScopes(false)
	}
	s := Builtin().Session(Identity{AgentID: uuid.New(), RoomID: uuid.New(), RuntimeSession: uuid.New(), Generation: gen}, be, scopes...)
	s.Bind(stagerOf{provider.NewSettlement([]provider.Message{msg}, provider.SettlementOptions{DispositionCapable: true, ExplicitDisposition: true})})
	return s, be, msg
}

func args(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRegistryRefusesDuplicateNamesBadSchemasAndUnknownScopes(t *testing.T) {
	t.Parallel()
	ok := Tool{Name: "a", InputSchema: json.RawMessage(`{"type":"object"}`), Handle: func(context.Context, Call) (string, error) { return "", nil }}
	for name, tools := range map[string][]Tool{
		"duplicate": {ok, ok},
		"schema":    {{Name: "b", InputSchema: json.RawMessage(`{"type":"string"}`), Handle: ok.Handle}},
		"name":      {{Name: "Bad-Name", InputSchema: ok.InputSchema, Handle: ok.Handle}},
		"scope":     {{Name: "c", InputSchema: ok.InputSchema, Handle: ok.Handle, Scopes: []domain.ToolScope{"root"}}},
		"handler":   {{Name: "d", InputSchema: ok.InputSchema}},
	} {
		if _, err := New(tools...); err == nil {
			t.Errorf("%s: registry accepted", name)
		}
	}
	if got := len(Builtin().Tools()); got != 11 {
		t.Fatalf("built-in tools = %d, want 11", got)
	}
}

func TestASessionOffersOnlyTheToolsItsScopesAllow(t *testing.T) {
	t.Parallel()
	s, _, msg := newSession(t, 1, domain.ScopeSettle)
	var names []string
	for _, sp := range s.Specs() {
		names = append(names, sp.Name)
	}
	if strings.Join(names, ",") != domain.ToolReplyToMessage+","+domain.ToolNoReply {
		t.Fatalf("specs = %v", names)
	}
	res := s.Call(context.Background(), "", domain.ToolSendMessage, args(t, map[string]string{"text": "hello"}))
	if !res.IsError || !strings.Contains(res.Text, "Unknown tool") {
		t.Fatalf("out-of-scope call = %+v", res)
	}
	res = s.Call(context.Background(), "", domain.ToolReplyToMessage, args(t, map[string]string{"message_id": msg.ID.String(), "text": "yes"}))
	if res.IsError {
		t.Fatalf("reply = %+v", res)
	}
}

func TestARetriedCallIDReturnsTheFirstResult(t *testing.T) {
	t.Parallel()
	s, be, msg := newSession(t, 3)
	ctx := context.Background()
	first := s.Call(ctx, "call-1", domain.ToolSendMessage, json.RawMessage(`{"text": "progress"}`))
	again := s.Call(ctx, "call-1", domain.ToolSendMessage, json.RawMessage(`{"text":"progress"}`))
	if first != again || first.IsError {
		t.Fatalf("retry = %+v, first = %+v", again, first)
	}
	if len(be.sent) != 1 {
		t.Fatalf("a retried call posted %d messages", len(be.sent))
	}
	other := s.Call(ctx, "call-1", domain.ToolSendMessage, json.RawMessage(`{"text":"else"}`))
	if !other.IsError {
		t.Fatalf("a reused call id with other arguments ran: %+v", other)
	}
	// A reply retried under its id stays one staged disposition; a conflicting one is refused.
	reply := args(t, map[string]string{"message_id": msg.ID.String(), "text": "yes"})
	if r := s.Call(ctx, "r1", domain.ToolReplyToMessage, reply); r.IsError {
		t.Fatal(r.Text)
	}
	if r := s.Call(ctx, "r1", domain.ToolReplyToMessage, reply); r.IsError {
		t.Fatal(r.Text)
	}
	conflict := s.Call(ctx, "r2", domain.ToolNoReply, args(t, map[string]string{"message_id": msg.ID.String()}))
	if !conflict.IsError {
		t.Fatalf("a conflicting disposition was staged: %+v", conflict)
	}
}

func TestARetryWhileTheFirstCallRunsWaitsForItsAnswer(t *testing.T) {
	t.Parallel()
	s, be, _ := newSession(t, 1)
	be.gate = make(chan struct{})
	call := json.RawMessage(`{"text":"once"}`)
	results := make(chan provider.ToolResult, 2)
	for range 2 {
		go func() { results <- s.Call(context.Background(), "same", domain.ToolSendMessage, call) }()
	}
	close(be.gate)
	a, b := <-results, <-results
	if a != b || a.IsError {
		t.Fatalf("concurrent calls answered %+v and %+v", a, b)
	}
	if len(be.sent) != 1 {
		t.Fatalf("one call id posted %d messages", len(be.sent))
	}
}

func TestACallThatFailedPassinglyRunsAgainOnRetry(t *testing.T) {
	t.Parallel()
	s, be, _ := newSession(t, 1)
	be.sendErr = errors.New("store unreachable")
	call := json.RawMessage(`{"text":"later"}`)
	first := s.Call(context.Background(), "c", domain.ToolSendMessage, call)
	if !first.IsError || strings.Contains(first.Text, "unreachable") {
		t.Fatalf("a store failure answered %+v (internal text must not leak)", first)
	}
	if again := s.Call(context.Background(), "c", domain.ToolSendMessage, call); again.IsError {
		t.Fatalf("the retry was not run again: %+v", again)
	}
	if len(be.sent) != 1 {
		t.Fatalf("sent = %v", be.sent)
	}
}

func TestToolsRefuseARetiredGeneration(t *testing.T) {
	t.Parallel()
	s, be, _ := newSession(t, 2)
	be.mu.Lock()
	be.current = 3
	be.mu.Unlock()
	res := s.Call(context.Background(), "", domain.ToolSendMessage, json.RawMessage(`{"text":"late"}`))
	if !res.IsError || !strings.Contains(res.Text, "retired") || len(be.sent) != 0 {
		t.Fatalf("retired call = %+v, sent %v", res, be.sent)
	}
}

func TestAskQuestionAnswersOrProceedsWithoutAnAnswer(t *testing.T) {
	t.Parallel()
	s, be, _ := newSession(t, 1)
	ctx := context.Background()
	be.answer = QuestionAnswer{State: domain.QuestionAnswered, Text: "blue", By: "ada"}
	res := s.Call(ctx, "", domain.ToolAskQuestion, json.RawMessage(`{"question":"which colour?","timeout_secs":5}`))
	if res.IsError || !strings.Contains(res.Text, "blue") || *be.asked[0].TimeoutSecs != 5 {
		t.Fatalf("answered = %+v", res)
	}
	be.answer = QuestionAnswer{State: domain.QuestionExpired}
	res = s.Call(ctx, "", domain.ToolAskQuestion, json.RawMessage(`{"question":"which colour?"}`))
	if res.IsError || !strings.Contains(res.Text, "No answer") {
		t.Fatalf("expired = %+v", res)
	}
	be.askErr = &ErrNoRecipient{Reason: "the room has several humans; name one with recipient_id."}
	res = s.Call(ctx, "", domain.ToolAskQuestion, json.RawMessage(`{"question":"which colour?"}`))
	if !res.IsError || !strings.Contains(res.Text, "several humans") {
		t.Fatalf("no recipient = %+v", res)
	}
	be.askErr = errors.New("pq: connection refused")
	res = s.Call(ctx, "", domain.ToolAskQuestion, json.RawMessage(`{"question":"again?"}`))
	if !res.IsError || strings.Contains(res.Text, "pq") {
		t.Fatalf("internal error leaked: %+v", res)
	}
	for _, bad := range []string{`{"question":""}`, `{"question":"x","recipient_id":"bob"}`, `{"question":"x","timeout_secs":-1}`} {
		if res := s.Call(ctx, "", domain.ToolAskQuestion, json.RawMessage(bad)); !res.IsError {
			t.Errorf("%s accepted", bad)
		}
	}
}

// mcpClient connects to srv with token the way a provider does.
func mcpClient(t *testing.T, url, token string) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	return c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}}}, nil)
}

func TestMCPServesTheRegistryToTheTokenHolderOnly(t *testing.T) {
	t.Parallel()
	srv := NewMCPServer(nil)
	hs := httptest.NewServer(srv)
	defer hs.Close()
	s, be, msg := newSession(t, 1)
	tok, err := srv.Issue(s)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcpClient(t, hs.URL+MCPPath, tok)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.Close() }()
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(list.Tools) != 5 {
		t.Fatalf("tools = %v, %v", list, err)
	}
	call := func(cs *mcp.ClientSession, id string) (*mcp.CallToolResult, error) {
		return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: domain.ToolReplyToMessage, Meta: mcp.Meta{"jam/call_id": id},
			Arguments: map[string]string{"message_id": msg.ID.String(), "text": "over MCP"}})
	}
	res, err := call(cs, "c1")
	if err != nil || res.IsError {
		t.Fatalf("reply over MCP = %+v, %v", res, err)
	}
	if res, err := call(cs, "c1"); err != nil || res.IsError {
		t.Fatalf("retried call = %+v, %v", res, err)
	}

	// Unknown token: refused before MCP.
	r, err := http.Post(hs.URL+MCPPath, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, r.Body)
	_ = r.Body.Close()
	if r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: %d", r.StatusCode)
	}
	// A newer generation's token retires the old one.
	s2 := Builtin().Session(Identity{AgentID: s.id.AgentID, RoomID: s.id.RoomID, RuntimeSession: s.id.RuntimeSession, Generation: 2}, be, AllScopes()...)
	tok2, err := srv.Issue(s2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call(cs, "c2"); err == nil {
		t.Fatal("a retired generation's token still calls tools")
	}
	if srv.Live() != 1 {
		t.Fatalf("live tokens = %d", srv.Live())
	}
	// A late retry of the older generation's prepare does not unseat its successor.
	if _, err := srv.Issue(s); !errors.Is(err, ErrRetired) {
		t.Fatalf("re-issuing a retired generation = %v", err)
	}
	srv.Revoke(s.id.RuntimeSession, 1) // the old generation's teardown leaves the new one
	if srv.Live() != 1 {
		t.Fatal("revoking a retired generation ended its successor's token")
	}
	srv.Revoke(s.id.RuntimeSession, 2)
	if _, err := mcpClient(t, hs.URL+MCPPath, tok2); err == nil {
		t.Fatal("a revoked token connects")
	}
}

func TestTheStdioBridgeForwardsToTheRuntimesEndpoint(t *testing.T) {
	t.Parallel()
	srv := NewMCPServer(nil)
	hs := httptest.NewServer(srv)
	defer hs.Close()
	s, be, _ := newSession(t, 1)
	tok, err := srv.Issue(s)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The bridge's stdio, as the provider would hold it.
	toBridge, fromClient := io.Pipe()
	fromBridge, toClient := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Bridge(ctx, hs.URL+MCPPath, tok, toBridge, toClient) }()
	c := mcp.NewClient(&mcp.Implementation{Name: "provider", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: fromBridge, Writer: fromClient}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: domain.ToolSendMessage, Arguments: map[string]string{"text": "through the bridge"}})
	if err != nil || res.IsError {
		t.Fatalf("bridged call = %+v, %v", res, err)
	}
	be.mu.Lock()
	sent := append([]string(nil), be.sent...)
	be.mu.Unlock()
	if len(sent) != 1 || sent[0] != "through the bridge" {
		t.Fatalf("sent = %v", sent)
	}
	_ = cs.Close()
	cancel()
	<-done
}

// The repository tools are offered only with the workspace scope (a sandboxed runtime);
// their arguments are validated before the backend is asked, and no workspace, author or
// other scope can be named.
func TestRepositoryToolsNeedTheWorkspaceScopeAndValidateBeforeRunning(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	host, _, _ := newSession(t, 1, RuntimeScopes(false)...)
	if host.Has(domain.ToolRepoClone) {
		t.Fatal("a host-native runtime is offered the repository tools")
	}
	if res := host.Call(ctx, "c0", domain.ToolRepoClone, json.RawMessage(`{"url":"https://github.com/o/r"}`)); !res.IsError {
		t.Fatalf("an ungranted repository tool ran: %+v", res)
	}
	s, be, _ := newSession(t, 1, RuntimeScopes(true)...)
	for i, bad := range []string{`{"url":"ext::sh -c id"}`, `{"url":"-uhack"}`, `{"url":"/etc"}`, `{"url":"https://github.com/o/r","dir":"../x"}`,
		`{"url":"https://github.com/o/r","workspace":"other"}`, `{"url":"https://github.com/o/r","author_name":"someone else"}`} {
		if res := s.Call(ctx, fmt.Sprintf("bad-%d", i), domain.ToolRepoClone, json.RawMessage(bad)); !res.IsError {
			t.Fatalf("%s: accepted: %+v", bad, res)
		}
	}
	if res := s.Call(ctx, "b1", domain.ToolRepoBranch, json.RawMessage(`{"dir":"r","branch":"-d"}`)); !res.IsError {
		t.Fatalf("a branch named -d: %+v", res)
	}
	if len(be.repos) != 0 {
		t.Fatalf("refused calls reached the backend: %+v", be.repos)
	}
	res := s.Call(ctx, "ok", domain.ToolRepoClone, json.RawMessage(`{"url":"https://github.com/o/widget.git"}`))
	if res.IsError || !strings.Contains(res.Text, `"dir":"widget"`) || len(be.repos) != 1 || be.repos[0].URL != "https://github.com/o/widget.git" {
		t.Fatalf("clone: %+v %+v", res, be.repos)
	}
}
