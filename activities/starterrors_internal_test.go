package activities

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/provider/acp"
	"github.com/jam-dev/jam/internal/provider/claudecode"
	"github.com/jam-dev/jam/internal/provider/codex"
	"github.com/jam-dev/jam/internal/provider/copilot"
	"github.com/jam-dev/jam/internal/testsupport/realagent"
	"github.com/jam-dev/jam/internal/testsupport/testagent"
)

// retryable is the expected class of a start that another attempt may fix as it is.
const retryable domain.ErrorType = ""

// fakeProviders are scripts that start like a provider CLI and then misbehave.
var fakeProviders = map[string]string{
	// Exits before it says anything.
	"exits": "#!/bin/sh\nexit 3\n",
	// Starts and never speaks.
	"silent": "#!/bin/sh\nexec sleep 30\n",
	// Answers ACP initialize with a protocol version Jam does not speak.
	"acp-protocol-99": "#!/bin/sh\nread -r line\nid=$(printf '%s' \"$line\" | sed -n 's/.*\"id\":\\([0-9]*\\).*/\\1/p')\n" +
		"printf '{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"protocolVersion\":99,\"agentCapabilities\":{}}}\\n' \"$id\"\nexec sleep 30\n",
	// Answers the Copilot SDK's connect (Content-Length framed) with protocol 2.
	"copilot-protocol-2": "#!/bin/bash\nlen=0\nwhile IFS= read -r line; do line=${line%$'\\r'}; [ -z \"$line\" ] && break\n" +
		"case \"$line\" in Content-Length:*) len=${line#Content-Length: };; esac; done\nbody=$(head -c \"$len\")\n" +
		"id=$(printf '%s' \"$body\" | sed -n 's/.*\"id\":\\([0-9]*\\).*/\\1/p')\n" +
		"resp=$(printf '{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"protocolVersion\":2,\"version\":\"0.0.1\"}}' \"$id\")\n" +
		"printf 'Content-Length: %d\\r\\n\\r\\n%s' \"${#resp}\" \"$resp\"\nexec sleep 30\n",
}

// Issue 43: a start error retrying cannot fix was retried forever, silently. Every error
// each adapter's Prepare returns (driven by the real adapter against the real CLI, a fake
// that misbehaves the same way, or a missing one) is classified: retryable, or the type its
// session is held failed under.
func TestEveryPrepareErrorIsClassified(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Written once, before any case runs: a script written while a parallel case execs it
	// is "text file busy".
	for name, script := range fakeProviders {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fake := func(name string) string { return filepath.Join(dir, name) }
	notExecutable := filepath.Join(dir, "not-executable")
	if err := os.WriteFile(notExecutable, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	adapters := []struct {
		name      string
		factory   provider.Factory
		transport domain.Transport
	}{
		{"acp", acp.New, domain.TransportACP},
		{"codex", codex.New, domain.TransportCodexAppServer},
		{"claudecode", claudecode.New, domain.TransportClaudeCodeCLI},
		{"copilot", copilot.New, domain.TransportCopilotSDK},
	}
	type startCase struct {
		adapter string
		name    string
		// exe is the executable (a fake's name, a path, or a real CLI's resolved path).
		exe      func(t *testing.T) string
		edit     func(s *provider.Spec)
		cancel   bool
		want     domain.ErrorType
		needsCLI string
	}
	var cases []startCase
	for _, a := range adapters {
		cases = append(cases,
			startCase{adapter: a.name, name: "a missing executable", exe: func(*testing.T) string { return filepath.Join(dir, "nowhere") },
				want: domain.ErrTypeExecutableRefused},
			startCase{adapter: a.name, name: "an executable without the execute bit", exe: func(*testing.T) string { return notExecutable },
				want: domain.ErrTypeExecutableRefused},
			startCase{adapter: a.name, name: "it exits before its handshake", exe: func(*testing.T) string { return fake("exits") },
				want: domain.ErrTypeStartFailed},
			startCase{adapter: a.name, name: "it never answers its handshake", exe: func(*testing.T) string { return fake("silent") },
				want: domain.ErrTypeNotReady},
			startCase{adapter: a.name, name: "no working directory", exe: func(*testing.T) string { return fake("silent") },
				edit: func(s *provider.Spec) { s.Dir = "" }, want: domain.ErrTypeValidation},
			startCase{adapter: a.name, name: "the attempt was cancelled", exe: func(*testing.T) string { return fake("silent") },
				cancel: true, want: retryable},
		)
	}
	real := func(command string) func(t *testing.T) string {
		return func(t *testing.T) string { return realagent.Require(t, command).Path }
	}
	// A real CLI's start takes seconds, more under the race detector beside other tests; the
	// fakes' 2 s bound is for the cases that test the bound itself.
	const realReady = time.Minute
	cases = append(cases,
		startCase{adapter: "acp", name: "another ACP protocol version", exe: func(*testing.T) string { return fake("acp-protocol-99") },
			want: domain.ErrTypeExecutableRefused},
		startCase{adapter: "acp", name: "the bound session cannot be loaded", exe: func(t *testing.T) string { return testagent.Binary(t) },
			edit: func(s *provider.Spec) {
				s.ProviderSessionID, s.Args = "sess_gone", []string{"--state-dir", t.TempDir()}
				s.ReadyTimeout = realReady
			}, want: domain.ErrTypeExactResume},
		startCase{adapter: "codex", name: "the bound thread cannot be resumed", exe: real("codex"),
			edit: func(s *provider.Spec) {
				s.ProviderSessionID, s.Args = uuid.NewString(), []string{"app-server"}
				s.ReadyTimeout = realReady
				s.Env = append(s.Env, "CODEX_HOME="+t.TempDir())
			}, want: domain.ErrTypeExactResume},
		startCase{adapter: "claudecode", name: "the bound session has no transcript", exe: real("claude"),
			edit: func(s *provider.Spec) { s.ProviderSessionID, s.ReadyTimeout = uuid.NewString(), realReady }, want: domain.ErrTypeExactResume},
		startCase{adapter: "claudecode", name: "an argument Jam sets itself", exe: real("claude"),
			edit: func(s *provider.Spec) { s.Args, s.ReadyTimeout = []string{"--resume", "x"}, realReady }, want: domain.ErrTypeValidation},
		startCase{adapter: "copilot", name: "another SDK protocol version", exe: func(*testing.T) string { return fake("copilot-protocol-2") },
			want: domain.ErrTypeExecutableRefused},
		startCase{adapter: "copilot", name: "the model provider's key variable is unset", exe: func(*testing.T) string { return fake("silent") },
			edit: func(s *provider.Spec) {
				s.Settings = map[string]string{domain.SettingKeyProviderBaseURL: "http://127.0.0.1:9/v1", domain.SettingKeyProviderEnvKey: "STUB_KEY"}
			}, want: domain.ErrTypeCredentialMissing},
		startCase{adapter: "copilot", name: "the bound session cannot be resumed", exe: real("copilot"),
			edit: func(s *provider.Spec) {
				s.ProviderSessionID, s.Args = uuid.NewString(), []string{"--headless", "--no-auto-update", "--stdio"}
				s.ReadyTimeout = realReady
				s.Env = append(s.Env, "COPILOT_HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir())
			}, want: domain.ErrTypeExactResume},
	)
	factories := map[string]struct {
		f provider.Factory
		t domain.Transport
	}{}
	for _, a := range adapters {
		factories[a.name] = struct {
			f provider.Factory
			t domain.Transport
		}{a.factory, a.transport}
	}
	for _, c := range cases {
		t.Run(c.adapter+"/"+c.name, func(t *testing.T) {
			t.Parallel()
			a := factories[c.adapter]
			home := t.TempDir()
			spec := provider.Spec{RuntimeSession: uuid.New(), Generation: 1, AgentID: uuid.New(), RoomID: uuid.New(),
				Transport: a.t, Executable: c.exe(t), Dir: t.TempDir(), StateDir: t.TempDir(), ReadyTimeout: 2 * time.Second,
				Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}}
			if c.edit != nil {
				c.edit(&spec)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if c.cancel {
				cancel()
			}
			err := prepareOnce(ctx, a.f, spec)
			if err == nil {
				t.Fatal("the start succeeded")
			}
			row, _ := domain.LookupTransport(a.t)
			got := startFailure(ctx, err, row, domain.HostSession{RuntimeSessionID: spec.RuntimeSession, Config: domain.TemplateConfig{Transport: a.t}}, "n1")
			cls, _, ok := contract.Classify(got)
			switch {
			case c.want == retryable && ok:
				t.Fatalf("%v: classified %s, want a plain retryable error", err, cls.Type)
			case c.want != retryable && (!ok || cls.Type != c.want):
				t.Fatalf("%v: classified %+v (%v), want %s", err, cls.Type, ok, c.want)
			case c.want != retryable && cls.Retryable != (c.want == domain.ErrTypeStartFailed):
				t.Fatalf("%s retryable %v", cls.Type, cls.Retryable)
			}
		})
	}

	// Before any adapter runs: the activity's own checks.
	codexRow, _ := domain.LookupTransport(domain.TransportCodexAppServer)
	keyed := domain.TemplateConfig{Transport: domain.TransportCodexAppServer, Settings: map[string]string{
		domain.SettingKeyProviderBaseURL: "http://127.0.0.1:9/v1", domain.SettingKeyProviderEnvKey: "STUB_KEY"}}
	for _, c := range []struct {
		name string
		err  error
		want domain.ErrorType
	}{
		{"the key variable is not in the provider's environment", missingKey(codexRow, keyed, []string{"PATH=/bin"}), domain.ErrTypeCredentialMissing},
		{"the key variable is empty", missingKey(codexRow, keyed, []string{"STUB_KEY="}), domain.ErrTypeCredentialMissing},
		{"no adapter on this node", provider.ErrNoAdapter, domain.ErrTypeAdapterMissing},
		{"the node is shutting down", provider.ErrShuttingDown, retryable},
	} {
		if c.err == nil {
			t.Fatalf("%s: no error", c.name)
		}
		got := startFailure(context.Background(), c.err, codexRow, domain.HostSession{Config: keyed}, "n1")
		cls, _, ok := contract.Classify(got)
		if (c.want == retryable) == ok || (ok && cls.Type != c.want) {
			t.Errorf("%s: classified %+v (%v), want %q", c.name, cls.Type, ok, c.want)
		}
	}
	if err := missingKey(codexRow, keyed, []string{"STUB_KEY=set"}); err != nil {
		t.Errorf("a set key variable refused: %v", err)
	}
}

// prepareOnce builds and prepares a runtime as the node's registry does, tearing down what
// started.
func prepareOnce(ctx context.Context, f provider.Factory, spec provider.Spec) error {
	rt, err := f(spec)
	if err != nil {
		return err
	}
	defer func() { _ = rt.Teardown(context.WithoutCancel(ctx), domain.CheckpointBeforeStop) }()
	_, err = rt.Prepare(ctx)
	return err
}
