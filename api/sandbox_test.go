package api

import (
	"context"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/mock"
	commonpb "go.temporal.io/api/common/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/sandbox"
)

// failedRun is a workflow run whose result is the failure of its activity.
type failedRun struct {
	client.WorkflowRun
	err error
}

func (r failedRun) GetID() string                  { return "id" }
func (r failedRun) GetRunID() string               { return "run" }
func (r failedRun) Get(context.Context, any) error { return r.err }
func (r failedRun) GetWithOptions(context.Context, any, client.WorkflowRunGetOptions) error {
	return r.err
}

// activityFailure is what a workflow's Get returns when its activity failed with an
// application error of type typ, as it crosses Temporal.
func activityFailure(activity, msg string, typ domain.ErrorType) error {
	return temporal.GetDefaultFailureConverter().FailureToError(&failurepb.Failure{
		Message: "activity error",
		FailureInfo: &failurepb.Failure_ActivityFailureInfo{ActivityFailureInfo: &failurepb.ActivityFailureInfo{
			ActivityType: &commonpb.ActivityType{Name: activity}}},
		Cause: &failurepb.Failure{Message: msg, FailureInfo: &failurepb.Failure_ApplicationFailureInfo{
			ApplicationFailureInfo: &failurepb.ApplicationFailureInfo{Type: string(typ), NonRetryable: true}}},
	})
}

// A node without sbx answers `jam sandbox inventory` with the reason and where to look, as a
// precondition, not as a node failure to find in its worker's log.
func TestASandboxInventoryOfANodeWithoutSbxSaysWhy(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.liveNode("dev", domain.ProviderACP)
	// What the node's activity says on a machine without sbx
	// (TestASandboxInventoryWithoutSbxIsSandboxUnavailable).
	msg := "no usable sbx on this node: " + sandbox.LocateProblem("", exec.ErrNotFound)
	h.temporal.On("ExecuteWorkflow", mock.Anything, mock.Anything, contract.TypeSandboxInventory, mock.Anything).
		Return(failedRun{err: activityFailure("SandboxInventory", msg, domain.ErrTypeSandboxUnavailable)}, nil)
	r := h.call(http.MethodGet, "/v1/sandbox/inventory", testToken, nil, nil)
	e := r.errorBody(t)
	if r.status != http.StatusUnprocessableEntity || e.Code != domain.CodePrecondition {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	for _, want := range []string{"node dev has no usable sbx", "install Docker Sandboxes or set " + sandbox.EnvSbx, "jam sandbox support --node dev"} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("message %q does not say %q", e.Message, want)
		}
	}
}

// Any other failure of the node stays a node failure.
func TestASandboxInventoryThatFailsOtherwiseIsTheNodesFailure(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.liveNode("dev", domain.ProviderACP)
	h.temporal.On("ExecuteWorkflow", mock.Anything, mock.Anything, contract.TypeSandboxInventory, mock.Anything).
		Return(failedRun{err: activityFailure("SandboxInventory", "sandbox inventory: sbx ls: exit status 1", "")}, nil)
	if r := h.call(http.MethodGet, "/v1/sandbox/inventory", testToken, nil, nil); r.status != http.StatusBadGateway {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
}
