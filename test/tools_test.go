package test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/fakesbx"
	"github.com/jam-dev/jam/internal/testsupport/realagent"
	"github.com/jam-dev/jam/internal/testsupport/stubmodel"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// agentPosts are the room's messages agent wrote that reply to nothing.
func agentPosts(t *testing.T, c *client.Client, room, agent uuid.UUID) []api.MessageBody {
	t.Helper()
	var out []api.MessageBody
	for _, m := range transcript(t, c, room) {
		if m.AuthorAgentID != nil && *m.AuthorAgentID == agent && m.ReplyTo == nil {
			out = append(out, m)
		}
	}
	return out
}

// savedMCP is what jam-testagent's [[save-mcp]] wrote for its session.
type savedMCP struct {
	Name    string            `json:"name"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	Command string            `json:"command"`
	Args    []string          `json:"args"`
}

func readSavedMCP(t *testing.T, stateDir, providerSession string) []savedMCP {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(stateDir, "mcp-"+providerSession+".json"))
	if err != nil {
		t.Fatalf("read the agent's MCP servers: %v", err)
	}
	var out []savedMCP
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// rawToolCall calls a tool on an MCP endpoint the way a client holding only the URL and the
// token would, returning the HTTP status.
func rawToolCall(t *testing.T, s savedMCP, tool string, args map[string]any) int {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args}})
	req, err := http.NewRequest(http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range s.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// An owned ACP agent (jam-testagent, told to call tools) acts through Jam's tool registry
// over MCP: a reply through jam_reply_to_message lands once, as the reply; jam_send_message
// posts a new message; a retried call id posts once and answers the first result again;
// jam_room_context reads the room. Its token stops working when its instance is retired.
func TestAnOwnedAgentActsThroughJamsToolsOverMCP(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	d := startDevEnv(t, filepath.Join(t.TempDir(), "jam-home"), ownedEnv(t, state))
	c, ctx := d.client, context.Background()
	var agent api.AgentBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "toolsmith", Kind: domain.AgentOwned}, &agent))
	room, session := roomWith(t, c, "lab", agent.ID)

	first := postText(t, c, room.ID, "[[reply-tool]] [[save-mcp]] hello")
	r := awaitReply(t, c, first, 30*time.Second)
	if r.Text != "echo: hello" || r.AuthorAgentID == nil || *r.AuthorAgentID != agent.ID {
		t.Fatalf("reply through the tool: %+v", r)
	}
	wait.Never(t, time.Second, func() bool { return len(repliesTo(t, c, first)) != 1 },
		"a second reply: a message settled by the tool gets no fallback reply")

	progress := postText(t, c, room.ID, "[[send-tool progress: half done]] report")
	awaitReply(t, c, progress, 30*time.Second)
	posts := agentPosts(t, c, room.ID, agent.ID)
	if len(posts) != 1 || posts[0].Text != "progress: half done" {
		t.Fatalf("jam_send_message posted %+v", posts)
	}

	retried := postText(t, c, room.ID, "[[retry-tool exactly once]] go")
	rr := awaitReply(t, c, retried, 30*time.Second)
	once := 0
	for _, p := range agentPosts(t, c, room.ID, agent.ID) {
		if p.Text == "exactly once" {
			once++
		}
	}
	first2, again, _ := strings.Cut(strings.TrimPrefix(rr.Text, "first: "), " | retry: ")
	if once != 1 || first2 == "" || first2 != again {
		t.Fatalf("a retried call id posted %d messages; answers %q", once, rr.Text)
	}

	ctxReply := awaitReply(t, c, postText(t, c, room.ID, "[[context-tool]] who is here?"), 30*time.Second)
	var rc struct {
		Room         string `json:"room"`
		You          string `json:"you"`
		Participants []struct {
			Kind domain.ParticipantKind `json:"kind"`
			Name string                 `json:"name"`
		} `json:"participants"`
		Messages []struct{ Text string } `json:"recent_messages"`
	}
	if err := json.Unmarshal([]byte(ctxReply.Text), &rc); err != nil {
		t.Fatalf("room context %q: %v", ctxReply.Text, err)
	}
	if rc.Room != "lab" || rc.You != "toolsmith" || len(rc.Participants) != 2 || len(rc.Messages) == 0 {
		t.Fatalf("room context %+v", rc)
	}

	// The instance's token: valid while it lives, refused once a restart retired it.
	s := getSession(t, c, session)
	saved := readSavedMCP(t, state, s.ProviderSessionID)
	if len(saved) != 1 || saved[0].Name != "jam" || saved[0].URL == "" {
		t.Fatalf("the agent was given MCP servers %+v", saved)
	}
	if code := rawToolCall(t, saved[0], domain.ToolRoomContext, map[string]any{}); code != http.StatusOK {
		t.Fatalf("a live instance's token: HTTP %d", code)
	}
	must(t, c.Do(ctx, http.MethodPost, "/v1/sessions/"+session.String()+"/restart", nil, nil))
	wait.Eventually(t, 30*time.Second, func() bool {
		return rawToolCall(t, saved[0], domain.ToolSendMessage, map[string]any{"text": "from a retired instance"}) == http.StatusUnauthorized
	}, "the retired instance's token to be refused")
	awaitReply(t, c, postText(t, c, room.ID, "[[reply-tool]] after the restart"), 30*time.Second)
	for _, p := range agentPosts(t, c, room.ID, agent.ID) {
		if p.Text == "from a retired instance" {
			t.Fatal("a retired instance's token posted a message")
		}
	}
}

// An agent whose MCP client takes only stdio servers is given `jam mcp`, the bridge to the
// same endpoint with the same token.
func TestAStdioOnlyAgentReachesJamsToolsThroughTheBridge(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	d := startDevEnv(t, filepath.Join(t.TempDir(), "jam-home"), ownedEnv(t, state))
	c, ctx := d.client, context.Background()
	tmpl := domain.TemplateConfig{Alias: "default", Transport: domain.TransportACP, Args: []string{"--no-http-mcp"}}
	var agent api.AgentBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "stdio", Kind: domain.AgentOwned, Template: &tmpl}, &agent))
	room, session := roomWith(t, c, "lab", agent.ID)
	m := postText(t, c, room.ID, "[[reply-tool through the bridge]] [[save-mcp]] hi")
	if r := awaitReply(t, c, m, 30*time.Second); r.Text != "through the bridge" {
		t.Fatalf("reply %+v", r)
	}
	saved := readSavedMCP(t, state, getSession(t, c, session).ProviderSessionID)
	if len(saved) != 1 || saved[0].URL != "" || filepath.Base(saved[0].Command) != "jam" || len(saved[0].Args) == 0 || saved[0].Args[0] != "mcp" {
		t.Fatalf("a stdio-only agent was given %+v", saved)
	}
	for _, a := range saved[0].Args {
		if strings.Contains(a, "Bearer") {
			t.Fatalf("the token is on the bridge's command line: %v", saved[0].Args)
		}
	}
}

// The real `opencode acp`, talking to the scripted model server, sees Jam's MCP server in
// its session, and the model's jam_reply_to_message call lands as the room reply.
func TestOpenCodeRepliesThroughJamsMCPTool(t *testing.T) {
	t.Parallel()
	realagent.Require(t, "opencode")
	model, err := stubmodel.Start(stubmodel.ReplyTool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = model.Close() })
	env, tmpl := opencodeSetup(t, model)
	d := startDevEnv(t, filepath.Join(t.TempDir(), "jam-home"), ownedEnv(t, t.TempDir(), env...))
	c, ctx := d.client, context.Background()
	var agent api.AgentBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "opencode", Kind: domain.AgentOwned, Template: &tmpl}, &agent))
	room, _ := roomWith(t, c, "lab", agent.ID)

	m := postText(t, c, room.ID, "what is the plan?")
	r := awaitReply(t, c, m, 3*time.Minute)
	if r.Text != "stub: what is the plan?" {
		t.Fatalf("reply %q", r.Text)
	}
	wait.Never(t, 2*time.Second, func() bool { return len(repliesTo(t, c, m)) != 1 },
		"a second reply beside the tool's")
	offered, called := false, false
	for _, req := range model.Requests() {
		offered = offered || req.Offers(domain.ToolReplyToMessage)
		for _, call := range req.ToolCalls {
			called = called || strings.Contains(call, m.ID.String())
		}
	}
	if !offered || !called {
		t.Fatalf("the model was offered Jam's reply tool: %v; called it: %v", offered, called)
	}
}

// A sandboxed runtime reaches the node's MCP endpoint from inside the guest: Jam allows the
// sandbox exactly that target before the provider starts, and the tool call lands.
func TestASandboxedAgentReachesJamsToolsThroughItsAllowedTarget(t *testing.T) {
	t.Parallel()
	sbxState := t.TempDir()
	d := startDevEnv(t, filepath.Join(t.TempDir(), "jam-home"), ownedEnv(t, t.TempDir(),
		"JAM_SBX="+fakesbx.Binary(t), "FAKESBX_STATE="+sbxState, "FAKESBX_LOG="+filepath.Join(t.TempDir(), "sbx.log"),
		// The fake guest is this machine: it reaches the host as 127.0.0.1.
		"JAM_MCP_GUEST_HOST=127.0.0.1"))
	c := d.client
	agent := sandboxedAgent(t, c, "boxed", domain.PlacementDedicated)
	room, session := roomWith(t, c, "lab", agent)
	m := postText(t, c, room.ID, "[[reply-tool from the guest]] hi")
	if r := awaitReply(t, c, m, 2*time.Minute); r.Text != "from the guest" {
		t.Fatalf("reply %+v", r)
	}
	host := getSession(t, c, session)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(sbxState), "policy.json"))
	if err != nil {
		b, err = os.ReadFile(filepath.Join(sbxState, "policy.json"))
	}
	if err != nil {
		t.Fatalf("the fake sbx recorded no policy: %v", err)
	}
	var rules []struct{ Scope, Resource string }
	if err := json.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	var endpoint []string
	for _, r := range rules {
		if strings.HasPrefix(r.Resource, "127.0.0.1:") {
			if r.Scope == "global" {
				t.Fatalf("the tools endpoint was allowed for every sandbox: %+v", r)
			}
			endpoint = append(endpoint, r.Resource)
		}
	}
	if len(endpoint) != 1 {
		t.Fatalf("rules allowing the tools endpoint: %v (all %s; session %+v)", endpoint, b, host.Runtime)
	}
}
