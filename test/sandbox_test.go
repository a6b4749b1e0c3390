package test

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/fakesbx"
)

// The node's own worker classifies its sbx through the API and the CLI; a node without sbx
// still runs host-native agents.
func TestSandboxSupportIsAskedOfTheNodeAndNeverBlocksHostNativeAgents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	state := t.TempDir()
	d := startDevEnv(t, filepath.Join(t.TempDir(), "jam-home"), append(ownedEnv(t, t.TempDir()),
		"JAM_SBX="+fakesbx.Binary(t), "FAKESBX_STATE="+state, "FAKESBX_FAIL=daemon"))
	start := time.Now()
	var got api.SandboxSupportBody
	must(t, d.client.Do(ctx, http.MethodGet, "/v1/sandbox/support", nil, &got))
	if got.Node != devNode || got.Support.Status != domain.SandboxDaemonDown || got.Support.Version != "0.38.0" ||
		!strings.Contains(got.Support.Detail, "daemon") || got.WorkflowID != contract.SandboxProbeID(devNode) {
		t.Fatalf("support %+v", got)
	}
	if took := time.Since(start); took > 12*time.Second {
		t.Fatalf("the probe took %s", took)
	}
	// Placement reads the answer from the node, which its worker probed at start too.
	var node api.NodeBody
	must(t, d.client.Do(ctx, http.MethodGet, "/v1/nodes/"+devNode, nil, &node))
	if node.Sandbox != domain.SandboxDaemonDown {
		t.Fatalf("node %s records sandbox support %q, want daemon_down", node.Name, node.Sandbox)
	}
	if err := d.client.Do(ctx, http.MethodGet, "/v1/sandbox/support?node=nowhere", nil, nil); !isStatus(err, http.StatusNotFound) {
		t.Fatalf("unknown node: %v", err)
	}
	out, err := runJam(t, []string{"JAM_URL=" + d.apiURL, "JAM_HOME=" + filepath.Dir(d.tokenFile)}, "sandbox", "support")
	if err != nil || !strings.Contains(out, "daemon_down") {
		t.Fatalf("jam sandbox support: %v\n%s", err, out)
	}
	// With sbx's daemon down, an owned host-native agent still answers.
	var agent api.AgentBody
	must(t, d.client.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "native", Kind: domain.AgentOwned}, &agent))
	room, _ := roomWith(t, d.client, "lab", agent.ID)
	awaitReply(t, d.client, postText(t, d.client, room.ID, "still here?"), 30*time.Second)
}
