package sandbox_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/sandbox"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

func TestGuestEnvRefusesCustodyKeysAndBareSecrets(t *testing.T) {
	cases := []struct {
		pair string
		ok   bool
	}{
		{"EDITOR=vim", true},
		{"OPENAI_API_KEY=" + sandbox.ProxySentinel, true},
		{"GITHUB_TOKEN=" + sandbox.ProxySentinel, true},
		// A custody key is refused whatever its value, even the sentinel.
		{"JAM_AGENT_KEY=" + sandbox.ProxySentinel, false},
		{"JAM_AGENT_KEY_PROD=x", false},
		{"jam_api_token=x", false},
		{"JAM_TOKEN_2=abc", false},
		{"OPENAI_API_KEY=sk-live-123", false},
		{"DB_PASSWORD=hunter2", false},
		{"MY_SECRET=x", false},
		{"NOT A NAME=x", false},
		{"NOVALUE", false},
		{"MULTI=a\nb", false},
	}
	for _, c := range cases {
		err := sandbox.ValidateEnv([]string{c.pair})
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, sandbox.ErrEnvRefused)) {
			t.Errorf("%q: %v, want ok=%v", c.pair, err, c.ok)
		}
	}
	host := map[string]string{"EDITOR": "vim", "LANG": "C.UTF-8", "JAM_AGENT_KEY": "k"}
	lookup := func(k string) (string, bool) { v, ok := host[k]; return v, ok }
	file, explicit, err := sandbox.GuestEnv([]string{"EDITOR", "LANG", "UNSET"}, lookup, []string{"CODEX_HOME=/data/p/codex"})
	if err != nil || strings.Join(file, ",") != "EDITOR=vim,LANG=C.UTF-8" || explicit[0] != "CODEX_HOME=/data/p/codex" {
		t.Fatalf("guest env %v %v %v", file, explicit, err)
	}
	if _, _, err := sandbox.GuestEnv([]string{"JAM_AGENT_KEY"}, lookup, nil); !errors.Is(err, sandbox.ErrEnvRefused) {
		t.Fatalf("an allowlisted custody key: %v", err)
	}
}

// The env file reaches the provider through the real exec prefix and is gone once released.
func TestTheEnvFileIsPrivateAndGoneAfterSpawn(t *testing.T) {
	ctx := context.Background()
	d := newDriver(t, "")
	name := sandbox.DeriveName("jam", uuid.New(), uuid.New())
	if err := d.Create(ctx, sandbox.CreateSpec{Name: name, Agent: "shell"}); err != nil {
		t.Fatal(err)
	}
	ef, err := sandbox.WriteEnvFile(t.TempDir(), []string{"GREETING=hello"})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(ef.Path()); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("env file mode %v %v", st.Mode().Perm(), err)
	}
	argv, err := d.ExecArgs(name, "", ef.Path(), nil, []string{"sh", "-c", `read line; echo "$GREETING $line"`})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = d.Env
	stdin, _ := cmd.StdinPipe()
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The provider has started (and read the file); the file goes before it is used further.
	wait.Eventually(t, 10*time.Second, func() bool { return processReadFile(cmd.Process.Pid) }, "the provider to read its env file")
	ef.Release()
	ef.Release()
	if _, err := os.Stat(ef.Path()); !os.IsNotExist(err) {
		t.Fatalf("env file still there: %v", err)
	}
	stdin.Write([]byte("world\n"))
	stdin.Close()
	if err := cmd.Wait(); err != nil || strings.TrimSpace(out.String()) != "hello world" {
		t.Fatalf("provider said %q: %v", out.String(), err)
	}
	if _, err := sandbox.WriteEnvFile(t.TempDir(), []string{"JAM_AGENT_KEY=x"}); !errors.Is(err, sandbox.ErrEnvRefused) {
		t.Fatalf("a custody key written to an env file: %v", err)
	}
}

// processReadFile reports whether the fake sbx (pid) has started its command: it reads the
// env file before it starts the child, so a child means the file was consumed.
func processReadFile(pid int) bool {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			return true
		}
	}
	return false
}

func TestTheSbxClientRunsWithoutCredentials(t *testing.T) {
	got := sandbox.HostEnv([]string{"PATH=/bin", "HOME=/root", "DOCKER_HOST=unix:///x", "JAM_AGENT_KEY_2=k",
		"OPENAI_API_KEY=sk", "JAM_API_TOKEN=t", "GITHUB_TOKEN=g"})
	if want := []string{"PATH=/bin", "HOME=/root", "DOCKER_HOST=unix:///x"}; !slices.Equal(got, want) {
		t.Fatalf("host env %v, want %v", got, want)
	}
}
