package workers

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/temporaltest"
	"github.com/jam-dev/jam/internal/testsupport/teststore"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// writeCLI puts an executable named command in dir that prints a version line as the real
// CLIs do.
func writeCLI(t *testing.T, dir, command, version string) {
	t.Helper()
	script := "#!/bin/sh\necho \"" + command + " " + version + "\"\n"
	if err := os.WriteFile(filepath.Join(dir, command), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

func cliOf(clis []domain.NodeCLI, command string) (domain.NodeCLI, bool) {
	for _, c := range clis {
		if c.Command == command {
			return c, true
		}
	}
	return domain.NodeCLI{}, false
}

// Placement sends host-native runtimes only to nodes where their CLI is installed: a
// worker resolves its provider CLIs at start, as a runtime there would, and again when an
// operator probes the node, and records them on its node row.
func TestWorkersRecordTheirProviderCLIsAtStartAndOnAProbe(t *testing.T) {
	ts := temporaltest.Start(t)
	c := temporaltest.Dial(t, ts.FrontendAddress())
	st := teststore.SQLite(t)
	ctx := context.Background()
	bin := t.TempDir()
	writeCLI(t, bin, "codex", "0.169.0")
	named := filepath.Join(t.TempDir(), "opencode")
	dataDir := t.TempDir()
	w, err := Start(ctx, Config{Client: c, Store: st, Node: "clis", DataDir: dataDir, Version: "test",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ProbeCLIs: true, HeartbeatInterval: 200 * time.Millisecond,
		// The operator named an opencode that is not there.
		Env: []string{"PATH=" + bin, "HOME=" + t.TempDir(), "JAM_OPENCODE_BIN=" + named}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	var node domain.Node
	wait.Eventually(t, 30*time.Second, func() bool {
		node, err = st.GetNode(ctx, "clis")
		return err == nil && node.CLIs != nil
	}, "the node to record its provider CLIs")
	codex, ok := cliOf(node.CLIs, "codex")
	if !ok || codex.Problem != "" || codex.Version != "0.169.0" || codex.Path != filepath.Join(bin, "codex") || codex.Source != "path" {
		t.Fatalf("codex %+v in %+v", codex, node.CLIs)
	}
	for cmd, want := range map[string]string{"claude": "not found on PATH", "opencode": named} {
		if got, ok := cliOf(node.CLIs, cmd); !ok || !strings.Contains(got.Problem, want) {
			t.Fatalf("%s %+v, want a problem naming %q", cmd, got, want)
		}
	}
	if !node.HasCLI("codex") || node.HasCLI("claude") {
		t.Fatalf("node %+v: want codex runnable and claude not", node.CLIs)
	}

	// Claude is installed later: the operator's probe sees it and placement with it.
	writeCLI(t, bin, "claude", "2.1.328")
	run, err := contract.Start(ctx, c, contract.TypeNodeProbe, contract.NodeProbeID("clis"), contract.NodeProbeInput{Node: "clis"})
	if err != nil {
		t.Fatal(err)
	}
	var report contract.NodeReport
	if err := run.Get(ctx, &report); err != nil {
		t.Fatal(err)
	}
	if got, ok := cliOf(report.CLIs, "claude"); !ok || got.Problem != "" || got.Version != "2.1.328" {
		t.Fatalf("the probe's claude %+v in %+v", got, report.CLIs)
	}
	if node, err = st.GetNode(ctx, "clis"); err != nil || !node.HasCLI("claude") {
		t.Fatalf("after the probe the node records %+v (%v)", node.CLIs, err)
	}

	// The row is taken over (as by a cleaned table and this worker's own re-registration):
	// the new row reads as not probed, and the worker probes again once it registers again.
	host, _ := os.Hostname()
	if _, err := st.RegisterNode(ctx, domain.Node{Name: "clis", Hostname: host, PID: 1, DataDir: dataDir}); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 30*time.Second, func() bool {
		node, err = st.GetNode(ctx, "clis")
		return err == nil && node.PID == os.Getpid() && node.HasCLI("claude") && node.CLIs != nil
	}, "the worker to register again and record its CLIs")
}
