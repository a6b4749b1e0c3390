package activities_test

import (
	"context"
	"slices"
	"testing"

	"github.com/google/uuid"
	"go.temporal.io/sdk/testsuite"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/teststore"
)

// Reconcile's scan: a live runtime on a draining node moves only when its state is all in
// its host root (Claude Code, managed workspace) and a live node sharing the drained node's
// host store has room; the others stay with their node until reaped.
func TestRuntimesOnADrainingNodeMoveOnlyWhenANodeSharingTheirHostStoreCanTakeThem(t *testing.T) {
	ctx := context.Background()
	st := teststore.SQLite(t)
	session := func(name string, cfg domain.TemplateConfig) uuid.UUID { return ownedSession(t, st, name, cfg) }
	claude := domain.TemplateConfig{Alias: "default", Transport: domain.TransportClaudeCodeCLI, AuthMode: domain.AuthAPIKey}
	direct := claude
	direct.Sandbox = domain.SandboxConfig{WorkspaceSource: domain.WorkspaceDirectHost, HostPath: "/srv/checkout"}
	moves := session("claude", claude)
	inOperatorHome := session("acp", domain.TemplateConfig{Alias: "default", Transport: domain.TransportACP})
	inOwnDirectory := session("direct", direct)
	onOtherStore := session("elsewhere", claude)
	for _, n := range []domain.Node{{Name: "d", HostStore: "s:/shared"}, {Name: "p", HostStore: "s:/shared"},
		{Name: "e", HostStore: "t:/other"}} {
		n.Hostname, n.PID, n.DataDir, n.MaxRuntimes = n.Name, 1, "/"+n.Name, 5
		n.Adapters = []domain.Provider{domain.ProviderClaude, domain.ProviderACP}
		if _, err := st.RegisterNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	for s, node := range map[uuid.UUID]string{moves: "d", inOperatorHome: "d", inOwnDirectory: "d", onOtherStore: "e"} {
		if err := st.ConfirmPlacement(ctx, s, node); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"d", "e"} {
		if _, err := st.SetNodeDraining(ctx, n, true); err != nil {
			t.Fatal(err)
		}
	}
	find := func() []activities.MoveOff {
		t.Helper()
		var suite testsuite.WorkflowTestSuite
		env := suite.NewTestActivityEnvironment()
		s := &activities.Sessions{Store: st}
		env.RegisterActivity(s)
		v, err := env.ExecuteActivity(s.FindBacklog)
		if err != nil {
			t.Fatal(err)
		}
		var out activities.BacklogReport
		if err := v.Get(&out); err != nil {
			t.Fatal(err)
		}
		return out.Move
	}
	if got := find(); !slices.Equal(got, []activities.MoveOff{{RuntimeSession: moves, Node: "d"}}) {
		t.Fatalf("move %v, want only the Claude room on d (%s)", got, moves)
	}
	// One free slot on the sharing node is offered to one runtime, not to every one.
	second := session("claude-2", claude)
	if err := st.ConfirmPlacement(ctx, second, "d"); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if err := st.ConfirmPlacement(ctx, uuid.New(), "p"); err != nil {
			t.Fatal(err)
		}
	}
	if got := find(); len(got) != 1 {
		t.Fatalf("move %v with one slot free on p", got)
	}
	// With the sharing node drained too, nothing can take it.
	if _, err := st.SetNodeDraining(ctx, "p", true); err != nil {
		t.Fatal(err)
	}
	if got := find(); len(got) != 0 {
		t.Fatalf("move %v with no node to take them", got)
	}
}
