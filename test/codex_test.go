package test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/testsupport/stubmodel"
)

// requireCodex finds the real `codex` on PATH or skips (fails under JAM_REQUIRE_REAL_AGENTS=1).
func requireCodex(t *testing.T) provider.ResolvedExecutable {
	t.Helper()
	exe, err := provider.ResolveExecutable(context.Background(), provider.ExecutableRequest{Command: "codex", PATH: os.Getenv("PATH")})
	if err != nil {
		if os.Getenv("JAM_REQUIRE_REAL_AGENTS") == "1" {
			t.Fatalf("codex is required (JAM_REQUIRE_REAL_AGENTS=1): %v", err)
		}
		t.Skipf("codex is not installed: %v", err)
	}
	return exe
}

// slowMarker in a message makes the scripted model stream its answer slowly, so a test can
// steer or interrupt the turn.
const slowMarker = "[[slow]]"

// codexModel is the scripted model of the Codex tests: jam_reply_to_message for every
// message, streamed slowly first when the message asks for it.
func codexModel(t *testing.T) *stubmodel.Server {
	t.Helper()
	var mu sync.Mutex
	slowed := map[string]bool{}
	model, err := stubmodel.Start(func(r stubmodel.Request) stubmodel.Reply {
		reply := stubmodel.ReplyTool(r)
		id, prompt := r.Unanswered()
		mu.Lock()
		defer mu.Unlock()
		if id != "" && strings.Contains(prompt, slowMarker) && !slowed[id] {
			slowed[id] = true
			reply.Text, reply.Chunks, reply.ChunkDelay = "working on it", 12, 500*time.Millisecond
		}
		return reply
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = model.Close() })
	return model
}

// codexTemplate points Codex at the scripted model server the way an operator points it at
// any model provider: template settings and the key's variable in the allowlist.
func codexTemplate(model *stubmodel.Server, extra map[string]string) domain.TemplateConfig {
	set := map[string]string{domain.SettingKeyModel: stubmodel.Model, domain.SettingKeyProviderBaseURL: model.URL + "/v1",
		domain.SettingKeyProviderEnvKey: "STUB_MODEL_KEY"}
	for k, v := range extra {
		set[k] = v
	}
	return domain.TemplateConfig{Alias: "default", Transport: domain.TransportCodexAppServer, Settings: set,
		EnvAllowlist: []string{"STUB_MODEL_KEY"}}
}

func codexAgent(t *testing.T, c *client.Client, name string, tmpl domain.TemplateConfig) uuid.UUID {
	t.Helper()
	var a api.AgentBody
	must(t, c.Do(context.Background(), http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: name, Kind: domain.AgentOwned, Template: &tmpl}, &a))
	return a.ID
}

// The Codex acceptance, host-native, through jam dev and the public API with the real
// `codex app-server`: a reply through jam_reply_to_message (posted once, linked to its
// source); a message posted while the model streams is steered into the running turn; a
// stop mid-turn interrupts it and the message waits for the restart; after an idle reap the
// same thread is resumed with the earlier turns in the model's input; a command approval
// reaches the permission broker and `jam permission decide` answers it.
func TestCodexAnswersSteersStopsAndResumesInARoom(t *testing.T) {
	requireCodex(t)
	model := codexModel(t)
	home := filepath.Join(t.TempDir(), "jam-home")
	d := startDevEnv(t, home, ownedEnv(t, t.TempDir(), "JAM_OWNED_RUNTIME_IDLE_SECS=4",
		"CODEX_HOME="+t.TempDir(), "STUB_MODEL_KEY=x"))
	c, ctx := d.client, context.Background()
	agent := codexAgent(t, c, "codex", codexTemplate(model, nil))
	room, session := roomWith(t, c, "lab", agent)

	first := postText(t, c, room.ID, "what is the plan?")
	r := awaitReply(t, c, first, 2*time.Minute)
	if r.Text != "stub: what is the plan?" || r.AuthorAgentID == nil || *r.AuthorAgentID != agent {
		t.Fatalf("reply %+v", r)
	}
	time.Sleep(time.Second)
	if n := len(repliesTo(t, c, first)); n != 1 {
		t.Fatalf("%d replies, want 1: the final text must not be posted beside the tool's reply", n)
	}
	s := getSession(t, c, session)
	thread := s.ProviderSessionID
	if thread == "" || s.ProviderVersion == "" {
		t.Fatalf("session %+v", s)
	}

	// Steering: the second message joins the turn the first one is streaming.
	slow := postText(t, c, room.ID, slowMarker+" think slowly")
	eventually(t, 30*time.Second, func() bool {
		s := getSession(t, c, session)
		return s.Runtime != nil && s.Runtime.InTurn
	})
	time.Sleep(time.Second)
	steered := postText(t, c, room.ID, "and one more thing")
	awaitReply(t, c, slow, time.Minute)
	awaitReply(t, c, steered, time.Minute)
	var together bool
	for _, req := range model.Requests() {
		together = together || (strings.Contains(req.AllText(), "think slowly") && strings.Contains(req.AllText(), "one more thing") &&
			strings.Contains(req.AllText(), "arrived while you were working"))
	}
	if !together {
		t.Fatal("the model never saw the second message steered into the first one's turn")
	}

	// A stop mid-turn interrupts; the message waits for the restart.
	stopped := postText(t, c, room.ID, slowMarker+" a long job")
	eventually(t, 30*time.Second, func() bool {
		s := getSession(t, c, session)
		return s.Runtime != nil && s.Runtime.InTurn
	})
	start := time.Now()
	must(t, c.Do(ctx, http.MethodPost, "/v1/sessions/"+session.String()+"/stop", nil, nil))
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("the stop took %s", took)
	}
	if rs := repliesTo(t, c, stopped); len(rs) != 0 {
		t.Fatalf("an interrupted turn replied: %+v", rs)
	}
	must(t, c.Do(ctx, http.MethodPost, "/v1/sessions/"+session.String()+"/restart", nil, nil))
	awaitReply(t, c, stopped, 2*time.Minute)

	// Reaped when idle; the next message resumes the same thread with its history.
	awaitPresence(t, c, session, domain.PresenceDormant, time.Minute)
	before := len(model.Requests())
	later := postText(t, c, room.ID, "are you still there?")
	awaitReply(t, c, later, 2*time.Minute)
	if s := getSession(t, c, session); s.ProviderSessionID != thread {
		t.Fatalf("woke on thread %q, bound %q", s.ProviderSessionID, thread)
	}
	if reqs := model.Requests()[before:]; len(reqs) == 0 || !strings.Contains(reqs[0].AllText(), "what is the plan?") {
		t.Fatal("the resumed thread's first request does not hold the earlier turns")
	}
}

// A command Codex wants to run under the untrusted approval policy is a pending runtime
// permission; `jam permission decide` answers it and the turn goes on.
func TestACodexCommandApprovalIsDecidedWithTheCLI(t *testing.T) {
	requireCodex(t)
	var mu sync.Mutex
	calls := 0
	model, err := stubmodel.Start(func(r stubmodel.Request) stubmodel.Reply {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			return stubmodel.Reply{ToolCall: &stubmodel.ToolCall{Name: "exec_command", Arguments: map[string]any{"cmd": "touch approved-file"}}}
		}
		return stubmodel.ReplyTool(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = model.Close() })
	home := filepath.Join(t.TempDir(), "jam-home")
	d := startDevEnv(t, home, ownedEnv(t, t.TempDir(), "CODEX_HOME="+t.TempDir(), "STUB_MODEL_KEY=x"))
	c, ctx := d.client, context.Background()
	agent := codexAgent(t, c, "codex", codexTemplate(model, map[string]string{domain.SettingKeyApprovalPolicy: "untrusted"}))
	room, _ := roomWith(t, c, "lab", agent)
	m := postText(t, c, room.ID, "make a file")
	var pending api.PermissionList
	eventually(t, 2*time.Minute, func() bool {
		must(t, c.Do(ctx, http.MethodGet, "/v1/permissions?state=pending", nil, &pending))
		return len(pending.Items) == 1
	})
	p := pending.Items[0]
	if p.ToolKey != "execute" || !strings.Contains(p.Title, "touch approved-file") {
		t.Fatalf("permission %+v", p)
	}
	cli := []string{"JAM_URL=" + d.apiURL, "JAM_HOME=" + home}
	if out, err := runJam(t, cli, "permission", "decide", p.ID.String(), "deny"); err != nil {
		t.Fatalf("jam permission decide: %v\n%s", err, out)
	}
	awaitReply(t, c, m, 2*time.Minute)
}
