package test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/fakesbx"
	"github.com/jam-dev/jam/internal/testsupport/temporaltest"
	"github.com/jam-dev/jam/internal/testsupport/wait"
	"github.com/jam-dev/jam/workflows"
)

// TestRecordWorkflowHistories records event histories of Jam's workflows as the code in this
// tree writes them, for workflows/replay_test.go to replay against later code: a change to a
// workflow's command sequence without a version gate fails that replay (see
// docs/workflow-versioning.md). It runs only with JAM_RECORD_HISTORIES=<dir> (record before
// changing a workflow, e.g. JAM_RECORD_HISTORIES=$PWD/workflows/testdata/histories/<tag>).
//
// The embedded Temporal suggests continue-as-new after a short history here, so the long
// scenarios also record RoomSession and RuntimeHost continuing as new; every run of such a
// workflow is written (<name>.run<N>.json), each replayable on its own.
func TestRecordWorkflowHistories(t *testing.T) {
	t.Parallel()
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
	state, log, home := t.TempDir(), filepath.Join(t.TempDir(), "sbx.log"), filepath.Join(t.TempDir(), "jam-home")
	d := startDevEnv(t, home, ownedEnv(t, t.TempDir(),
		"JAM_SBX="+fakesbx.Binary(t), "FAKESBX_STATE="+state, "FAKESBX_LOG="+log,
		"JAM_RECONCILE_INTERVAL_SECS=2", "JAM_DEV_SUGGEST_CONTINUE_AS_NEW_EVENTS=100", "JAM_WATCHDOG_INTERVAL_MS=250"))
	c, ctx := d.client, context.Background()
	tc := temporaltest.Dial(t, d.temporal)
	save := func(name, workflowID string) {
		t.Helper()
		writeHistories(t, tc, dir, name, workflowID)
	}
	// saveDone records a short-lived workflow once it has finished.
	saveDone := func(name, workflowID string) {
		t.Helper()
		if err := tc.GetWorkflow(ctx, workflowID, "").Get(ctx, nil); err != nil {
			t.Fatalf("%s: %v", workflowID, err)
		}
		save(name, workflowID)
	}

	// A host-native room: wake, turn, idle reap, wake again; a message steered at a running
	// turn (the ACP test agent declines, so it runs next); a template applied to the live
	// runtime at the turn's end; an operator stop, a message Reconcile pokes the held session
	// about, restart; removal from the room.
	var agent api.AgentBody
	idle := 2
	native := domain.TemplateConfig{Alias: "default", Transport: domain.TransportACP, IdleSecs: &idle}
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "native", Kind: domain.AgentOwned, Template: &native}, &agent))
	room, session := roomWith(t, c, "native", agent.ID)
	awaitReply(t, c, postText(t, c, room.ID, "hello"), 60*time.Second)
	awaitPresence(t, c, session, domain.PresenceDormant, 30*time.Second)
	awaitReply(t, c, postText(t, c, room.ID, "again"), 60*time.Second)
	// The next message must arrive during the turn that answers this one: wait for that
	// turn's start (its turn_started names the message it answers), not for any turn, which
	// may be an empty one a late Reconcile poke ran.
	long := postText(t, c, room.ID, "[[slow 3]] long work")
	awaitEvent(t, c, room.ID, domain.EventRuntimeActivity, func(p json.RawMessage) bool {
		var e struct {
			Kind   domain.AgentEventKind `json:"kind"`
			Source *uuid.UUID            `json:"source_message_id"`
		}
		return json.Unmarshal(p, &e) == nil && e.Kind == domain.AgentTurnStarted && e.Source != nil && *e.Source == long.ID
	}, 30*time.Second)
	mid := postText(t, c, room.ID, "meanwhile")
	tmpl := templateOf(t, c, agent.ID)
	cfg := tmpl.TemplateConfig
	cfg.Args = []string{"--directives", "[[count]]"}
	saved := saveApplied(t, c, tmpl, cfg)
	awaitReply(t, c, long, 60*time.Second)
	awaitConfig(t, c, session, 60*time.Second, func(s api.SessionBody) bool {
		return s.EffectiveGeneration == saved.DesiredGeneration && s.PendingChange == nil
	})
	awaitReply(t, c, mid, 60*time.Second)
	saveDone("templateapply", contract.TemplateApplyID(tmpl.ID, saved.DesiredGeneration))
	must(t, c.Do(ctx, http.MethodPost, "/v1/sessions/"+session.String()+"/stop", nil, nil))
	held := postText(t, c, room.ID, "while held")
	reconcile := awaitReconcilePoke(t, tc, time.Now(), 60*time.Second)
	must(t, c.Do(ctx, http.MethodPost, "/v1/sessions/"+session.String()+"/restart", nil, nil))
	awaitReply(t, c, held, 60*time.Second)
	save("reconcile", reconcile)
	var full api.RoomBody
	must(t, c.Do(ctx, http.MethodGet, "/v1/rooms/"+room.ID.String(), nil, &full))
	for _, p := range full.Participants {
		if p.AgentID != nil && *p.AgentID == agent.ID {
			must(t, c.Do(ctx, http.MethodDelete, "/v1/rooms/"+room.ID.String()+"/participants/"+p.ID.String(), nil, nil))
		}
	}
	awaitPhase(t, c, session, domain.PhaseRetired, 30*time.Second)
	save("roomsession-native", contract.RoomSessionID(session))

	// A room whose runtime cannot start (its command does not exist) holds failed; a restart
	// retries and fails the same way; a template edit to a command that runs retries again and
	// the waiting message is answered.
	// (The command goes away after the save: a save naming a command the node lacks is refused.)
	var broken api.AgentBody
	gone := filepath.Join(t.TempDir(), "jam-agent")
	must(t, os.WriteFile(gone, []byte("#!/bin/sh\nexit 1\n"), 0o755))
	bad := domain.TemplateConfig{Alias: "default", Transport: domain.TransportACP, Command: gone}
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "broken", Kind: domain.AgentOwned, Template: &bad}, &broken))
	room2, session2 := roomWith(t, c, "broken", broken.ID)
	must(t, os.Remove(gone))
	waiting := postText(t, c, room2.ID, "anyone?")
	awaitPhase(t, c, session2, domain.PhaseFailed, 60*time.Second)
	must(t, c.Do(ctx, http.MethodPost, "/v1/sessions/"+session2.String()+"/restart", nil, nil))
	awaitPhase(t, c, session2, domain.PhaseFailed, 60*time.Second)
	fix := templateOf(t, c, broken.ID)
	fixed := fix.TemplateConfig
	fixed.Command = ""
	saveApplied(t, c, fix, fixed)
	awaitReply(t, c, waiting, 60*time.Second)
	save("roomsession-start-failure", contract.RoomSessionID(session2))

	// A sandboxed room on a Dedicated host: lease, permit, turn; a manual checkpoint while
	// live; host restart and host stop; the older checkpoint's payload deleted; a message wakes
	// the room again; a workspace export; removal releases the lease and the host parks.
	sandboxed := sandboxedAgent(t, c, "boxed", domain.PlacementDedicated)
	room3, session3 := roomWith(t, c, "boxed", sandboxed)
	awaitReply(t, c, postText(t, c, room3.ID, "[[count]] in the box"), 90*time.Second)
	hosts := hostsOf(t, c, sandboxed)
	if len(hosts) != 1 {
		t.Fatalf("sandboxed agent has %d hosts, want 1", len(hosts))
	}
	host := hosts[0].ID
	var manual api.CheckpointBody
	must(t, c.Operation(ctx, http.MethodPost, "/v1/hosts/"+host.String()+"/checkpoints", nil, &manual, nil))
	control(t, c, host, domain.HostRestart)
	awaitPresence(t, c, session3, domain.PresenceLive, 60*time.Second)
	awaitReply(t, c, postText(t, c, room3.ID, "[[count]] after the restart"), 90*time.Second)
	control(t, c, host, domain.HostStop)
	awaitHostState(t, c, host, domain.HostParked, 60*time.Second)
	var cps api.CheckpointList
	must(t, c.Do(ctx, http.MethodGet, "/v1/hosts/"+host.String()+"/checkpoints", nil, &cps))
	if len(cps.Items) < 2 {
		t.Fatalf("checkpoints %+v, want the manual one and the stop's", cps.Items)
	}
	older := cps.Items[len(cps.Items)-1].ID
	must(t, c.Operation(ctx, http.MethodPost, "/v1/hosts/"+host.String()+"/checkpoints/"+older.String()+"/delete-payload",
		api.DeletePayloadRequest{ConfirmPermanent: true}, nil, nil))
	saveDone("checkpointdeletion", contract.CheckpointDeletionID(older))
	awaitReply(t, c, postText(t, c, room3.ID, "[[count]] wake again"), 90*time.Second)
	// An export refers to the newest checkpoint, which retention then keeps: it comes after
	// the deletion.
	exp, err := workspaceOp(c, session3, "export", api.WorkspaceOpRequest{})
	if err != nil || exp.WorkflowID == "" {
		t.Fatalf("export %+v: %v", exp, err)
	}
	saveDone("workspaceop-export", exp.WorkflowID)
	var full3 api.RoomBody
	must(t, c.Do(ctx, http.MethodGet, "/v1/rooms/"+room3.ID.String(), nil, &full3))
	for _, p := range full3.Participants {
		if p.AgentID != nil && *p.AgentID == sandboxed {
			must(t, c.Do(ctx, http.MethodDelete, "/v1/rooms/"+room3.ID.String()+"/participants/"+p.ID.String(), nil, nil))
		}
	}
	awaitPhase(t, c, session3, domain.PhaseRetired, 60*time.Second)
	awaitHostState(t, c, host, domain.HostParked, 60*time.Second)
	save("roomsession-sandboxed", contract.RoomSessionID(session3))
	save("runtimehost-dedicated", contract.RuntimeHostID(host))

	// A wake that finds no node to run on (the only node drains): the session says why it
	// waits, and is placed once the node is back.
	var queued api.AgentBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "queued", Kind: domain.AgentOwned, Template: &native}, &queued))
	room4, session4 := roomWith(t, c, "queued", queued.ID)
	must(t, c.Do(ctx, http.MethodPost, "/v1/nodes/"+devNode+"/drain", nil, nil))
	later := postText(t, c, room4.ID, "when there is room")
	wait.Eventually(t, 60*time.Second, func() bool {
		r := getSession(t, c, session4).Runtime
		return r != nil && strings.Contains(r.LastError, "draining")
	}, "the queued wake to say why it waits")
	must(t, c.Do(ctx, http.MethodPost, "/v1/nodes/"+devNode+"/undrain", nil, nil))
	awaitReply(t, c, later, 90*time.Second)
	save("roomsession-placement-wait", contract.RoomSessionID(session4))

	// A Dedicated host whose park checkpoint fails (its checkpoints directory is a file):
	// the room stops, the host parks without a generation; the directory comes back, a
	// manual checkpoint captures, and the room is restarted and answers.
	unsaved := sandboxedAgent(t, c, "unsaved", domain.PlacementDedicated)
	room5, session5 := roomWith(t, c, "unsaved", unsaved)
	awaitReply(t, c, postText(t, c, room5.ID, "[[count]] before"), 90*time.Second)
	host5 := hostsOf(t, c, unsaved)[0].ID
	blockCheckpoints(t, home, host5)
	must(t, c.Do(ctx, http.MethodPost, "/v1/sessions/"+session5.String()+"/stop", nil, nil))
	awaitHostState(t, c, host5, domain.HostParked, 90*time.Second)
	unblockCheckpoints(t, home, host5)
	must(t, c.Operation(ctx, http.MethodPost, "/v1/hosts/"+host5.String()+"/checkpoints", nil, nil, nil))
	must(t, c.Do(ctx, http.MethodPost, "/v1/sessions/"+session5.String()+"/restart", nil, nil))
	awaitReply(t, c, postText(t, c, room5.ID, "[[count]] after"), 90*time.Second)
	must(t, c.Do(ctx, http.MethodPost, "/v1/sessions/"+session5.String()+"/stop", nil, nil))
	awaitHostState(t, c, host5, domain.HostParked, 60*time.Second)
	save("roomsession-unsaved", contract.RoomSessionID(session5))
	save("runtimehost-unsaved", contract.RuntimeHostID(host5))

	// The watchdog: a turn that goes silent past its wedge bound is interrupted, the runtime
	// recycled on its thread and the message answered by the new process; then a provider
	// that wedges every time is held failed after three recycles, and a restart clears it.
	room6, session6 := roomWith(t, c, "watched", codexAgent(t, c, "watched", testagentWatched(t, domain.Watchdog{WedgeSecs: intp(1)})))
	awaitReply(t, c, postText(t, c, room6.ID, "[[wedge-once]] [[count]]"), 90*time.Second)
	postText(t, c, room6.ID, "[[wedge]] again")
	awaitPhase(t, c, session6, domain.PhaseFailed, 90*time.Second)
	must(t, c.Do(ctx, http.MethodPost, "/v1/sessions/"+session6.String()+"/stop", nil, nil))
	save("roomsession-watchdog", contract.RoomSessionID(session6))
}

// blockCheckpoints makes every capture of host's provider state fail, as a disk that cannot
// take the generation would: its checkpoints directory (moved aside when it exists) is
// replaced by a file.
func blockCheckpoints(t *testing.T, home string, host uuid.UUID) {
	t.Helper()
	dir := filepath.Join(home, "runtime-hosts", host.String(), "checkpoints")
	if err := os.Rename(dir, dir+".aside"); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("not a directory\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// unblockCheckpoints gives host its checkpoints directory back.
func unblockCheckpoints(t *testing.T, home string, host uuid.UUID) {
	t.Helper()
	dir := filepath.Join(home, "runtime-hosts", host.String(), "checkpoints")
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir+".aside", dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
}

// awaitReconcilePoke waits for a Reconcile run started after since that poked a session, and
// returns its workflow id.
func awaitReconcilePoke(t *testing.T, c sdkclient.Client, since time.Time, timeout time.Duration) string {
	t.Helper()
	ctx := context.Background()
	var found string
	wait.Eventually(t, timeout, func() bool {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: "WorkflowType = 'Reconcile' AND ExecutionStatus = 'Completed'"})
		if err != nil {
			t.Fatalf("list Reconcile runs: %v", err)
		}
		for _, e := range resp.Executions {
			if e.StartTime.AsTime().Before(since) {
				continue
			}
			var rep workflows.ReconcileReport
			if c.GetWorkflow(ctx, e.Execution.WorkflowId, e.Execution.RunId).Get(ctx, &rep) == nil && rep.Poked > 0 {
				found = e.Execution.WorkflowId
				return true
			}
		}
		return false
	}, "a Reconcile run that poked a session")
	return found
}

// writeHistories writes the history of a workflow as the JSON the Temporal CLI prints
// (`temporal workflow show --output json`), which the SDK's replayer reads: <name>.json for a
// single run, or one <name>.run<N>.json per run (oldest first) when it continued as new.
func writeHistories(t *testing.T, c sdkclient.Client, dir, name, workflowID string) {
	t.Helper()
	var runs []*historypb.History
	for runID := ""; ; {
		h := history(t, c, workflowID, runID)
		if runID == "" {
			h = settled(t, c, workflowID)
		}
		runs = append([]*historypb.History{h}, runs...)
		runID = h.Events[0].GetWorkflowExecutionStartedEventAttributes().GetContinuedExecutionRunId()
		if runID == "" {
			break
		}
	}
	for i, h := range runs {
		file := filepath.Join(dir, name+".json")
		if len(runs) > 1 {
			file = filepath.Join(dir, fmt.Sprintf("%s.run%d.json", name, i+1))
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
}

// settled reads the latest run once it completed a workflow task and none is in flight: a
// run that just continued as new may not have run its first task yet (the server may delay
// it), and a history cut there does not replay.
func settled(t *testing.T, c sdkclient.Client, workflowID string) *historypb.History {
	t.Helper()
	var h *historypb.History
	wait.Eventually(t, 30*time.Second, func() bool {
		h = history(t, c, workflowID, "")
		switch h.Events[len(h.Events)-1].GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			return false
		}
		// A run that continued as new quickly starts after a backoff, with no task yet.
		for _, e := range h.Events {
			if e.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
				return true
			}
		}
		return false
	}, "workflow %s to finish its workflow task", workflowID)
	return h
}

// history reads one run's events (runID "" is the latest run).
func history(t *testing.T, c sdkclient.Client, workflowID, runID string) *historypb.History {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	h := &historypb.History{}
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", workflowID, err)
		}
		h.Events = append(h.Events, e)
	}
	if len(h.Events) == 0 {
		t.Fatalf("history of %s run %q is empty", workflowID, runID)
	}
	return h
}

// awaitPhase waits for a session's workflow to report phase.
func awaitPhase(t *testing.T, c *client.Client, id uuid.UUID, want domain.SessionPhase, timeout time.Duration) {
	t.Helper()
	wait.Eventually(t, timeout, func() bool { return getSession(t, c, id).Phase == want }, "session %s to be in phase %s", id, want)
}
