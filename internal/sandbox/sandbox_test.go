package sandbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/sandbox"
	"github.com/jam-dev/jam/internal/testsupport/fakesbx"
)

func TestParseListAcceptsTheShapesOfEveryRelease(t *testing.T) {
	cases := []struct {
		name, out string
		want      []string
		err       bool
	}{
		{"v0.38 object", `{"sandboxes":[{"name":"a","id":"1","agent":"codex","status":"running","workspaces":["/w"],"ports":[]}]}`, []string{"a"}, false},
		{"bare array of older builds", `[{"name":"a","agent":"codex","status":"stopped"},{"name":"b","agent":"shell","status":"running"}]`, []string{"a", "b"}, false},
		{"notice lines before the JSON", "A new version is available.\nRun sbx upgrade.\n" + `{"sandboxes":[{"name":"x","agent":"claude","status":"running"}]}`, []string{"x"}, false},
		{"no id (v0.32)", `{"sandboxes":[{"name":"x","agent":"claude","status":"running","workspace_missing":false}]}`, []string{"x"}, false},
		{"empty output", "", nil, false},
		{"no sandboxes", `{"sandboxes":[]}`, nil, false},
		{"not JSON", "SANDBOX AGENT STATUS\n", nil, true},
		{"truncated JSON", `{"sandboxes":[{"name":`, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := sandbox.ParseList([]byte(c.out))
			if c.err {
				if !errors.Is(err, sandbox.ErrUnparsable) {
					t.Fatalf("err %v, want ErrUnparsable", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, s := range got {
				names = append(names, s.Name)
			}
			if strings.Join(names, ",") != strings.Join(c.want, ",") {
				t.Fatalf("names %v, want %v", names, c.want)
			}
		})
	}
}

func TestParseVersionFindsTheReleaseInAnyBanner(t *testing.T) {
	for out, want := range map[string]string{
		"sbx version v0.38.0 (abc123)\n": "0.38.0",
		"Version: 0.31.2\nGo: go1.24":    "0.31.2",
		"sbx 1.0.0":                      "1.0.0",
	} {
		v, err := sandbox.ParseVersion([]byte(out))
		if err != nil || v.String() != want {
			t.Errorf("%q: %v %v, want %s", out, v, err, want)
		}
	}
	if _, err := sandbox.ParseVersion([]byte("unknown command")); err == nil {
		t.Error("a banner without a version parsed")
	}
}

func TestDeriveNameIsStableBoundedAndOwnedOnlyByUUIDs(t *testing.T) {
	agent, host := uuid.New(), uuid.New()
	a := sandbox.DeriveName("Jam Codex!!", agent, host)
	if a != sandbox.DeriveName("Jam Codex!!", agent, host) || sandbox.ValidateName(a) != nil {
		t.Fatalf("name %q not stable or not valid", a)
	}
	if !strings.HasPrefix(a, "jam-codex-") || len(a) != len("jam-codex-")+16 {
		t.Fatalf("name %q", a)
	}
	if b := sandbox.DeriveName("jam-codex", agent, uuid.New()); b == a {
		t.Fatal("two owners share a name")
	}
	long := sandbox.DeriveName(strings.Repeat("room name ", 20), agent, host)
	if len(long) > sandbox.MaxNameLen || sandbox.ValidateName(long) != nil {
		t.Fatalf("long prefix gave %q (%d)", long, len(long))
	}
	if n := sandbox.DeriveName("¡¡¡", agent, host); sandbox.ValidateName(n) != nil || !strings.HasPrefix(n, "jam-") {
		t.Fatalf("unusable prefix gave %q", n)
	}
	for _, bad := range []string{"", "-x", "a b", "A", "x;rm -rf /", strings.Repeat("a", 64)} {
		if sandbox.ValidateName(bad) == nil {
			t.Errorf("%q accepted as a sandbox name", bad)
		}
	}
}

func newDriver(t *testing.T, fail string, extra ...string) *sandbox.Driver {
	return &sandbox.Driver{Path: fakesbx.Binary(t), Env: fakesbx.Env(t, fail, extra...)}
}

// The real driver against the fake `sbx`: create, list, the owner nonce over stdin, a
// provider command through the exec prefix, stop, remove.
func TestDriverRunsASandboxLifecycle(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t, "noise")
	if v, err := d.ProbeVersion(ctx); err != nil || v.String() != "0.38.0" {
		t.Fatalf("version %v %v", v, err)
	}
	name := sandbox.DeriveName("jam", uuid.New(), uuid.New())
	ws := t.TempDir()
	if err := d.Create(ctx, sandbox.CreateSpec{Name: name, Agent: "shell", Workspace: ws}); err != nil {
		t.Fatal(err)
	}
	list, err := d.List(ctx)
	if err != nil || len(list) != 1 || list[0].Name != name || list[0].Status != domain.SandboxRunning || list[0].Workspaces[0] != ws {
		t.Fatalf("list %+v %v", list, err)
	}
	doc, _ := json.Marshal(sandbox.GuestMarker{Name: name, Nonce: "n-1"})
	if err := d.WriteGuestNonce(ctx, name, doc); err != nil {
		t.Fatal(err)
	}
	got, err := d.ReadGuestNonce(ctx, name)
	if err != nil || strings.TrimSpace(string(got)) != string(doc) {
		t.Fatalf("guest nonce %q %v", got, err)
	}

	// The exec prefix runs a provider with the env file's values and explicit --env pairs.
	envFile := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(envFile, []byte("FROM_FILE=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	argv, err := d.ExecArgs(name, ws, envFile, []string{"EXPLICIT=2"}, []string{"sh", "-c", `echo "$FROM_FILE$EXPLICIT $(pwd)"`})
	if err != nil {
		t.Fatal(err)
	}
	out, err := runArgv(d, argv)
	if err != nil || strings.TrimSpace(out) != "12 "+ws {
		t.Fatalf("exec %q %v", out, err)
	}

	if err := d.Stop(ctx, name); err != nil {
		t.Fatal(err)
	}
	if list, _ := d.List(ctx); list[0].Status != domain.SandboxStopped {
		t.Fatalf("after stop %+v", list)
	}
	if err := d.Remove(ctx, name); err != nil {
		t.Fatal(err)
	}
	if list, _ := d.List(ctx); len(list) != 0 {
		t.Fatalf("after rm %+v", list)
	}
	var ce *sandbox.CommandError
	if err := d.Stop(ctx, name); !errors.As(err, &ce) || ce.ExitCode == 0 {
		t.Fatalf("stop of a removed sandbox: %v", err)
	}
	if err := d.Stop(ctx, "Not;A;Name"); err == nil {
		t.Fatal("an invalid name reached sbx")
	}
}

func TestACommandPastItsBoundIsKilled(t *testing.T) {
	d := newDriver(t, "", "FAKESBX_SLOW_CREATE=30")
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	err := d.Create(ctx, sandbox.CreateSpec{Name: "jam-0123456789abcdef", Agent: "shell"})
	if !errors.Is(err, sandbox.ErrTimeout) || time.Since(start) > 5*time.Second {
		t.Fatalf("slow create: %v after %s", err, time.Since(start))
	}
}

func TestSupportProbeClassifiesWithoutFailing(t *testing.T) {
	bin := fakesbx.Binary(t)
	cases := []struct {
		name     string
		explicit string
		path     string
		env      []string
		want     domain.SandboxSupport
	}{
		{"ok", bin, "", fakesbx.Env(t, ""), domain.SandboxSupported},
		{"found on PATH", "", filepath.Dir(bin), fakesbx.Env(t, ""), domain.SandboxSupported},
		{"absent", "", t.TempDir(), nil, domain.SandboxAbsent},
		{"explicit path missing", "/nonexistent/sbx", "", nil, domain.SandboxAbsent},
		{"too old", bin, "", fakesbx.Env(t, "", "FAKESBX_VERSION=0.20.1"), domain.SandboxTooOld},
		{"daemon down", bin, "", fakesbx.Env(t, "daemon"), domain.SandboxDaemonDown},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			s := sandbox.Probe(context.Background(), c.explicit, c.path, c.env)
			if s.Status != c.want || time.Since(start) > sandbox.ReadOnlyTimeout {
				t.Fatalf("support %+v after %s, want %s", s, time.Since(start), c.want)
			}
			if c.want != domain.SandboxSupported && s.Detail == "" {
				t.Fatal("no reason given")
			}
		})
	}
}

func TestOwnerMarkersAreProofOfOwnership(t *testing.T) {
	agent, host := uuid.New(), uuid.New()
	plan := sandbox.Plan{Owner: sandbox.OwnerKey{Kind: sandbox.OwnerRuntimeHost, AgentID: agent, ID: host},
		Name: sandbox.DeriveName("jam", agent, host), Agent: "codex", Workspace: "/data/runtime-hosts/x/workspace-root",
		ConfigurationSource: "jam_managed"}
	m := sandbox.Markers{Dir: filepath.Join(t.TempDir(), "cfg", "sandbox-owners")}
	nonce, err := sandbox.NewNonce()
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Write(sandbox.Marker{Plan: plan, Nonce: nonce, MCPDigest: "d1"}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(m.Dir, plan.Name+".json"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("marker mode %v %v", st.Mode().Perm(), err)
	}
	mk, err := m.Read(plan.Name)
	if err != nil {
		t.Fatal(err)
	}
	guest, _ := json.Marshal(sandbox.GuestMarker{Name: plan.Name, Nonce: nonce})
	if match, err := sandbox.VerifyReuse(mk, plan, "d1", guest); err != nil || match != sandbox.MatchExact {
		t.Fatalf("reuse of the exact sandbox: %v %v", match, err)
	}
	other := plan
	other.Workspace = "/elsewhere"
	wrong, _ := json.Marshal(sandbox.GuestMarker{Name: plan.Name, Nonce: "forged"})
	for name, err := range map[string]error{
		"another plan":       second(sandbox.VerifyCleanup(mk, other, guest)),
		"a forged nonce":     second(sandbox.VerifyCleanup(mk, plan, wrong)),
		"no nonce":           second(sandbox.VerifyCleanup(mk, plan, nil)),
		"other MCP on reuse": second(sandbox.VerifyReuse(mk, plan, "d2", guest)),
	} {
		if !errors.Is(err, sandbox.ErrOwnershipMismatch) {
			t.Errorf("%s: %v, want ownership mismatch", name, err)
		}
	}
	// Cleanup ignores the MCP digest, so older markers stay removable.
	if _, err := sandbox.VerifyCleanup(mk, plan, guest); err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	// The legacy per-session owner matches only the Dedicated host named after its session.
	legacy := plan
	legacy.Owner.Kind = sandbox.OwnerRuntimeSession
	if got := sandbox.Compare(legacy, plan); got != sandbox.MatchDedicatedSessionCompatibility {
		t.Fatalf("legacy owner of the same UUID: %v", got)
	}
	legacy.Owner.ID = uuid.New()
	if got := sandbox.Compare(legacy, plan); got != sandbox.MatchNone {
		t.Fatalf("legacy owner of another UUID: %v", got)
	}
	if err := m.Remove(plan.Name); err != nil || m.Remove(plan.Name) != nil {
		t.Fatalf("remove twice: %v", err)
	}
	if _, err := m.Read(plan.Name); !errors.Is(err, sandbox.ErrNoMarker) {
		t.Fatalf("read after remove: %v", err)
	}
}

func second[T any](_ T, err error) error { return err }

func runArgv(d *sandbox.Driver, argv []string) (string, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = d.Env
	out, err := cmd.Output()
	return string(out), err
}
