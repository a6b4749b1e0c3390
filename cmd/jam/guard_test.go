package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/sandbox"
	"github.com/jam-dev/jam/internal/testsupport/fakesbx"
	"github.com/jam-dev/jam/workers"
)

// TestTheGuardOfAKilledWorkerStopsItsSandboxesInTheHostStore: a worker killed outright leaves
// its microVMs running, and what its providers started in a guest outlives their `sbx exec`;
// its guard stops (ownership-proved) the sandboxes whose roots are in the host store, where
// another node may soon serve them. A worker that stopped says so, and the guard leaves them.
func TestTheGuardOfAKilledWorkerStopsItsSandboxesInTheHostStore(t *testing.T) {
	for _, tc := range []struct {
		name, said string
		want       domain.SandboxStatus
	}{
		{"killed", "", domain.SandboxStopped},
		{"stopped", workers.GuardStopped + "\n", domain.SandboxRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			home, store := t.TempDir(), t.TempDir()
			env := fakesbx.Env(t, "")
			for _, kv := range env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v) // the guard's sbx inherits its environment, as from its worker
			}
			d := &sandbox.Driver{Path: fakesbx.Binary(t), Env: env}
			if _, err := d.ProbeVersion(ctx); err != nil {
				t.Fatal(err)
			}
			layout := domain.Layout{Root: home, Hosts: store}
			m := &sandbox.Manager{Driver: d, Markers: sandbox.Markers{Dir: layout.SandboxOwnersDir()}}
			agent, host := uuid.New(), uuid.New()
			plan := sandbox.Plan{Owner: sandbox.OwnerKey{Kind: sandbox.OwnerRuntimeHost, AgentID: agent, ID: host},
				Name: sandbox.DeriveName("jam", agent, host), Agent: "shell", Workspace: filepath.Join(store, host.String(), "workspace"),
				ConfigurationSource: "jam_managed"}
			if err := os.MkdirAll(plan.Workspace, 0o755); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Ensure(ctx, plan, false); err != nil {
				t.Fatal(err)
			}
			g := &globals{logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			cmd := newProcessGuardCmd(g)
			cmd.SetIn(strings.NewReader(tc.said))
			cmd.SetArgs([]string{"--dir", filepath.Join(home, "groups"), "--home", home, "--host-store", store,
				"--sbx", fakesbx.Binary(t)})
			if err := cmd.ExecuteContext(ctx); err != nil {
				t.Fatal(err)
			}
			list, err := d.List(ctx)
			if err != nil || len(list) != 1 || list[0].Status != tc.want {
				t.Fatalf("sandboxes %+v (%v), want one %s", list, err, tc.want)
			}
		})
	}
}
