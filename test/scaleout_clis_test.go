package test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// TestHostNativeRoomsGoToTheNodeWithTheirCLI runs two worker nodes, one whose operator named a
// test agent that is not installed: each records its provider CLIs at start, and a room's
// wake goes to the node that has the CLI even though the other is first by name on an even
// load (where its start would be refused). The operator's probe shows why.
func TestHostNativeRoomsGoToTheNodeWithTheirCLI(t *testing.T) {
	t.Parallel()
	p := startProductionServer(t, "cli-fleet")
	c := p.client
	missing := "/nonexistent/jam-testagent"
	bare := &fleetNode{name: "a-bare", home: t.TempDir(), state: t.TempDir(), override: []string{"JAM_JAM_TESTAGENT_BIN=" + missing}}
	full := &fleetNode{name: "b-full", home: t.TempDir(), state: t.TempDir()}
	for _, n := range []*fleetNode{bare, full} {
		n.start(t, p)
	}
	testagentOf := func(n api.NodeBody) (domain.NodeCLI, bool) {
		for _, cli := range n.CLIs {
			if cli.Command == "jam-testagent" {
				return cli, true
			}
		}
		return domain.NodeCLI{}, false
	}
	wait.Eventually(t, 60*time.Second, func() error {
		m := nodesByName(t, c)
		a, aok := testagentOf(m["a-bare"])
		b, bok := testagentOf(m["b-full"])
		if m["a-bare"].State != domain.NodeLive || m["b-full"].State != domain.NodeLive || !aok || !bok ||
			!strings.Contains(a.Problem, missing) || b.Problem != "" || b.Version == "" {
			return fmt.Errorf("nodes %+v", m)
		}
		return nil
	}, "both nodes live with their provider CLIs probed")

	var agent api.AgentBody
	must(t, c.Do(context.Background(), http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "cli-agent", Kind: domain.AgentOwned}, &agent))
	for i := range 2 {
		room, session := roomWith(t, c, fmt.Sprintf("lab-%d", i), agent.ID)
		awaitReply(t, c, postText(t, c, room.ID, "where do I run?"), 90*time.Second)
		if s := getSession(t, c, session); s.Runtime == nil || s.Runtime.Node != "b-full" {
			t.Fatalf("room %d ran on %+v, want node b-full", i, s.Runtime)
		}
	}
	env := []string{"JAM_URL=" + p.url, "JAM_TOKEN=cli-fleet"}
	out, err := runJam(t, env, "node", "list")
	if err != nil || !strings.Contains(out, "CLIS") || !strings.Contains(out, "jam-testagent 0.1.0") {
		t.Fatalf("jam node list: %v\n%s", err, out)
	}
	out, err = runJam(t, env, "node", "probe", "a-bare")
	if err != nil || !strings.Contains(out, "jam-testagent: ") || !strings.Contains(out, missing) {
		t.Fatalf("jam node probe a-bare: %v\n%s", err, out)
	}
}
