package workers

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/sandbox"
	"github.com/jam-dev/jam/internal/testsupport/fakesbx"
	"github.com/jam-dev/jam/internal/testsupport/temporaltest"
	"github.com/jam-dev/jam/internal/testsupport/teststore"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

func TestMain(m *testing.M) {
	code := m.Run()
	fakesbx.Cleanup()
	os.Exit(code)
}

// Placement sends sandboxed runtimes only to nodes whose `sbx` works: each worker probes
// its own at start and again every sandboxReprobeInterval, and records it on its node row.
func TestWorkersRecordTheirSandboxSupportForPlacement(t *testing.T) {
	defer func(d time.Duration) { sandboxReprobeInterval = d }(sandboxReprobeInterval)
	sandboxReprobeInterval = 100 * time.Millisecond
	ts := temporaltest.Start(t)
	c := temporaltest.Dial(t, ts.FrontendAddress())
	st := teststore.SQLite(t)
	ctx := context.Background()
	sbx := fakesbx.Binary(t)
	cases := []struct {
		node string
		sbx  sandbox.Config
		env  []string
		want domain.SandboxSupport
	}{
		{"with-sbx", sandbox.Config{Sbx: sbx}, fakesbx.Env(t, ""), domain.SandboxSupported},
		{"daemon-down", sandbox.Config{Sbx: sbx}, fakesbx.Env(t, "daemon"), domain.SandboxDaemonDown},
		{"no-sbx", sandbox.Config{PATH: t.TempDir()}, nil, domain.SandboxAbsent},
	}
	for _, tc := range cases {
		t.Run(tc.node, func(t *testing.T) {
			w, err := Start(ctx, Config{Client: c, Store: st, Node: tc.node, DataDir: t.TempDir(), Version: "test",
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Sbx: tc.sbx, Env: tc.env})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			wait.Eventually(t, 20*time.Second, func() bool {
				n, err := st.GetNode(ctx, tc.node)
				return err == nil && n.Sandbox == tc.want
			}, "node %s to record sandbox support %s", tc.node, tc.want)
			// Probed again later: a row cleared (or re-registered unprobed) is filled in.
			if err := st.SetNodeSandbox(ctx, tc.node, ""); err != nil {
				t.Fatal(err)
			}
			wait.Eventually(t, 20*time.Second, func() bool {
				n, err := st.GetNode(ctx, tc.node)
				return err == nil && n.Sandbox == tc.want
			}, "node %s to probe again", tc.node)
		})
	}
}
