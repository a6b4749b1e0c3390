package test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/testsupport/fakesbx"
	"github.com/jam-dev/jam/internal/testsupport/realagent"
	"github.com/jam-dev/jam/internal/testsupport/stubmodel"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// claudeModelID is a model id claude accepts (it refuses an unknown one before any request).
const claudeModelID = "claude-sonnet-4-5"

// claudeTemplate points Claude Code at the scripted model server the way an operator points
// it at any Anthropic-compatible endpoint: ANTHROPIC_BASE_URL and the key in the allowlist.
func claudeTemplate(idle domain.IdlePolicy) domain.TemplateConfig {
	return domain.TemplateConfig{Alias: "default", Transport: domain.TransportClaudeCodeCLI, AuthMode: domain.AuthAPIKey,
		Settings: map[string]string{domain.SettingKeyModel: claudeModelID}, IdlePolicy: idle,
		EnvAllowlist: []string{"ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"}}
}

// claudeEnv is the worker environment the Claude tests run in.
func claudeEnv(t *testing.T, model *stubmodel.Server, extra ...string) []string {
	return ownedEnv(t, t.TempDir(), append([]string{"ANTHROPIC_BASE_URL=" + model.URL, "ANTHROPIC_API_KEY=x"}, extra...)...)
}

// The Claude Code acceptance, host-native, through jam dev and the public API with the real
// `claude`: a reply through Jam's reply tool over MCP (posted once); a message posted while
// the model streams is steered into the running turn; a stop mid-turn interrupts it and the
// message waits for the restart; with KeepAlive off the runtime is reaped when idle and the
// next message resumes the same Claude session with the earlier turns in the model's input;
// a room whose agent keeps the catalog's KeepAlive is never reaped.
func TestClaudeCodeAnswersSteersStopsAndResumesInARoom(t *testing.T) {
	t.Parallel()
	realagent.Require(t, "claude")
	model := codexModel(t)
	home := filepath.Join(t.TempDir(), "jam-home")
	d := startDevEnv(t, home, claudeEnv(t, model, "JAM_OWNED_RUNTIME_IDLE_SECS=4"))
	c, ctx := d.client, context.Background()
	agent := codexAgent(t, c, "claude", claudeTemplate(domain.IdleAllow))
	room, session := roomWith(t, c, "lab", agent)
	keeper := codexAgent(t, c, "keeper", claudeTemplate(""))
	keptRoom, keptSession := roomWith(t, c, "kept", keeper)

	first := postText(t, c, room.ID, "what is the plan?")
	r := awaitReply(t, c, first, 2*time.Minute)
	if r.Text != "stub: what is the plan?" || r.AuthorAgentID == nil || *r.AuthorAgentID != agent {
		t.Fatalf("reply %+v", r)
	}
	wait.Never(t, time.Second, func() bool { return len(repliesTo(t, c, first)) != 1 },
		"a second reply: the final text must not be posted beside the tool's reply")
	s := getSession(t, c, session)
	claudeSession := s.ProviderSessionID
	if claudeSession == "" || s.ProviderVersion == "" {
		t.Fatalf("session %+v", s)
	}
	// The session's transcript is in its own provider-state directory.
	if found, _ := filepath.Glob(filepath.Join(home, "runtime-hosts", session.String(), "provider-state", "claude",
		"projects", "*", claudeSession+".jsonl")); len(found) != 1 {
		t.Fatalf("transcript of %s not in the session's provider state", claudeSession)
	}

	// KeepAlive (the catalog's policy for Claude): answered, then never reaped when idle.
	awaitReply(t, c, postText(t, c, keptRoom.ID, "stay with me"), 2*time.Minute)

	// Steering: the second message joins the turn the first one is streaming.
	slow := postText(t, c, room.ID, slowMarker+" think slowly")
	wait.Eventually(t, 30*time.Second, func() bool {
		s := getSession(t, c, session)
		return s.Runtime != nil && s.Runtime.InTurn
	}, "the session to be in a turn")
	time.Sleep(time.Second)
	t.Logf("steering at %s", time.Now().Format("15:04:05.000"))
	steered := postText(t, c, room.ID, "and one more thing")
	awaitReply(t, c, slow, time.Minute)
	awaitReply(t, c, steered, time.Minute)
	var together bool
	for _, req := range model.Requests() {
		together = together || (strings.Contains(req.AllText(), "think slowly") && strings.Contains(req.AllText(), "one more thing") &&
			strings.Contains(req.AllText(), "arrived while you were working"))
	}
	if !together {
		for _, req := range model.Requests() {
			id, _ := req.Unanswered()
			t.Logf("request at %s after=%v unanswered=%s: %q", req.At.Format("15:04:05.000"), req.AfterToolResult, id, req.AllText())
		}
		t.Fatal("the model never saw the second message steered into the first one's turn")
	}

	// A stop mid-turn interrupts; the message waits for the restart.
	stopped := postText(t, c, room.ID, slowMarker+" a long job")
	wait.Eventually(t, 30*time.Second, func() bool {
		s := getSession(t, c, session)
		return s.Runtime != nil && s.Runtime.InTurn
	}, "the session to be in a turn")
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

	// Reaped when idle; the next message resumes the same session with its history.
	awaitPresence(t, c, session, domain.PresenceDormant, time.Minute)
	before := len(model.Requests())
	later := postText(t, c, room.ID, "are you still there?")
	awaitReply(t, c, later, 2*time.Minute)
	if s := getSession(t, c, session); s.ProviderSessionID != claudeSession {
		t.Fatalf("woke on session %q, bound %q", s.ProviderSessionID, claudeSession)
	}
	if reqs := model.Requests()[before:]; len(reqs) == 0 || !strings.Contains(reqs[0].AllText(), "what is the plan?") {
		t.Fatal("the resumed session's first request does not hold the earlier turns")
	}
	// All this time the KeepAlive room stayed live.
	if s := getSession(t, c, keptSession); s.Presence == domain.PresenceDormant || s.Runtime == nil {
		t.Fatalf("the KeepAlive room was reaped: %+v", s)
	}
}

// A Bash command the scripted model asks Claude to run is a pending runtime permission;
// `jam permission decide` answers it and the command's result reaches the model. The command
// holds a token and an Authorization header: neither value reaches the API, the event
// stream or the transcript (issue 43), while the command runs with them.
func TestAClaudeToolPermissionIsDecidedWithTheCLI(t *testing.T) {
	t.Parallel()
	realagent.Require(t, "claude")
	var mu sync.Mutex
	calls := 0
	dir := t.TempDir()
	target := filepath.Join(dir, "approved-file")
	model, err := stubmodel.Start(func(r stubmodel.Request) stubmodel.Reply {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			return stubmodel.Reply{ToolCall: &stubmodel.ToolCall{Name: "Bash",
				Arguments: map[string]any{"command": "touch " + target + ` && echo made-it --token=s3cr3t -H "Authorization: Bearer abc"`,
					"description": "make a file"}}}
		}
		return stubmodel.ReplyTool(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = model.Close() })
	home := filepath.Join(t.TempDir(), "jam-home")
	d := startDevEnv(t, home, claudeEnv(t, model))
	c, ctx := d.client, context.Background()
	agent := codexAgent(t, c, "claude", claudeTemplate(""))
	room, _ := roomWith(t, c, "lab", agent)
	m := postText(t, c, room.ID, "make a file")
	var pending api.PermissionList
	wait.Eventually(t, 2*time.Minute, func() bool {
		must(t, c.Do(ctx, http.MethodGet, "/v1/permissions?state=pending", nil, &pending))
		return len(pending.Items) == 1
	}, "one pending permission")
	p := pending.Items[0]
	if p.ToolKey != "execute" || !strings.Contains(p.Title, "approved-file") {
		t.Fatalf("permission %+v", p)
	}
	if _, err := os.Stat(target); err == nil {
		t.Fatal("the command ran before anyone decided")
	}
	cli := []string{"JAM_URL=" + d.apiURL, "JAM_HOME=" + home}
	if out, err := runJam(t, cli, "permission", "decide", p.ID.String(), "allow_once"); err != nil {
		t.Fatalf("jam permission decide: %v\n%s", err, out)
	}
	awaitReply(t, c, m, 2*time.Minute)
	if _, err := os.Stat(target); err != nil {
		t.Fatalf("the allowed command did not run: %v", err)
	}
	var results []string
	for _, r := range model.Requests() {
		results = append(results, r.ToolResults...)
	}
	if len(results) == 0 || !strings.Contains(results[0], "made-it --token=s3cr3t") {
		t.Fatalf("the command's output did not reach the model: %q", results)
	}
	// What people see of it holds neither secret.
	var seen []string
	var decided api.PermissionList
	must(t, c.Do(ctx, http.MethodGet, "/v1/permissions", nil, &decided))
	for _, p := range decided.Items {
		seen = append(seen, p.Title, p.Summary)
	}
	for _, m := range transcript(t, c, room.ID) {
		seen = append(seen, m.Text)
	}
	seen = append(seen, roomEventPayloads(t, c, room.ID)...)
	for _, secret := range []string{"s3cr3t", "Bearer abc"} {
		for _, s := range seen {
			if strings.Contains(s, secret) {
				t.Fatalf("%q reached people: %s", secret, s)
			}
		}
	}
	if !slices.ContainsFunc(seen, func(s string) bool { return strings.Contains(s, "--token="+provider.Redacted) }) {
		t.Fatalf("the permission does not show the redacted command: %q", seen)
	}
}

// Sandboxed Claude Code through the fake sbx: CLAUDE_CONFIG_DIR lives in the provider-state
// mount, so a park checkpoints the transcript, and a host whose state was lost resumes the
// same session from that checkpoint, with its history. The API key is the sandbox's
// anthropic service secret, never a value Jam handles.
func TestASandboxedClaudeCodeResumesItsSessionFromACheckpoint(t *testing.T) {
	t.Parallel()
	exe := realagent.Require(t, "claude")
	model := codexModel(t)
	state := t.TempDir()
	home := filepath.Join(t.TempDir(), "jam-home")
	d := startDevEnv(t, home, ownedEnv(t, t.TempDir(), "JAM_OWNED_RUNTIME_IDLE_SECS=3", "ANTHROPIC_BASE_URL="+model.URL,
		"JAM_SBX="+fakesbx.Binary(t), "FAKESBX_STATE="+state, "FAKESBX_LOG="+filepath.Join(t.TempDir(), "sbx.log"),
		"FAKESBX_STORED_SERVICES=global:anthropic", "FAKESBX_SERVICE_ENV=anthropic=ANTHROPIC_API_KEY",
		// The fake sandbox shares the host's network: the guest reaches Jam's tools on loopback.
		"JAM_MCP_GUEST_HOST=127.0.0.1"))
	c, ctx := d.client, context.Background()
	tmpl := claudeTemplate(domain.IdleAllow)
	tmpl.EnvAllowlist = []string{"ANTHROPIC_BASE_URL"}
	placement := domain.PlacementDedicated
	tmpl.Placement, tmpl.Sandbox = &placement, domain.SandboxConfig{Enabled: true}
	agent := codexAgent(t, c, "claude", tmpl)
	room, session := roomWith(t, c, "lab", agent)
	host := "/v1/hosts/" + session.String()

	if r := awaitReply(t, c, postText(t, c, room.ID, "remember the number 42"), 2*time.Minute); r.Text != "stub: remember the number 42" {
		t.Fatalf("reply %q", r.Text)
	}
	claudeSession := getSession(t, c, session).ProviderSessionID
	if claudeSession == "" {
		t.Fatal("no Claude session bound after the first turn")
	}
	awaitPresence(t, c, session, domain.PresenceDormant, time.Minute)
	var cps api.CheckpointList
	wait.Eventually(t, time.Minute, func() bool {
		must(t, c.Do(ctx, http.MethodGet, host+"/checkpoints", nil, &cps))
		return len(cps.Items) > 0
	}, "a checkpoint of the parked host")
	cp := cps.Items[0]
	if len(cp.Sessions) != 1 || cp.Sessions[0].ProviderSessionID != claudeSession || cp.ProviderVersion != exe.Version {
		t.Fatalf("checkpoint %+v (session %s, claude %s)", cp, claudeSession, exe.Version)
	}
	// The host's state is lost: the next wake restores it from the checkpoint.
	if err := os.RemoveAll(filepath.Join(home, "runtime-hosts", session.String(), "provider-state", "claude")); err != nil {
		t.Fatal(err)
	}
	before := len(model.Requests())
	awaitReply(t, c, postText(t, c, room.ID, "what was the number?"), 2*time.Minute)
	if s := getSession(t, c, session); s.ProviderSessionID != claudeSession {
		t.Fatalf("woke on session %q, bound %q", s.ProviderSessionID, claudeSession)
	}
	if reqs := model.Requests()[before:]; len(reqs) == 0 || !strings.Contains(reqs[0].AllText(), "remember the number 42") {
		t.Fatal("the restored session's request does not hold the first turn")
	}
	var cont api.ContinuityBody
	must(t, c.Do(ctx, http.MethodGet, host+"/continuity", nil, &cont))
	if len(cont.Sessions) != 1 || cont.Sessions[0].LastResume == nil || cont.Sessions[0].LastResume.Outcome != domain.ResumeSucceeded {
		t.Fatalf("continuity after the restore %+v", cont.ContinuityReportBody)
	}
}

// The production shape: the worker is SIGKILLed while Claude streams its answer; a new
// worker under the same node name resumes the session and the message is answered exactly
// once.
func TestAClaudeCodeTurnCutByAKilledWorkerIsAnsweredExactlyOnce(t *testing.T) {
	t.Parallel()
	realagent.Require(t, "claude")
	model := codexModel(t)
	p := startProductionServer(t, "claude-crash-token")
	c := p.client
	workerEnv := append(append(p.base, "JAM_HOME="+filepath.Join(t.TempDir(), "node-w1")), claudeEnv(t, model)...)
	worker := startJam(t, workerEnv, "worker", "--node", "w1")
	agent := codexAgent(t, c, "claude", claudeTemplate(""))
	room, session := roomWith(t, c, "lab", agent)

	// A first answer binds the Claude session; the second is cut by the kill.
	awaitReply(t, c, postText(t, c, room.ID, "hello"), 2*time.Minute)
	m := postText(t, c, room.ID, slowMarker+" a long answer")
	wait.Eventually(t, 2*time.Minute, func() bool {
		s := getSession(t, c, session)
		return s.Runtime != nil && s.Runtime.InTurn && strings.Contains(model.Requests()[len(model.Requests())-1].AllText(), "a long answer")
	}, "the session to be in a turn the model has seen")
	if err := worker.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-worker.exited
	if rs := repliesTo(t, c, m); len(rs) != 0 {
		t.Fatalf("answered by a dead worker: %+v", rs)
	}
	worker2 := startJam(t, workerEnv, "worker", "--node", "w1")
	awaitReply(t, c, m, 2*time.Minute)
	wait.Never(t, 2*time.Second, func() bool { return len(repliesTo(t, c, m)) != 1 }, "the message answered other than exactly once")
	if code := worker2.interrupt(45 * time.Second); code != 0 {
		t.Fatalf("worker exited %d after Ctrl-C", code)
	}
}
