package activities

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/teststore"
)

// An operator's node probe answers about the machine within its bound even when a provider
// CLI hangs on --version, and records nothing then: a slow CLI is not a missing one.
func TestANodeProbeWhoseCLIHangsAnswersAndKeepsTheRecordedCLIs(t *testing.T) {
	defer func(d time.Duration) { describeCLIBudget = d }(describeCLIBudget)
	describeCLIBudget = 500 * time.Millisecond
	ctx := context.Background()
	st := teststore.SQLite(t)
	if _, err := st.RegisterNode(ctx, domain.Node{Name: "n1", Hostname: "h", PID: 1, DataDir: "/d"}); err != nil {
		t.Fatal(err)
	}
	recorded := []domain.NodeCLI{{Command: "codex", Path: "/opt/codex", Version: "0.169.0", Source: "path"}}
	if err := st.SetNodeCLIs(ctx, "n1", recorded); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "codex"), []byte("#!/bin/sh\nexec /bin/sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	n := &Node{Name: "n1", DataDir: t.TempDir(), Store: st, Env: []string{"PATH=" + bin},
		Adapters: []domain.Provider{domain.ProviderCodex}}
	start := time.Now()
	report, err := n.DescribeNode(ctx, DescribeNodeInput{})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the probe took %s", took)
	}
	if report.CLIs != nil || report.CLIsUnanswered == "" || report.Node != "n1" {
		t.Fatalf("report %+v", report)
	}
	if got, err := st.GetNode(ctx, "n1"); err != nil || len(got.CLIs) != 1 || got.CLIs[0] != recorded[0] {
		t.Fatalf("recorded CLIs after the slow probe: %+v (%v)", got.CLIs, err)
	}
}
