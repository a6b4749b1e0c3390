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
	"github.com/jam-dev/jam/internal/testsupport/fakesbx"
	"github.com/jam-dev/jam/internal/testsupport/realagent"
	"github.com/jam-dev/jam/internal/testsupport/stubmodel"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// slowMarker in a message makes the scripted model stream its answer slowly, so a test can
// steer or interrupt the turn.
const slowMarker = "[[slow]]"

// longMarker in a message makes the scripted model reply with longReport, over three
// messages' worth of text.
const longMarker = "[[long]]"

// longReport is 200 KiB of paragraphs.
var longReport = strings.Repeat(strings.Repeat("The report goes on. ", 50)+"\n\n", 205)

// codexModel is the scripted model of the Codex tests: jam_reply_to_message for every
// message, streamed slowly first when the message asks for it.
func codexModel(t *testing.T) *stubmodel.Server {
	t.Helper()
	var mu sync.Mutex
	slowed := map[string]bool{}
	model, err := stubmodel.Start(func(r stubmodel.Request) stubmodel.Reply {
		reply := stubmodel.ReplyTool(r)
		id, prompt := r.Unanswered()
		if id != "" && strings.Contains(prompt, longMarker) && reply.ToolCall != nil {
			reply.ToolCall.Arguments = map[string]string{"message_id": id, "text": longReport}
		}
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
	t.Parallel()
	realagent.Require(t, "codex")
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
	wait.Never(t, time.Second, func() bool { return len(repliesTo(t, c, first)) != 1 },
		"a second reply: the final text must not be posted beside the tool's reply")

	// A 200 KiB reply arrives whole, as ordered parts each within a message's limit.
	long := postText(t, c, room.ID, longMarker+" the full report, please")
	awaitReply(t, c, long, 2*time.Minute)
	parts := repliesTo(t, c, long)
	var whole strings.Builder
	for i, p := range parts {
		if p.Part != i+1 || p.Parts != len(parts) || len(p.Text) > domain.MaxMessageBytes || (i > 0 && *p.Continues != parts[i-1].ID) {
			t.Fatalf("part %d of %d: part %d/%d, %d bytes", i+1, len(parts), p.Part, p.Parts, len(p.Text))
		}
		whole.WriteString(p.Text)
	}
	if len(parts) < 4 || whole.String() != longReport {
		t.Fatalf("%d parts, whole %v (%d of %d bytes)", len(parts), whole.String() == longReport, whole.Len(), len(longReport))
	}

	s := getSession(t, c, session)
	thread := s.ProviderSessionID
	if thread == "" || s.ProviderVersion == "" {
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
	t.Parallel()
	realagent.Require(t, "codex")
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
	wait.Eventually(t, 2*time.Minute, func() bool {
		must(t, c.Do(ctx, http.MethodGet, "/v1/permissions?state=pending", nil, &pending))
		return len(pending.Items) == 1
	}, "one pending permission")
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

// A Codex template on a node without codex: the session says why and how to fix it, and it
// makes one start attempt in all — not one per Reconcile period, not one per message (issue
// 18). A save naming a command the node lacks is refused (TestATemplateTheNodeCannotRunIsRefusedAtSave),
// so the command goes away after the save, as an uninstall would.
func TestACodexRoomOnANodeWithoutCodexFailsOnceAndSaysWhy(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "jam-home")
	d := startDevEnv(t, home, ownedEnv(t, t.TempDir(), "JAM_RECONCILE_INTERVAL_SECS=2"))
	c := d.client
	codex := filepath.Join(t.TempDir(), "codex")
	must(t, os.WriteFile(codex, []byte("#!/bin/sh\necho codex-cli 0.0.1\n"), 0o755))
	tmpl := domain.TemplateConfig{Alias: "default", Transport: domain.TransportCodexAppServer, Command: codex}
	agent := codexAgent(t, c, "codex", tmpl)
	room, session := roomWith(t, c, "lab", agent)
	must(t, os.Remove(codex))
	postText(t, c, room.ID, "hello?")
	var s api.SessionBody
	wait.Eventually(t, time.Minute, func() bool {
		s = getSession(t, c, session)
		return s.Failure != nil
	}, "the session to report a failure")
	if s.Presence != domain.PresenceFailed || s.Failure.Class != domain.FailureExecutableRefused ||
		!strings.Contains(s.Failure.Reason, "the template's command "+codex+": does not exist") ||
		!strings.Contains(s.Failure.Reason, "--command /absolute/path") {
		t.Fatalf("session presence %s failure %+v", s.Presence, s.Failure)
	}
	attempts := func() int {
		return strings.Count(d.proc.stderrText(), `"runtime did not start" component=temporal-client`)
	}
	wait.Never(t, 5*time.Second, func() bool { return attempts() > 1 }, "a second start attempt") // two Reconcile periods
	postText(t, c, room.ID, "anyone?")
	wait.Never(t, 5*time.Second, func() bool { return attempts() > 1 }, "a second start attempt") // two more
	if n := attempts(); n != 1 {
		t.Fatalf("%d start attempts, want 1", n)
	}
}

// Sandboxed Codex through the fake sbx: CODEX_HOME lives in the provider-state mount, so a
// park checkpoints the thread (rollout files and state database), and a host whose state was
// lost resumes the same thread from that checkpoint, with its history.
func TestASandboxedCodexResumesItsThreadFromACheckpoint(t *testing.T) {
	t.Parallel()
	exe := realagent.Require(t, "codex")
	model := codexModel(t)
	state := t.TempDir()
	home := filepath.Join(t.TempDir(), "jam-home")
	d := startDevEnv(t, home, ownedEnv(t, t.TempDir(), "JAM_OWNED_RUNTIME_IDLE_SECS=3", "STUB_MODEL_KEY=x",
		"JAM_SBX="+fakesbx.Binary(t), "FAKESBX_STATE="+state, "FAKESBX_LOG="+filepath.Join(t.TempDir(), "sbx.log")))
	c, ctx := d.client, context.Background()
	tmpl := codexTemplate(model, nil)
	placement := domain.PlacementDedicated
	tmpl.Placement, tmpl.Sandbox = &placement, domain.SandboxConfig{Enabled: true}
	agent := codexAgent(t, c, "codex", tmpl)
	room, session := roomWith(t, c, "lab", agent)
	host := "/v1/hosts/" + session.String()

	if r := awaitReply(t, c, postText(t, c, room.ID, "remember the number 42"), 2*time.Minute); r.Text != "stub: remember the number 42" {
		t.Fatalf("reply %q", r.Text)
	}
	thread := getSession(t, c, session).ProviderSessionID
	awaitPresence(t, c, session, domain.PresenceDormant, time.Minute)
	var cps api.CheckpointList
	wait.Eventually(t, time.Minute, func() bool {
		must(t, c.Do(ctx, http.MethodGet, host+"/checkpoints", nil, &cps))
		return len(cps.Items) > 0
	}, "a checkpoint of the parked host")
	cp := cps.Items[0]
	if len(cp.Sessions) != 1 || cp.Sessions[0].ProviderSessionID != thread || cp.ProviderVersion != exe.Version {
		t.Fatalf("checkpoint %+v (thread %s, codex %s)", cp, thread, exe.Version)
	}
	// The host's state is lost: the next wake restores it from the checkpoint.
	if err := os.RemoveAll(filepath.Join(home, "runtime-hosts", session.String(), "provider-state", "codex")); err != nil {
		t.Fatal(err)
	}
	before := len(model.Requests())
	awaitReply(t, c, postText(t, c, room.ID, "what was the number?"), 2*time.Minute)
	if s := getSession(t, c, session); s.ProviderSessionID != thread {
		t.Fatalf("woke on thread %q, bound %q", s.ProviderSessionID, thread)
	}
	if reqs := model.Requests()[before:]; len(reqs) == 0 || !strings.Contains(reqs[0].AllText(), "remember the number 42") {
		t.Fatal("the restored thread's request does not hold the first turn")
	}
	var cont api.ContinuityBody
	must(t, c.Do(ctx, http.MethodGet, host+"/continuity", nil, &cont))
	if len(cont.Sessions) != 1 || cont.Sessions[0].LastResume == nil || cont.Sessions[0].LastResume.Outcome != domain.ResumeSucceeded {
		t.Fatalf("continuity after the restore %+v", cont.ContinuityReportBody)
	}
}

// The production shape: the worker is SIGKILLed while Codex streams its answer; a new worker
// under the same node name resumes the thread and the message is answered exactly once.
func TestACodexTurnCutByAKilledWorkerIsAnsweredExactlyOnce(t *testing.T) {
	t.Parallel()
	realagent.Require(t, "codex")
	model := codexModel(t)
	p := startProductionServer(t, "codex-crash-token")
	c := p.client
	workerEnv := append(append(p.base, "JAM_HOME="+filepath.Join(t.TempDir(), "node-w1")),
		ownedEnv(t, t.TempDir(), "CODEX_HOME="+t.TempDir(), "STUB_MODEL_KEY=x")...)
	worker := startJam(t, workerEnv, "worker", "--node", "w1")
	agent := codexAgent(t, c, "codex", codexTemplate(model, nil))
	room, session := roomWith(t, c, "lab", agent)

	m := postText(t, c, room.ID, slowMarker+" a long answer")
	wait.Eventually(t, 2*time.Minute, func() bool {
		s := getSession(t, c, session)
		return s.Runtime != nil && s.Runtime.InTurn && len(model.Requests()) > 0
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
