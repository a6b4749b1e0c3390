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

	"github.com/google/uuid"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/testsupport/fakesbx"
	"github.com/jam-dev/jam/internal/testsupport/realagent"
	"github.com/jam-dev/jam/internal/testsupport/stubmodel"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// The end-to-end acceptance of the real agent CLIs behind jam dev, a production worker and
// the fake sbx, as one table over Codex, Claude Code and Copilot. What an adapter does on
// its own (a reply through Jam's tool, steering, interrupt, exact resume in a new process,
// permissions reaching the broker, a dead child) is the provider conformance suite's
// (internal/provider/providertest), which drives every adapter directly and much faster;
// these tests keep what only the whole system shows: the room, the workflow's steer, stop,
// restart and idle reap, the CLI deciding a permission, checkpoints of a sandboxed host's
// provider state, and a worker killed mid-turn.

// slowMarker in a message makes the scripted model stream its answer slowly, so a test can
// steer or interrupt the turn.
const slowMarker = "[[slow]]"

// longMarker in a message makes the scripted model reply with longReport, over three
// messages' worth of text.
const longMarker = "[[long]]"

// longReport is 200 KiB of paragraphs.
var longReport = strings.Repeat(strings.Repeat("The report goes on. ", 50)+"\n\n", 205)

// codexModel is the scripted model of the provider tests: jam_reply_to_message for every
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

// claudeModelID is a model id claude accepts (it refuses an unknown one before any request).
const claudeModelID = "claude-sonnet-4-5"

// claudeTemplate points Claude Code at the scripted model server the way an operator points
// it at any Anthropic-compatible endpoint: ANTHROPIC_BASE_URL and the key in the allowlist.
func claudeTemplate(idle domain.IdlePolicy) domain.TemplateConfig {
	return domain.TemplateConfig{Alias: "default", Transport: domain.TransportClaudeCodeCLI, AuthMode: domain.AuthAPIKey,
		Settings: map[string]string{domain.SettingKeyModel: claudeModelID}, IdlePolicy: idle,
		EnvAllowlist: []string{"ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"}}
}

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

// e2eProvider is one row of the end-to-end table.
type e2eProvider struct {
	name string
	// template is the room agent's template (idle is the policy asked for, "" the catalog's).
	template func(model *stubmodel.Server, idle domain.IdlePolicy) domain.TemplateConfig
	// env is the host-native worker's provider environment.
	env func(t *testing.T, model *stubmodel.Server) []string
	// inRoom runs the row's own checks of the room scenario after the first reply.
	inRoom func(t *testing.T, r *roomRun)
	// keepAlive: the room scenario also binds a room whose agent keeps the catalog's idle
	// policy (KeepAlive), for inRoom to check it is never reaped.
	keepAlive bool
	// shell is the model's call of the CLI's shell tool running command.
	shell func(r stubmodel.Request, command string) *stubmodel.ToolCall
	// decision is what `jam permission decide` answers; an allowed command must run.
	decision domain.PermissionDecision
	// afterPermission runs the row's own checks once the permission's turn replied, with
	// the tool results the model got.
	afterPermission func(t *testing.T, c *client.Client, room uuid.UUID, results []string)
	// sandbox is the row's sandboxed set-up: the worker's extra environment, the template
	// change and the provider-state directory the checkpoint holds.
	sandboxEnv      func(model *stubmodel.Server) []string
	sandboxTemplate func(tmpl *domain.TemplateConfig)
	stateDir        string
	// versionWithin: the checkpoint records the version as the provider reports it, a part
	// of what the CLI's --version prints (else the two are equal).
	versionWithin bool
	// sandboxed runs the row's own checks once the sandboxed session is bound.
	sandboxed func(t *testing.T, home string, session uuid.UUID, thread string)
}

// roomRun is the room scenario's state a row's own checks use.
type roomRun struct {
	d       *devInstance
	home    string
	model   *stubmodel.Server
	room    uuid.UUID
	session uuid.UUID
	thread  string
	// kept is a second room whose agent keeps the catalog's idle policy.
	kept, keptSession uuid.UUID
}

var e2eProviders = []e2eProvider{
	{
		name: "codex",
		template: func(model *stubmodel.Server, _ domain.IdlePolicy) domain.TemplateConfig {
			return codexTemplate(model, nil)
		},
		env: func(t *testing.T, _ *stubmodel.Server) []string {
			return []string{"CODEX_HOME=" + t.TempDir(), "STUB_MODEL_KEY=x"}
		},
		inRoom: func(t *testing.T, r *roomRun) {
			c := r.d.client
			// A 200 KiB reply arrives whole, as ordered parts each within a message's limit.
			long := postText(t, c, r.room, longMarker+" the full report, please")
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
			// The workflow's steer and stop are provider-neutral; one provider that can
			// steer runs them through the room (each adapter's steer and interrupt are the
			// conformance suite's).
			steerAndStopInARoom(t, r)
		},
		shell: func(_ stubmodel.Request, command string) *stubmodel.ToolCall {
			return &stubmodel.ToolCall{Name: "exec_command", Arguments: map[string]any{"cmd": command}}
		},
		decision: domain.PermissionDeny,
		sandboxEnv: func(*stubmodel.Server) []string {
			return []string{"STUB_MODEL_KEY=x"}
		},
		stateDir: "codex",
	},
	{
		name:      "claude",
		keepAlive: true,
		template: func(_ *stubmodel.Server, idle domain.IdlePolicy) domain.TemplateConfig {
			return claudeTemplate(idle)
		},
		env: func(_ *testing.T, model *stubmodel.Server) []string {
			return []string{"ANTHROPIC_BASE_URL=" + model.URL, "ANTHROPIC_API_KEY=x"}
		},
		inRoom: func(t *testing.T, r *roomRun) {
			c := r.d.client
			// The session's transcript is in its own provider-state directory.
			if found, _ := filepath.Glob(filepath.Join(r.home, "runtime-hosts", r.session.String(), "provider-state", "claude",
				"projects", "*", r.thread+".jsonl")); len(found) != 1 {
				t.Fatalf("transcript of %s not in the session's provider state", r.thread)
			}
			// KeepAlive (the catalog's policy for Claude): answered, then never reaped when
			// idle, while the room that allows it is.
			awaitReply(t, c, postText(t, c, r.kept, "stay with me"), 2*time.Minute)
			awaitPresence(t, c, r.session, domain.PresenceDormant, time.Minute)
			if s := getSession(t, c, r.keptSession); s.Presence == domain.PresenceDormant || s.Runtime == nil {
				t.Fatalf("the KeepAlive room was reaped: %+v", s)
			}
		},
		shell: func(_ stubmodel.Request, command string) *stubmodel.ToolCall {
			// The command holds a token and an Authorization header: neither value may reach
			// the API, the event stream or the transcript (issue 43), while it runs with them.
			return &stubmodel.ToolCall{Name: "Bash", Arguments: map[string]any{
				"command": command + ` && echo made-it --token=s3cr3t -H "Authorization: Bearer abc"`, "description": "make a file"}}
		},
		decision: domain.PermissionAllowOnce,
		afterPermission: func(t *testing.T, c *client.Client, room uuid.UUID, results []string) {
			if !strings.Contains(results[0], "made-it --token=s3cr3t") {
				t.Fatalf("the command did not run with its token: %q", results)
			}
			var seen []string
			var decided api.PermissionList
			must(t, c.Do(context.Background(), http.MethodGet, "/v1/permissions", nil, &decided))
			for _, p := range decided.Items {
				seen = append(seen, p.Title, p.Summary)
			}
			for _, m := range transcript(t, c, room) {
				seen = append(seen, m.Text)
			}
			seen = append(seen, roomEventPayloads(t, c, room)...)
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
		},
		// The API key is the sandbox's anthropic service secret, never a value Jam handles.
		sandboxEnv: func(model *stubmodel.Server) []string {
			return []string{"ANTHROPIC_BASE_URL=" + model.URL, "FAKESBX_STORED_SERVICES=global:anthropic",
				"FAKESBX_SERVICE_ENV=anthropic=ANTHROPIC_API_KEY",
				// The fake sandbox shares the host's network: the guest reaches Jam's tools on loopback.
				"JAM_MCP_GUEST_HOST=127.0.0.1"}
		},
		sandboxTemplate: func(tmpl *domain.TemplateConfig) {
			tmpl.IdlePolicy, tmpl.EnvAllowlist = domain.IdleAllow, []string{"ANTHROPIC_BASE_URL"}
		},
		stateDir: "claude",
	},
	{
		name: "copilot",
		template: func(model *stubmodel.Server, _ domain.IdlePolicy) domain.TemplateConfig {
			return copilotTemplate(model)
		},
		env: func(t *testing.T, _ *stubmodel.Server) []string {
			return []string{"COPILOT_HOME=" + copilotHome(t), "STUB_MODEL_KEY=x"}
		},
		shell: func(r stubmodel.Request, command string) *stubmodel.ToolCall {
			return &stubmodel.ToolCall{Name: r.ToolName("bash"),
				Arguments: map[string]any{"command": command + " && echo made-it", "description": "make a file", "mode": "sync", "initial_wait": 10}}
		},
		decision: domain.PermissionAllowOnce,
		sandboxEnv: func(*stubmodel.Server) []string {
			return []string{"STUB_MODEL_KEY=x"}
		},
		stateDir:      "copilot",
		versionWithin: true,
		sandboxed: func(t *testing.T, home string, session uuid.UUID, thread string) {
			stateDir := filepath.Join(home, "runtime-hosts", session.String(), "provider-state", "copilot")
			if _, err := os.Stat(filepath.Join(stateDir, "session-state", thread)); err != nil {
				t.Fatalf("the session is not in the provider-state mount: %v", err)
			}
		},
	},
}

// tempHome is a Jam home for one test, removed with retries: a provider's native server can
// still be writing its files for a moment after Jam reaped it.
func tempHome(t *testing.T, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "jam-"+name+"-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		deadline := time.Now().Add(10 * time.Second)
		for os.RemoveAll(dir) != nil && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
	})
	return filepath.Join(dir, "jam-home")
}

// Host-native, through jam dev and the public API with the real CLI: a reply through Jam's
// reply tool, posted once and linked to its source, binds the provider session and the
// version; then the row's own checks.
func TestProvidersAnswerInARoom(t *testing.T) {
	t.Parallel()
	for _, p := range e2eProviders {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			realagent.Require(t, p.name)
			model := codexModel(t)
			home := tempHome(t, p.name)
			d := startDevEnv(t, home, ownedEnv(t, t.TempDir(), append(p.env(t, model), "JAM_OWNED_RUNTIME_IDLE_SECS=4")...))
			c := d.client
			agent := codexAgent(t, c, p.name, p.template(model, domain.IdleAllow))
			room, session := roomWith(t, c, "lab", agent)
			run := &roomRun{d: d, home: home, model: model, room: room.ID, session: session}
			if p.keepAlive {
				keeper := codexAgent(t, c, "keeper", p.template(model, ""))
				kept, keptSession := roomWith(t, c, "kept", keeper)
				run.kept, run.keptSession = kept.ID, keptSession
			}

			first := postText(t, c, room.ID, "what is the plan?")
			r := awaitReply(t, c, first, 2*time.Minute)
			if r.Text != "stub: what is the plan?" || r.AuthorAgentID == nil || *r.AuthorAgentID != agent {
				t.Fatalf("reply %+v", r)
			}
			wait.Never(t, time.Second, func() bool { return len(repliesTo(t, c, first)) != 1 },
				"a second reply: the final text must not be posted beside the tool's reply")
			s := getSession(t, c, session)
			if s.ProviderSessionID == "" || s.ProviderVersion == "" {
				t.Fatalf("session %+v", s)
			}
			if p.inRoom != nil {
				run.thread = s.ProviderSessionID
				p.inRoom(t, run)
			}
		})
	}
}

// steerAndStopInARoom: a message posted while the model streams is steered into the running
// turn; a stop mid-turn interrupts it and the message waits for the restart.
func steerAndStopInARoom(t *testing.T, r *roomRun) {
	c, ctx, session := r.d.client, context.Background(), r.session
	slow := postText(t, c, r.room, slowMarker+" think slowly")
	wait.Eventually(t, 30*time.Second, func() bool {
		s := getSession(t, c, session)
		return s.Runtime != nil && s.Runtime.InTurn
	}, "the session to be in a turn")
	time.Sleep(time.Second)
	steered := postText(t, c, r.room, "and one more thing")
	awaitReply(t, c, slow, time.Minute)
	awaitReply(t, c, steered, time.Minute)
	var together bool
	for _, req := range r.model.Requests() {
		together = together || (strings.Contains(req.AllText(), "think slowly") && strings.Contains(req.AllText(), "one more thing") &&
			strings.Contains(req.AllText(), "arrived while you were working"))
	}
	if !together {
		t.Fatal("the model never saw the second message steered into the first one's turn")
	}

	stopped := postText(t, c, r.room, slowMarker+" a long job")
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
}

// A command the scripted model asks the CLI to run is a pending runtime permission, asked
// before it runs; `jam permission decide` answers it, the turn goes on, and an allowed
// command ran with its result reaching the model.
func TestProvidersPermissionIsDecidedWithTheCLI(t *testing.T) {
	t.Parallel()
	for _, p := range e2eProviders {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			realagent.Require(t, p.name)
			target := filepath.Join(t.TempDir(), "approved-file")
			var mu sync.Mutex
			calls := 0
			model, err := stubmodel.Start(func(r stubmodel.Request) stubmodel.Reply {
				mu.Lock()
				defer mu.Unlock()
				calls++
				if calls == 1 {
					return stubmodel.Reply{ToolCall: p.shell(r, "touch "+target)}
				}
				return stubmodel.ReplyTool(r)
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = model.Close() })
			home := tempHome(t, p.name)
			d := startDevEnv(t, home, ownedEnv(t, t.TempDir(), p.env(t, model)...))
			c, ctx := d.client, context.Background()
			tmpl := p.template(model, "")
			if p.name == "codex" {
				tmpl = codexTemplate(model, map[string]string{domain.SettingKeyApprovalPolicy: "untrusted"})
			}
			agent := codexAgent(t, c, p.name, tmpl)
			room, _ := roomWith(t, c, "lab", agent)
			m := postText(t, c, room.ID, "make a file")
			var pending api.PermissionList
			wait.Eventually(t, 2*time.Minute, func() bool {
				must(t, c.Do(ctx, http.MethodGet, "/v1/permissions?state=pending", nil, &pending))
				return len(pending.Items) == 1
			}, "one pending permission")
			perm := pending.Items[0]
			if perm.ToolKey != "execute" || !strings.Contains(perm.Title, "approved-file") {
				t.Fatalf("permission %+v", perm)
			}
			if _, err := os.Stat(target); err == nil {
				t.Fatal("the command ran before anyone decided")
			}
			cli := []string{"JAM_URL=" + d.apiURL, "JAM_HOME=" + home}
			if out, err := runJam(t, cli, "permission", "decide", perm.ID.String(), string(p.decision)); err != nil {
				t.Fatalf("jam permission decide: %v\n%s", err, out)
			}
			awaitReply(t, c, m, 2*time.Minute)
			if p.decision == domain.PermissionDeny {
				return
			}
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
			if p.afterPermission != nil {
				p.afterPermission(t, c, room.ID, results)
			}
		})
	}
}

// Sandboxed through the fake sbx: the provider's state lives in the provider-state mount,
// so a park checkpoints the session, and a host whose state was lost resumes the same
// provider session from that checkpoint, with its history.
func TestProvidersSandboxedResumeFromACheckpoint(t *testing.T) {
	t.Parallel()
	for _, p := range e2eProviders {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			exe := realagent.Require(t, p.name)
			model := codexModel(t)
			state := t.TempDir()
			home := tempHome(t, p.name)
			env := append([]string{"JAM_OWNED_RUNTIME_IDLE_SECS=3", "JAM_SBX=" + fakesbx.Binary(t), "FAKESBX_STATE=" + state,
				"FAKESBX_LOG=" + filepath.Join(t.TempDir(), "sbx.log")}, p.sandboxEnv(model)...)
			d := startDevEnv(t, home, ownedEnv(t, t.TempDir(), env...))
			c, ctx := d.client, context.Background()
			tmpl := p.template(model, "")
			if p.sandboxTemplate != nil {
				p.sandboxTemplate(&tmpl)
			}
			placement := domain.PlacementDedicated
			tmpl.Placement, tmpl.Sandbox = &placement, domain.SandboxConfig{Enabled: true}
			agent := codexAgent(t, c, p.name, tmpl)
			room, session := roomWith(t, c, "lab", agent)
			host := "/v1/hosts/" + session.String()

			if r := awaitReply(t, c, postText(t, c, room.ID, "remember the number 42"), 2*time.Minute); r.Text != "stub: remember the number 42" {
				t.Fatalf("reply %q", r.Text)
			}
			thread := getSession(t, c, session).ProviderSessionID
			if thread == "" {
				t.Fatal("no provider session bound after the first turn")
			}
			if p.sandboxed != nil {
				p.sandboxed(t, home, session, thread)
			}
			awaitPresence(t, c, session, domain.PresenceDormant, time.Minute)
			var cps api.CheckpointList
			wait.Eventually(t, time.Minute, func() bool {
				must(t, c.Do(ctx, http.MethodGet, host+"/checkpoints", nil, &cps))
				return len(cps.Items) > 0
			}, "a checkpoint of the parked host")
			cp := cps.Items[0]
			versionOK := cp.ProviderVersion == exe.Version
			if p.versionWithin {
				versionOK = cp.ProviderVersion != "" && strings.Contains(exe.Version, cp.ProviderVersion)
			}
			if len(cp.Sessions) != 1 || cp.Sessions[0].ProviderSessionID != thread || !versionOK {
				t.Fatalf("checkpoint %+v (session %s, %s %s)", cp, thread, p.name, exe.Version)
			}
			// The host's state is lost: the next wake restores it from the checkpoint.
			if err := os.RemoveAll(filepath.Join(home, "runtime-hosts", session.String(), "provider-state", p.stateDir)); err != nil {
				t.Fatal(err)
			}
			before := len(model.Requests())
			awaitReply(t, c, postText(t, c, room.ID, "what was the number?"), 2*time.Minute)
			if s := getSession(t, c, session); s.ProviderSessionID != thread {
				t.Fatalf("woke on session %q, bound %q", s.ProviderSessionID, thread)
			}
			if reqs := model.Requests()[before:]; len(reqs) == 0 || !strings.Contains(reqs[0].AllText(), "remember the number 42") {
				t.Fatal("the restored session's request does not hold the first turn")
			}
			var cont api.ContinuityBody
			must(t, c.Do(ctx, http.MethodGet, host+"/continuity", nil, &cont))
			if len(cont.Sessions) != 1 || cont.Sessions[0].LastResume == nil || cont.Sessions[0].LastResume.Outcome != domain.ResumeSucceeded {
				t.Fatalf("continuity after the restore %+v", cont.ContinuityReportBody)
			}
		})
	}
}

// The production shape: the worker is SIGKILLed while the CLI streams its answer; a new
// worker under the same node name resumes the provider session and the message is answered
// exactly once.
func TestProvidersTurnCutByAKilledWorkerIsAnsweredExactlyOnce(t *testing.T) {
	t.Parallel()
	for _, p := range e2eProviders {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			realagent.Require(t, p.name)
			model := codexModel(t)
			prod := startProductionServer(t, p.name+"-crash-token")
			c := prod.client
			workerEnv := append(append(prod.base, "JAM_HOME="+filepath.Join(t.TempDir(), "node-w1")),
				ownedEnv(t, t.TempDir(), p.env(t, model)...)...)
			worker := startJam(t, workerEnv, "worker", "--node", "w1")
			agent := codexAgent(t, c, p.name, p.template(model, ""))
			room, session := roomWith(t, c, "lab", agent)

			// A first answer binds the provider session; the second is cut by the kill.
			awaitReply(t, c, postText(t, c, room.ID, "hello"), 2*time.Minute)
			m := postText(t, c, room.ID, slowMarker+" a long answer")
			wait.Eventually(t, 2*time.Minute, func() bool {
				s := getSession(t, c, session)
				reqs := model.Requests()
				return s.Runtime != nil && s.Runtime.InTurn && strings.Contains(reqs[len(reqs)-1].AllText(), "a long answer")
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
		})
	}
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
