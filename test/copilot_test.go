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

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/fakesbx"
	"github.com/jam-dev/jam/internal/testsupport/realagent"
	"github.com/jam-dev/jam/internal/testsupport/stubmodel"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// copilotTemplate points Copilot (SDK server) at the scripted model server the way an
// operator points it at a model provider of their own: template settings and the key's
// variable in the allowlist.
func copilotTemplate(model *stubmodel.Server) domain.TemplateConfig {
	return domain.TemplateConfig{Alias: "default", Transport: domain.TransportCopilotSDK, AuthMode: domain.AuthAPIKey,
		Settings: map[string]string{domain.SettingKeyModel: stubmodel.Model, domain.SettingKeyProviderBaseURL: model.URL + "/v1",
			domain.SettingKeyProviderEnvKey: "STUB_MODEL_KEY"},
		EnvAllowlist: []string{"STUB_MODEL_KEY"}}
}

// copilotHome is a COPILOT_HOME for one test. Copilot's native server can still be writing
// its session files for a moment after Jam reaped it, so the directory is removed with
// retries rather than by t.TempDir's single attempt.
func copilotHome(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "jam-copilot-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for os.RemoveAll(dir) != nil && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
	})
	return dir
}

// copilotEnv is the worker environment the host-native Copilot tests run in.
func copilotEnv(t *testing.T, extra ...string) []string {
	return ownedEnv(t, t.TempDir(), append([]string{"COPILOT_HOME=" + copilotHome(t), "STUB_MODEL_KEY=x"}, extra...)...)
}

// The Copilot acceptance, host-native, through jam dev and the public API with the real
// `copilot --headless --stdio`: a reply through Jam's reply tool (posted once); a message
// posted while the model streams is steered into the running turn; a stop mid-turn aborts
// it and the message waits for the restart; after an idle reap the next message resumes
// the same Copilot session with the earlier turns in the model's input.
func TestCopilotAnswersSteersStopsAndResumesInARoom(t *testing.T) {
	t.Parallel()
	realagent.Require(t, "copilot")
	model := codexModel(t)
	home := filepath.Join(t.TempDir(), "jam-home")
	d := startDevEnv(t, home, copilotEnv(t, "JAM_OWNED_RUNTIME_IDLE_SECS=4"))
	c, ctx := d.client, context.Background()
	agent := codexAgent(t, c, "copilot", copilotTemplate(model))
	room, session := roomWith(t, c, "lab", agent)

	first := postText(t, c, room.ID, "what is the plan?")
	r := awaitReply(t, c, first, 2*time.Minute)
	if r.Text != "stub: what is the plan?" || r.AuthorAgentID == nil || *r.AuthorAgentID != agent {
		t.Fatalf("reply %+v", r)
	}
	wait.Never(t, time.Second, func() bool { return len(repliesTo(t, c, first)) != 1 },
		"a second reply: the final text must not be posted beside the tool's reply")
	s := getSession(t, c, session)
	copilotSession := s.ProviderSessionID
	if copilotSession == "" || s.ProviderVersion == "" {
		t.Fatalf("session %+v", s)
	}

	// Steering: the second message joins the turn the first one is streaming.
	slow := postText(t, c, room.ID, slowMarker+" think slowly")
	wait.Eventually(t, 30*time.Second, func() bool {
		s := getSession(t, c, session)
		return s.Runtime != nil && s.Runtime.InTurn
	}, "the session to be in a turn")
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

	// A stop mid-turn aborts it; the message waits for the restart.
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
		t.Fatalf("an aborted turn replied: %+v", rs)
	}
	must(t, c.Do(ctx, http.MethodPost, "/v1/sessions/"+session.String()+"/restart", nil, nil))
	awaitReply(t, c, stopped, 2*time.Minute)

	// Reaped when idle; the next message resumes the same session with its history.
	awaitPresence(t, c, session, domain.PresenceDormant, time.Minute)
	before := len(model.Requests())
	later := postText(t, c, room.ID, "are you still there?")
	awaitReply(t, c, later, 2*time.Minute)
	if s := getSession(t, c, session); s.ProviderSessionID != copilotSession {
		t.Fatalf("woke on session %q, bound %q", s.ProviderSessionID, copilotSession)
	}
	if reqs := model.Requests()[before:]; len(reqs) == 0 || !strings.Contains(reqs[0].AllText(), "what is the plan?") {
		t.Fatal("the resumed session's first request does not hold the earlier turns")
	}
}

// A shell command the scripted model asks Copilot to run is a pending runtime permission;
// `jam permission decide` answers it and the command's result reaches the model. Jam's own
// reply tool is never asked about.
func TestACopilotToolPermissionIsDecidedWithTheCLI(t *testing.T) {
	t.Parallel()
	realagent.Require(t, "copilot")
	var mu sync.Mutex
	calls := 0
	target := filepath.Join(t.TempDir(), "approved-file")
	model, err := stubmodel.Start(func(r stubmodel.Request) stubmodel.Reply {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			return stubmodel.Reply{ToolCall: &stubmodel.ToolCall{Name: r.ToolName("bash"),
				Arguments: map[string]any{"command": "touch " + target + " && echo made-it", "description": "make a file",
					"mode": "sync", "initial_wait": 10}}}
		}
		return stubmodel.ReplyTool(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = model.Close() })
	home := filepath.Join(t.TempDir(), "jam-home")
	d := startDevEnv(t, home, copilotEnv(t))
	c, ctx := d.client, context.Background()
	agent := codexAgent(t, c, "copilot", copilotTemplate(model))
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
	if len(results) == 0 || !strings.Contains(results[0], "made-it") {
		t.Fatalf("the command's output did not reach the model: %q", results)
	}
	var all api.PermissionList
	must(t, c.Do(ctx, http.MethodGet, "/v1/permissions", nil, &all))
	if len(all.Items) != 1 {
		t.Fatalf("%d permissions asked; Jam's reply tool must not be one of them", len(all.Items))
	}
}

// Sandboxed Copilot through the fake sbx: COPILOT_HOME lives in the provider-state mount,
// so a park checkpoints the session, and a host whose state was lost resumes the same
// session from that checkpoint, with its history. The model provider's key reaches the
// session configuration from the guest's environment.
func TestASandboxedCopilotResumesItsSessionFromACheckpoint(t *testing.T) {
	t.Parallel()
	exe := realagent.Require(t, "copilot")
	model := codexModel(t)
	state := t.TempDir()
	home, err := os.MkdirTemp("", "jam-copilot-sandbox-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for os.RemoveAll(home) != nil && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
	})
	d := startDevEnv(t, home, ownedEnv(t, t.TempDir(), "JAM_OWNED_RUNTIME_IDLE_SECS=3", "STUB_MODEL_KEY=x",
		"JAM_SBX="+fakesbx.Binary(t), "FAKESBX_STATE="+state, "FAKESBX_LOG="+filepath.Join(t.TempDir(), "sbx.log")))
	c, ctx := d.client, context.Background()
	tmpl := copilotTemplate(model)
	placement := domain.PlacementDedicated
	tmpl.Placement, tmpl.Sandbox = &placement, domain.SandboxConfig{Enabled: true}
	agent := codexAgent(t, c, "copilot", tmpl)
	room, session := roomWith(t, c, "lab", agent)
	host := "/v1/hosts/" + session.String()

	if r := awaitReply(t, c, postText(t, c, room.ID, "remember the number 42"), 2*time.Minute); r.Text != "stub: remember the number 42" {
		t.Fatalf("reply %q", r.Text)
	}
	copilotSession := getSession(t, c, session).ProviderSessionID
	if copilotSession == "" {
		t.Fatal("no Copilot session bound after the first turn")
	}
	stateDir := filepath.Join(home, "runtime-hosts", session.String(), "provider-state", "copilot")
	if _, err := os.Stat(filepath.Join(stateDir, "session-state", copilotSession)); err != nil {
		t.Fatalf("the session is not in the provider-state mount: %v", err)
	}
	awaitPresence(t, c, session, domain.PresenceDormant, time.Minute)
	var cps api.CheckpointList
	wait.Eventually(t, time.Minute, func() bool {
		must(t, c.Do(ctx, http.MethodGet, host+"/checkpoints", nil, &cps))
		return len(cps.Items) > 0
	}, "a checkpoint of the parked host")
	cp := cps.Items[0]
	if len(cp.Sessions) != 1 || cp.Sessions[0].ProviderSessionID != copilotSession || cp.ProviderVersion == "" || !strings.Contains(exe.Version, cp.ProviderVersion) {
		t.Fatalf("checkpoint %+v (session %s, copilot %s)", cp, copilotSession, exe.Version)
	}
	// The host's state is lost: the next wake restores it from the checkpoint.
	if err := os.RemoveAll(stateDir); err != nil {
		t.Fatal(err)
	}
	before := len(model.Requests())
	awaitReply(t, c, postText(t, c, room.ID, "what was the number?"), 2*time.Minute)
	if s := getSession(t, c, session); s.ProviderSessionID != copilotSession {
		t.Fatalf("woke on session %q, bound %q", s.ProviderSessionID, copilotSession)
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

// The production shape: the worker is SIGKILLed while Copilot streams its answer; a new
// worker under the same node name resumes the session and the message is answered exactly
// once.
func TestACopilotTurnCutByAKilledWorkerIsAnsweredExactlyOnce(t *testing.T) {
	t.Parallel()
	realagent.Require(t, "copilot")
	model := codexModel(t)
	p := startProductionServer(t, "copilot-crash-token")
	c := p.client
	workerEnv := append(append(p.base, "JAM_HOME="+filepath.Join(t.TempDir(), "node-w1")), copilotEnv(t)...)
	worker := startJam(t, workerEnv, "worker", "--node", "w1")
	agent := codexAgent(t, c, "copilot", copilotTemplate(model))
	room, session := roomWith(t, c, "lab", agent)

	// A first answer binds the Copilot session; the second is cut by the kill.
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
