package test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/workflowservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/temporaltest"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// found is one workflow a visibility query returned, with its Jam search attributes.
type found struct {
	ID, Type, Summary string
	Attrs             map[string]string
}

// listJam runs a visibility query (as the Web UI and `temporal workflow list --query` do).
func listJam(t *testing.T, tc sdkclient.Client, query string) []found {
	t.Helper()
	resp, err := tc.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: query})
	if err != nil {
		t.Fatalf("list %q: %v", query, err)
	}
	var out []found
	for _, e := range resp.GetExecutions() {
		f := found{ID: e.GetExecution().GetWorkflowId(), Type: e.GetType().GetName(), Attrs: map[string]string{}}
		for name, p := range e.GetSearchAttributes().GetIndexedFields() {
			var v string
			if converter.GetDefaultDataConverter().FromPayload(p, &v) == nil {
				f.Attrs[name] = v
			}
		}
		out = append(out, f)
	}
	return out
}

// awaitListed waits until query finds exactly one workflow whose JamStage satisfies stage.
func awaitListed(t *testing.T, tc sdkclient.Client, query string, stage func(string) bool) found {
	t.Helper()
	var got found
	wait.Eventually(t, time.Minute, func() error {
		l := listJam(t, tc, query)
		if len(l) != 1 {
			return fmt.Errorf("%d workflows", len(l))
		}
		if got = l[0]; !stage(got.Attrs["JamStage"]) {
			return fmt.Errorf("%s at stage %q", got.ID, got.Attrs["JamStage"])
		}
		return nil
	}, "%s to find one workflow", query)
	return got
}

// workflowDetails reads a workflow's summary and current details as the Web UI does (the
// SDK's metadata query and the execution's user metadata).
func workflowDetails(t *testing.T, tc sdkclient.Client, id string) (summary, details string) {
	t.Helper()
	d, err := tc.DescribeWorkflowExecution(context.Background(), id, "")
	if err != nil {
		t.Fatalf("describe %s: %v", id, err)
	}
	if p := d.GetExecutionConfig().GetUserMetadata().GetSummary(); p != nil {
		_ = converter.GetDefaultDataConverter().FromPayload(p, &summary)
	}
	v, err := tc.QueryWorkflow(context.Background(), id, "", "__temporal_workflow_metadata")
	if err != nil {
		t.Fatalf("metadata query of %s: %v", id, err)
	}
	var meta sdkpb.WorkflowMetadata
	if err := v.Get(&meta); err != nil {
		t.Fatalf("metadata of %s: %v", id, err)
	}
	return summary, meta.GetCurrentDetails()
}

// Every Jam workflow is found by the Jam objects it serves through Temporal's visibility
// API, with its stage: a room's RoomSession by JamRoom, a sandboxed host's RuntimeHost by
// JamHost, a workspace operation by JamWorkspace and a template apply by JamTemplate; the
// Reconcile schedule's runs by JamKind. The Web UI's summary and current details say what
// each is doing.
func TestJamWorkflowsAreFoundByTheirObjectsWithTheirStage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := startSandboxDev(t)
	c := e.d.client
	tc := temporaltest.Dial(t, e.d.temporal)

	agent := sandboxedAgent(t, c, "finder", domain.PlacementDedicated)
	room, session := roomWith(t, c, "lab", agent)
	awaitReply(t, c, postText(t, c, room.ID, "hello"), time.Minute)

	rs := awaitListed(t, tc, fmt.Sprintf("JamRoom='%s'", room.ID), func(s string) bool { return s == string(domain.PhaseLive) })
	if rs.ID != contract.RoomSessionID(session) || rs.Type != contract.TypeRoomSession || rs.Attrs["JamAgent"] != agent.String() ||
		rs.Attrs["JamKind"] != contract.TypeRoomSession {
		t.Fatalf("room session %+v", rs)
	}
	summary, details := workflowDetails(t, tc, rs.ID)
	if !strings.Contains(summary, room.ID.String()) || !strings.Contains(summary, agent.String()) {
		t.Fatalf("summary %q", summary)
	}
	if !strings.Contains(details, "live on node") {
		t.Fatalf("details %q", details)
	}

	host := session // a Dedicated host's id is its session's
	h := awaitListed(t, tc, fmt.Sprintf("JamHost='%s' AND JamKind='%s'", host, contract.TypeRuntimeHost),
		func(s string) bool { return s == string(domain.StageServing) })
	if h.ID != contract.RuntimeHostID(host) {
		t.Fatalf("host %+v", h)
	}
	if _, details := workflowDetails(t, tc, h.ID); !strings.Contains(details, "1 member(s)") {
		t.Fatalf("host details %q", details)
	}

	if _, err := workspaceOp(c, session, "export", api.WorkspaceOpRequest{}); err != nil {
		t.Fatal(err)
	}
	op := awaitListed(t, tc, fmt.Sprintf("JamWorkspace='%s'", session), func(s string) bool { return s == string(domain.StageDone) })
	if op.Type != contract.TypeWorkspaceOp {
		t.Fatalf("workspace operation %+v", op)
	}

	tmpl := templateOf(t, c, agent)
	cfg := tmpl.TemplateConfig
	idle := 900
	cfg.IdleSecs = &idle
	saveApplied(t, c, tmpl, cfg)
	ap := awaitListed(t, tc, fmt.Sprintf("JamTemplate='%s'", tmpl.ID), func(s string) bool { return s == string(domain.StageDone) })
	if ap.Type != contract.TypeTemplateApply {
		t.Fatalf("template apply %+v", ap)
	}

	// The Reconcile schedule's runs carry their kind, so a view can leave them out.
	wait.Eventually(t, 2*time.Minute, func() bool {
		return len(listJam(t, tc, fmt.Sprintf("JamKind='%s'", contract.TypeReconcile))) > 0
	}, "a Reconcile run tagged with its kind")
	for _, f := range listJam(t, tc, fmt.Sprintf("JamKind!='%s'", contract.TypeReconcile)) {
		if f.Type == contract.TypeReconcile {
			t.Fatalf("a Reconcile run is not tagged: %+v", f)
		}
	}
	must(t, c.Do(ctx, http.MethodGet, "/v1/rooms/"+room.ID.String(), nil, nil))
}
