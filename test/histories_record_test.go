package test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	sdkclient "go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/fakesbx"
	"github.com/jam-dev/jam/internal/testsupport/temporaltest"
	"github.com/jam-dev/jam/internal/testsupport/wait"
	"github.com/jam-dev/jam/workflows"
)

// TestRecordWorkflowHistories records event histories of Jam's long-lived workflows as the
// code in this tree writes them, for workflows/replay_test.go to replay against later code:
// a change to a workflow's command sequence without a version gate fails that replay.
// It runs only with JAM_RECORD_HISTORIES=<dir> (record before changing a workflow, e.g.
// JAM_RECORD_HISTORIES=$PWD/workflows/testdata/histories/<tag>).
func TestRecordWorkflowHistories(t *testing.T) {
	dir := os.Getenv("JAM_RECORD_HISTORIES")
	if dir == "" {
		t.Skip("set JAM_RECORD_HISTORIES to a directory to record workflow histories")
	}
	if !filepath.IsAbs(dir) {
		t.Fatalf("JAM_RECORD_HISTORIES=%q: want an absolute directory", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	state, log := t.TempDir(), filepath.Join(t.TempDir(), "sbx.log")
	d := startDevEnv(t, filepath.Join(t.TempDir(), "jam-home"), ownedEnv(t, t.TempDir(),
		"JAM_OWNED_RUNTIME_IDLE_SECS=2", "JAM_SBX="+fakesbx.Binary(t), "FAKESBX_STATE="+state, "FAKESBX_LOG="+log))
	c, ctx := d.client, context.Background()
	tc := temporaltest.Dial(t, d.temporal)
	save := func(name, workflowID string) {
		t.Helper()
		writeHistory(t, tc, filepath.Join(dir, name+".json"), workflowID)
	}

	// A host-native room: wake, turn, idle reap, wake again, operator stop and restart, and
	// removal from the room.
	var agent api.AgentBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "native", Kind: domain.AgentOwned}, &agent))
	room, session := roomWith(t, c, "native", agent.ID)
	awaitReply(t, c, postText(t, c, room.ID, "hello"), 60*time.Second)
	awaitPresence(t, c, session, domain.PresenceDormant, 30*time.Second)
	awaitReply(t, c, postText(t, c, room.ID, "again"), 60*time.Second)
	must(t, c.Do(ctx, http.MethodPost, "/v1/sessions/"+session.String()+"/stop", nil, nil))
	must(t, c.Do(ctx, http.MethodPost, "/v1/sessions/"+session.String()+"/restart", nil, nil))
	awaitReply(t, c, postText(t, c, room.ID, "after restart"), 60*time.Second)
	var full api.RoomBody
	must(t, c.Do(ctx, http.MethodGet, "/v1/rooms/"+room.ID.String(), nil, &full))
	for _, p := range full.Participants {
		if p.AgentID != nil && *p.AgentID == agent.ID {
			must(t, c.Do(ctx, http.MethodDelete, "/v1/rooms/"+room.ID.String()+"/participants/"+p.ID.String(), nil, nil))
		}
	}
	awaitPhase(t, c, session, domain.PhaseRetired, 30*time.Second)
	save("roomsession-native", workflows.RoomSessionID(session))

	// A room whose runtime cannot start (a transport with no adapter).
	var broken api.AgentBody
	tmpl := domain.TemplateConfig{Alias: "default", Transport: domain.TransportClaudeCodeCLI, Command: "/bin/true"}
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "broken", Kind: domain.AgentOwned, Template: &tmpl}, &broken))
	room2, session2 := roomWith(t, c, "broken", broken.ID)
	postText(t, c, room2.ID, "anyone?")
	wait.Eventually(t, 60*time.Second, func() bool {
		s := getSession(t, c, session2)
		return s.Runtime != nil && s.Runtime.LastError != ""
	}, "the session to record a runtime error")
	save("roomsession-start-failure", workflows.RoomSessionID(session2))

	// A sandboxed room on a Dedicated host: lease, permit, turn, idle reap and park.
	sandboxed := sandboxedAgent(t, c, "boxed", domain.PlacementDedicated)
	room3, session3 := roomWith(t, c, "boxed", sandboxed)
	awaitReply(t, c, postText(t, c, room3.ID, "in the box"), 90*time.Second)
	awaitPresence(t, c, session3, domain.PresenceDormant, 60*time.Second)
	hosts := hostsOf(t, c, sandboxed)
	if len(hosts) != 1 {
		t.Fatalf("sandboxed agent has %d hosts, want 1", len(hosts))
	}
	wait.Eventually(t, 60*time.Second, func() bool {
		var h api.HostBody
		must(t, c.Do(ctx, http.MethodGet, "/v1/hosts/"+hosts[0].ID.String(), nil, &h))
		return h.State == domain.HostParked
	}, "the host to be parked")
	save("roomsession-sandboxed", workflows.RoomSessionID(session3))
	save("runtimehost-dedicated", workflows.RuntimeHostID(hosts[0].ID))
}

// writeHistory writes the latest run's history of a workflow as the JSON the Temporal CLI
// prints (`temporal workflow show --output json`), which the SDK's replayer reads.
func writeHistory(t *testing.T, c sdkclient.Client, file, workflowID string) {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", workflowID, err)
		}
		h.Events = append(h.Events, e)
	}
	b, err := protojson.MarshalOptions{Indent: "  "}.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %s (%d events)", file, len(h.Events))
}

// awaitPhase waits for a session's workflow to report phase.
func awaitPhase(t *testing.T, c *client.Client, id uuid.UUID, want domain.SessionPhase, timeout time.Duration) {
	t.Helper()
	wait.Eventually(t, timeout, func() bool { return getSession(t, c, id).Phase == want }, "session %s to be in phase %s", id, want)
}
