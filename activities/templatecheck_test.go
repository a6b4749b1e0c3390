package activities

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/teststore"
)

// A template check names the allowlisted variables the worker lacks and says where the
// command resolves (or the candidates it tried), in the resolver's order, without running it.
func TestATemplateCheckJudgesTheWorkersEnvironmentAndCommandWithoutRunningIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := teststore.SQLite(t)
	bin, pinned, ran := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "ran")
	// Running it would leave a mark: the check must not.
	script := "#!/bin/sh\ntouch " + ran + "\necho 1.0.0\n"
	for _, p := range []string{filepath.Join(bin, "codex"), filepath.Join(pinned, "codex"), filepath.Join(bin, "jam-testagent")} {
		if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	plain := filepath.Join(bin, "plain")
	if err := os.WriteFile(plain, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	n := &Node{Name: "n1", Store: st, Env: []string{"PATH=" + bin, "SET=x", "EMPTY="}}
	check := func(in contract.TemplateCheckInput) contract.TemplateCheck {
		t.Helper()
		out, err := n.CheckTemplate(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	got := check(contract.TemplateCheckInput{Transport: domain.TransportCodexAppServer, Env: []string{"SET", "UNSET", "EMPTY"}})
	if got.Node != "n1" || !slices.Equal(got.MissingEnv, []string{"UNSET"}) || got.Command == nil ||
		got.Command.Path != filepath.Join(bin, "codex") || got.Command.Source != "path" || got.Command.Problem != "" {
		t.Fatalf("on PATH: %+v %+v", got, got.Command)
	}
	got = check(contract.TemplateCheckInput{Transport: domain.TransportCodexAppServer, Command: "/nonexistent/codex"})
	if c := got.Command; c.Path != "" || !strings.Contains(c.Problem, "/nonexistent/codex") || !strings.Contains(c.Problem, "does not exist") ||
		!strings.Contains(c.Problem, "--command") {
		t.Fatalf("explicit missing: %+v", c)
	}
	got = check(contract.TemplateCheckInput{Transport: domain.TransportCodexAppServer, Command: plain})
	if c := got.Command; !strings.Contains(c.Problem, "not executable") {
		t.Fatalf("explicit not executable: %+v", c)
	}
	got = check(contract.TemplateCheckInput{Transport: domain.TransportClaudeCodeCLI})
	if c := got.Command; c.Command != "claude" || !strings.Contains(c.Problem, "not found on PATH (1 directories searched)") ||
		!strings.Contains(c.Problem, "JAM_CLAUDE_BIN") {
		t.Fatalf("not on PATH: %+v", c)
	}
	// The pin table is consulted as a start would, before PATH.
	pins, _ := json.Marshal(map[string]string{"codex": filepath.Join(pinned, "codex")})
	if err := st.PutSetting(ctx, domain.SettingProviderExecutables, pins, time.Now()); err != nil {
		t.Fatal(err)
	}
	got = check(contract.TemplateCheckInput{Transport: domain.TransportCodexAppServer})
	if c := got.Command; c.Path != filepath.Join(pinned, "codex") || c.Source != "pin" {
		t.Fatalf("pinned: %+v", c)
	}
	// A sandboxed template's command is the guest's: only its variables are judged.
	got = check(contract.TemplateCheckInput{Transport: domain.TransportCodexAppServer, Command: "/in/guest", Env: []string{"UNSET"}, Sandboxed: true})
	if got.Command != nil || !slices.Equal(got.MissingEnv, []string{"UNSET"}) {
		t.Fatalf("sandboxed: %+v", got)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("the check ran a candidate")
	}
}
