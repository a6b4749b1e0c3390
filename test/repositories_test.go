package test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/fakesbx"
	"github.com/jam-dev/jam/internal/testsupport/testagent"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// gitServer is `git daemon` serving bare repositories under root on 127.0.0.1, pushes
// allowed.
type gitServer struct {
	root string
	port int
}

func startGitServer(t *testing.T) gitServer {
	t.Helper()
	root := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("git", "daemon", "--reuseaddr", "--base-path="+root, "--export-all", "--enable=receive-pack",
		"--listen=127.0.0.1", fmt.Sprintf("--port=%d", port), root)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start git daemon: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	wait.Eventually(t, 10*time.Second, func() error {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
		}
		return err
	}, "git daemon to listen")
	return gitServer{root: root, port: port}
}

// bare creates a served bare repository holding one commit on main.
func (g gitServer) bare(t *testing.T, name string) string {
	t.Helper()
	src := t.TempDir()
	runGit(t, src, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(src, "README.md"), []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	runGit(t, src, "add", "README.md")
	runGit(t, src, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "first")
	bare := filepath.Join(g.root, name)
	runGit(t, g.root, "clone", "-q", "--bare", src, bare)
	return fmt.Sprintf("git://127.0.0.1:%d/%s", g.port, name)
}

func runGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func repoOp(c *client.Client, ws uuid.UUID, action string, req api.RepositoryRequest) (api.WorkspaceOpBody, error) {
	var out api.WorkspaceOpBody
	err := c.Operation(context.Background(), http.MethodPost, "/v1/workspaces/"+ws.String()+"/repositories/"+action, req, &out, nil)
	return out, err
}

// fakeGH writes a gh stand-in that records its argv and stdin and answers like gh does:
// no pull request for view, a URL for create, a checks table for checks.
func fakeGH(t *testing.T) (dir, log string) {
	t.Helper()
	dir = t.TempDir()
	log = filepath.Join(t.TempDir(), "gh.log")
	script := `#!/bin/sh
{ printf 'argv:'; for a in "$@"; do printf ' [%s]' "$a"; done; printf '\n'; } >> ` + log + `
case "$1 $2" in
"pr view") echo "no pull requests found for branch" >&2; exit 1 ;;
"pr create") printf 'stdin: %s\n' "$(cat)" >> ` + log + `; echo "https://github.invalid/o/r/pull/7" ;;
"pr checks") echo '[{"name":"build","state":"SUCCESS","bucket":"pass","link":"https://ci.invalid/1"},{"name":"lint","state":"IN_PROGRESS","bucket":"pending","link":""}]'; exit 8 ;;
"--version ") echo "gh version 2.99.0 (fake)" ;;
"auth status") echo "github.com: logged in through the sandbox's proxy" ;;
"api --method=GET") case "$4" in repos/o/r) echo '{"full_name":"o/r"}' ;; *) echo "gh: Not Found (HTTP 404)" >&2; exit 1 ;; esac ;;
*) echo "unexpected gh $*" >&2; exit 2 ;;
esac
`
	if err := os.WriteFile(filepath.Join(dir, "gh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, log
}

// The repository operations through the public API, in a sandboxed workspace (fake sbx
// running real git in the fake guest): clone from a git daemon, branch, commit and push
// back — the served repository has the branch and the agent's commit; a pull request and
// its checks go through gh in the guest; hostile inputs are refused with 4xx before
// anything is recorded or run.
func TestRepositoryOperationsCloneBranchCommitAndPushFromASandboxedWorkspace(t *testing.T) {
	t.Parallel()
	g := startGitServer(t)
	url := g.bare(t, "project.git")
	ghDir, ghLog := fakeGH(t)
	e := sandboxEnv{home: filepath.Join(t.TempDir(), "jam-home"), state: t.TempDir(),
		log: filepath.Join(t.TempDir(), "sbx.log"), agentState: t.TempDir()}
	e.d = startDevEnv(t, e.home, ownedEnv(t, e.agentState, "JAM_SBX="+fakesbx.Binary(t),
		"FAKESBX_STATE="+e.state, "FAKESBX_LOG="+e.log, "TEST_GUEST_VALUE=from-the-host",
		"PATH="+ghDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		// The fake guest is this machine: it reaches the node's tools as 127.0.0.1.
		"JAM_MCP_GUEST_HOST=127.0.0.1", "FAKESBX_STORED_SERVICES=global:github"))
	c := e.d.client
	agent := sandboxedAgent(t, c, "gitter", domain.PlacementDedicated)

	// A Docker environment configuration source is refused at save (422), not silently run
	// as a plain sbx create that ignores the operator's files.
	envTmpl := domain.TemplateConfig{Alias: "default", Transport: domain.TransportCursorACP, Command: "/bin/true", Args: []string{},
		Sandbox: domain.SandboxConfig{Enabled: true, ConfigurationSource: domain.ConfigDockerEnvironment, Files: []string{"/etc/jam/dev.sbxenv"}}}
	err := c.Do(context.Background(), http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "envy", Kind: domain.AgentOwned, Template: &envTmpl}, nil)
	var refusal *client.Error
	if !errors.As(err, &refusal) || refusal.Status != http.StatusUnprocessableEntity || !strings.Contains(refusal.Body.Message, "docker_environment") {
		t.Fatalf("a docker_environment template: %v", err)
	}
	room, session := roomWith(t, c, "repo-lab", agent)
	awaitReply(t, c, postText(t, c, room.ID, "hello"), 90*time.Second)

	// Hostile inputs: 400, nothing recorded, nothing run.
	before, _ := os.ReadFile(e.log)
	hostile := []struct {
		action string
		req    api.RepositoryRequest
	}{
		{"clone", api.RepositoryRequest{URL: "ext::sh -c touch% /tmp/pwned"}},
		{"clone", api.RepositoryRequest{URL: "-uhack"}},
		{"clone", api.RepositoryRequest{URL: "/etc"}},
		{"clone", api.RepositoryRequest{URL: "file:///etc"}},
		{"clone", api.RepositoryRequest{URL: url, Dir: "../escape"}},
		{"branch", api.RepositoryRequest{Dir: "project", Branch: ".."}},
		{"branch", api.RepositoryRequest{Dir: "project", Branch: "-d"}},
		{"branch", api.RepositoryRequest{Dir: "project", Branch: "a b"}},
		{"branch", api.RepositoryRequest{Dir: "project", Branch: "refs/../x"}},
		{"commit", api.RepositoryRequest{Dir: "project", Message: strings.Repeat("m", 1<<20)}},
		{"push", api.RepositoryRequest{Dir: "project", Remote: "--receive-pack=evil"}},
	}
	for _, h := range hostile {
		_, err := repoOp(c, session, h.action, h.req)
		var ae *client.Error
		if !errors.As(err, &ae) || ae.Status < 400 || ae.Status >= 500 {
			t.Fatalf("%s %+.80v: want a 4xx, got %v", h.action, h.req, err)
		}
	}
	if after, _ := os.ReadFile(e.log); string(after) != string(before) {
		t.Fatalf("a hostile request ran sbx:\n%s", strings.TrimPrefix(string(after), string(before)))
	}
	if ws := getWorkspace(t, c, session); len(ws.Operations) != 0 {
		t.Fatalf("a hostile request was recorded: %+v", ws.Operations)
	}

	cl, err := repoOp(c, session, "clone", api.RepositoryRequest{URL: url})
	if err != nil || cl.Repository == nil || cl.Repository.Dir != "project" || len(cl.Repository.Commit) != 40 || cl.Repository.Branch != "main" {
		t.Fatalf("clone %+v %v", cl, err)
	}
	live := workspacePath(e.home, session, session)
	if b, err := os.ReadFile(filepath.Join(live, "project", "README.md")); err != nil || string(b) != "hello\n" {
		t.Fatalf("the clone is not in the workspace: %q %v", b, err)
	}
	if !strings.Contains(mustRead(t, e.log), "exec -w "+live+" -e GIT_TERMINAL_PROMPT=0") {
		t.Fatalf("git did not run through sbx exec in the workspace:\n%s", mustRead(t, e.log))
	}
	if _, err := repoOp(c, session, "branch", api.RepositoryRequest{Dir: "project", Branch: "jam/feature"}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(live, "project", "work.txt"), []byte("the agent's work\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cm, err := repoOp(c, session, "commit", api.RepositoryRequest{Dir: "project", Message: "Add the agent's work\n\nWith a body."})
	if err != nil || cm.Repository == nil || cm.Repository.Branch != "jam/feature" || cm.Operation.ResultClass != domain.ResultCommitted {
		t.Fatalf("commit %+v %v", cm, err)
	}
	if _, err := repoOp(c, session, "commit", api.RepositoryRequest{Dir: "project", Message: "nothing changed"}); !isStatus(err, http.StatusUnprocessableEntity) {
		t.Fatalf("an empty commit: %v", err)
	}
	ps, err := repoOp(c, session, "push", api.RepositoryRequest{Dir: "project"})
	if err != nil || ps.Repository == nil || ps.Repository.Commit != cm.Repository.Commit {
		t.Fatalf("push %+v %v", ps, err)
	}
	bare := filepath.Join(g.root, "project.git")
	if got := runGit(t, bare, "rev-parse", "refs/heads/jam/feature"); got != cm.Repository.Commit {
		t.Fatalf("the served repository's jam/feature is %s, want %s", got, cm.Repository.Commit)
	}
	author := runGit(t, bare, "log", "-1", "--format=%an <%ae>|%B", "jam/feature")
	if !strings.HasPrefix(author, "gitter <"+agent.String()+"@agents.jam.invalid>|Add the agent's work") {
		t.Fatalf("commit author and message: %q", author)
	}

	pr, err := repoOp(c, session, "pull-request", api.RepositoryRequest{Dir: "project", Title: "-- not a flag", Body: "Why: because."})
	if err != nil || pr.Repository == nil || pr.Repository.PullRequestURL != "https://github.invalid/o/r/pull/7" {
		t.Fatalf("pull request %+v %v", pr, err)
	}
	ck, err := repoOp(c, session, "checks", api.RepositoryRequest{Dir: "project"})
	if err != nil || ck.Repository == nil || len(ck.Repository.Checks) != 2 || ck.Repository.Checks[0].Bucket != "pass" {
		t.Fatalf("checks %+v %v", ck, err)
	}
	gh := mustRead(t, ghLog)
	for _, want := range []string{"argv: [pr] [view] [--json=url,state] [--] [jam/feature]",
		"argv: [pr] [create] [--head=jam/feature] [--title=-- not a flag] [--body-file=-]", "stdin: Why: because.",
		"argv: [pr] [checks] [--json=name,state,bucket,link] [--] [jam/feature]"} {
		if !strings.Contains(gh, want) {
			t.Fatalf("gh was not run as %q:\n%s", want, gh)
		}
	}
	ws := getWorkspace(t, c, session)
	kinds := map[domain.WorkspaceOpKind]domain.WorkspaceOpState{}
	for _, op := range ws.Operations {
		if _, seen := kinds[op.Kind]; !seen {
			kinds[op.Kind] = op.State
		}
	}
	for _, k := range []domain.WorkspaceOpKind{domain.WorkspaceOpClone, domain.WorkspaceOpBranch, domain.WorkspaceOpPush,
		domain.WorkspaceOpPullRequest, domain.WorkspaceOpChecks} {
		if kinds[k] != domain.OpSucceeded {
			t.Fatalf("operation %s: %s (%+v)", k, kinds[k], ws.Operations)
		}
	}
	if ws.Operations[0].Kind != domain.WorkspaceOpChecks || kinds[domain.WorkspaceOpCommit] != domain.OpFailed {
		t.Fatalf("the newest commit operation (nothing to commit) should be failed: %+v", ws.Operations)
	}

	// GitHub readiness: read-only, bounded, per repository; a malformed name is a 400.
	var gr contract.GitHubReadiness
	must(t, c.Do(context.Background(), http.MethodGet, "/v1/workspaces/"+session.String()+"/github?repo=o/r&repo=o/missing", nil, &gr))
	if !gr.Available || !gr.Authenticated || gr.CredentialStored == nil || !*gr.CredentialStored || !strings.Contains(gr.GH, "2.99.0") ||
		len(gr.Repositories) != 2 || gr.Repositories[0].Status != domain.GitHubRepoOK || gr.Repositories[1].Status != domain.GitHubRepoNotFound {
		t.Fatalf("github readiness: %+v", gr)
	}
	if err := c.Do(context.Background(), http.MethodGet, "/v1/workspaces/"+session.String()+"/github?repo=-x/..", nil, nil); !isStatus(err, http.StatusBadRequest) {
		t.Fatalf("a malformed repository: %v", err)
	}

	// The agent reaches the same operations through its runtime tools, on its own workspace
	// only; a hostile argument is refused with model-safe text and runs nothing.
	toolURL := g.bare(t, "tooled.git")
	r := awaitReply(t, c, postText(t, c, room.ID, `[[call-tool jam_repo_clone {"url":"`+toolURL+`"}]] [[call-tool jam_repo_clone {"url":"ext::sh -c id"}]] clone it`), 90*time.Second)
	if !strings.Contains(r.Text, `Done: {"dir":"tooled"`) || !strings.Contains(r.Text, "tool error: Not run:") {
		t.Fatalf("the agent's clone through its tools: %q", r.Text)
	}
	if _, err := os.Stat(filepath.Join(live, "tooled", "README.md")); err != nil {
		t.Fatalf("the agent's clone is not in its workspace: %v", err)
	}
	if ws := getWorkspace(t, c, session); ws.Operations[0].Kind != domain.WorkspaceOpClone || ws.Operations[0].State != domain.OpSucceeded {
		t.Fatalf("the agent's clone operation: %+v", ws.Operations[0])
	}
}

// templateRepoAgent is a sandboxed agent whose template starts each room with repos.
func templateRepoAgent(t *testing.T, c *client.Client, name string, repos ...domain.TemplateRepository) uuid.UUID {
	t.Helper()
	placement := domain.PlacementDedicated
	tmpl := domain.TemplateConfig{Alias: "default", Transport: domain.TransportCursorACP, Command: testagent.Binary(t),
		Args: []string{}, EnvAllowlist: []string{"TEST_GUEST_VALUE"}, Placement: &placement,
		Sandbox: domain.SandboxConfig{Enabled: true}, Repositories: repos}
	var a api.AgentBody
	must(t, c.Do(context.Background(), http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: name, Kind: domain.AgentOwned, Template: &tmpl}, &a))
	return a.ID
}

// A template's repositories are cloned into the session workspace before the room's first
// turn, as clone operations; one that cannot be cloned is the session's clear error and
// the room gets no turn. A hostile template repository is refused at save.
func TestTemplateRepositoriesAreClonedBeforeTheFirstTurn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := startGitServer(t)
	url := g.bare(t, "seed.git")
	e := startSandboxDev(t)
	c := e.d.client
	var bad api.AgentBody
	placement := domain.PlacementDedicated
	hostileTmpl := domain.TemplateConfig{Alias: "default", Transport: domain.TransportCursorACP, Command: "/bin/true", Args: []string{},
		Placement: &placement, Sandbox: domain.SandboxConfig{Enabled: true}, Repositories: []domain.TemplateRepository{{URL: "ext::sh -c id"}}}
	if err := c.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "hostile", Kind: domain.AgentOwned, Template: &hostileTmpl}, &bad); !isStatus(err, http.StatusBadRequest) {
		t.Fatalf("a hostile template repository: %v", err)
	}

	agent := templateRepoAgent(t, c, "seeded", domain.TemplateRepository{URL: url, Dir: "app"})
	room, session := roomWith(t, c, "seeded-room", agent)
	awaitReply(t, c, postText(t, c, room.ID, "hello"), 90*time.Second)
	live := workspacePath(e.home, session, session)
	if b, err := os.ReadFile(filepath.Join(live, "app", "README.md")); err != nil || string(b) != "hello\n" {
		t.Fatalf("the template repository is not in the workspace: %q %v", b, err)
	}
	ws := getWorkspace(t, c, session)
	if len(ws.Operations) != 1 || ws.Operations[0].Kind != domain.WorkspaceOpClone || ws.Operations[0].State != domain.OpSucceeded {
		t.Fatalf("the template clone's operation: %+v", ws.Operations)
	}

	missing := templateRepoAgent(t, c, "unseeded", domain.TemplateRepository{URL: fmt.Sprintf("git://127.0.0.1:%d/absent.git", g.port)})
	room2, session2 := roomWith(t, c, "unseeded-room", missing)
	postText(t, c, room2.ID, "hello")
	var sb api.SessionBody
	wait.Eventually(t, 90*time.Second, func() error {
		must(t, c.Do(ctx, http.MethodGet, "/v1/sessions/"+session2.String(), nil, &sb))
		if sb.Failure == nil {
			return fmt.Errorf("no failure yet: phase %s", sb.Phase)
		}
		return nil
	}, "the session to report the failed clone")
	if !strings.Contains(sb.Failure.Reason, "absent") || !strings.Contains(sb.Failure.Reason, "could not be cloned") {
		t.Fatalf("the session's failure does not say which repository failed: %+v", sb.Failure)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A worker SIGKILLed while its push is in flight (the served repository's pre-receive hook
// holds it) leaves the push operation Failed and never replays it: the hook ran once. A new
// request then runs and the served repository has the branch.
func TestAWorkerKilledMidPushLeavesTheOperationFailedAndANewRequestRuns(t *testing.T) {
	t.Parallel()
	g := startGitServer(t)
	url := g.bare(t, "crash.git")
	bare := filepath.Join(g.root, "crash.git")
	hookLog, block := filepath.Join(t.TempDir(), "hook.log"), filepath.Join(t.TempDir(), "block")
	hook := "#!/bin/sh\necho push >> " + hookLog + "\ni=0\nwhile [ -e " + block + " ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done\nexit 0\n"
	if err := os.WriteFile(filepath.Join(bare, "hooks", "pre-receive"), []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	p := startProductionServer(t, "repo-crash-token")
	c := p.client
	home := filepath.Join(t.TempDir(), "node-w1")
	fw := faultWorker{fault: t.TempDir(), env: append(append(p.base, "JAM_HOME="+home, "FAKESBX_STATE="+t.TempDir()),
		ownedEnv(t, t.TempDir())...)}
	agent := sandboxedAgent(t, c, "pusher", domain.PlacementDedicated)
	w := fw.start(t, "")
	room, session := roomWith(t, c, "push-lab", agent)
	awaitReply(t, c, postText(t, c, room.ID, "hello"), 90*time.Second)
	if _, err := repoOp(c, session, "clone", api.RepositoryRequest{URL: url}); err != nil {
		t.Fatal(err)
	}
	live := workspacePath(home, session, session)
	if err := os.WriteFile(filepath.Join(live, "crash", "work.txt"), []byte("work\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := repoOp(c, session, "commit", api.RepositoryRequest{Dir: "crash", Message: "work"}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(block, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = repoOp(c, session, "push", api.RepositoryRequest{Dir: "crash"}) }()
	wait.Eventually(t, 60*time.Second, func() error {
		_, err := os.Stat(hookLog)
		return err
	}, "the push to reach the server")
	kill(t, w)
	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}
	w = fw.start(t, "")
	var failed domain.WorkspaceOperation
	wait.Eventually(t, 90*time.Second, func() error {
		ws := getWorkspace(t, c, session)
		if len(ws.Operations) > 0 && ws.Operations[0].Kind == domain.WorkspaceOpPush && ws.Operations[0].State.Terminal() {
			failed = ws.Operations[0]
			return nil
		}
		return fmt.Errorf("operations %+v", ws.Operations)
	}, "the interrupted push to be recorded")
	if failed.State != domain.OpFailed || failed.Error == "" {
		t.Fatalf("the interrupted push: %+v", failed)
	}
	if n := strings.Count(mustRead(t, hookLog), "push"); n != 1 {
		t.Fatalf("the push was replayed: the server saw %d pushes", n)
	}
	ps, err := repoOp(c, session, "push", api.RepositoryRequest{Dir: "crash"})
	if err != nil || ps.Operation == nil || ps.Operation.State != domain.OpSucceeded || ps.Operation.ID == failed.ID {
		t.Fatalf("a new push after the crash: %+v %v", ps, err)
	}
	if got := runGit(t, bare, "rev-parse", "refs/heads/main"); got != ps.Repository.Commit {
		t.Fatalf("the served main is %s, want %s", got, ps.Repository.Commit)
	}
	kill(t, w)
}
