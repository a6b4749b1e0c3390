package contract

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/jam-dev/jam/internal/domain"
)

// StartPolicy is how a workflow of one type is started: what a second start under the same
// id does while one runs (Conflict) and after one ended (Reuse).
type StartPolicy struct {
	Reuse    enumspb.WorkflowIdReusePolicy
	Conflict enumspb.WorkflowIdConflictPolicy
	// Timeout bounds the whole run (probes); 0 is none.
	Timeout time.Duration
}

// startPolicies declares each operation workflow's start policy once.
var startPolicies = map[string]StartPolicy{
	// Asked again, a reset, deletion or cleanup joins the running one, and after a
	// failure resumes from its persisted record.
	TypeContinuityReset:    {enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY, enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING, 0},
	TypeCheckpointDeletion: {enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY, enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING, 0},
	TypeHostCleanup:        {enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE, enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING, 0},
	// One running operation per workspace: a second is refused.
	TypeWorkspaceOp: {enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE, enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL, 0},
	// A template generation is applied once.
	TypeTemplateApply: {enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY, enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING, 0},
	// Read-only probes: concurrent requests share one run, each bounded.
	TypeNodeProbe:            probe(NodeProbeTimeout),
	TypeSandboxProbe:         probe(SandboxProbeTimeout),
	TypeSandboxInventory:     probe(SandboxInventoryTimeout),
	TypeContinuityInspection: probe(ContinuityInspectionTimeout),
	TypeCleanupInspection:    probe(CleanupInspectionTimeout),
	TypeHostMeasure:          probe(HostMeasureTimeout),
	TypeHostNetwork:          probe(HostNetworkTimeout),
	TypeRemovalInspection:    probe(RemovalInspectionTimeout),
	TypeGitHubReadiness:      probe(GitHubReadinessTimeout),
	TypeTemplateCheck:        probe(TemplateCheckTimeout),
}

func probe(bound time.Duration) StartPolicy {
	return StartPolicy{enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE, enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING, 2 * bound}
}

// PolicyOf is the start policy of a workflow type; unknown types use the existing run.
func PolicyOf(typ string) StartPolicy {
	if p, ok := startPolicies[typ]; ok {
		return p
	}
	return StartPolicy{enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE, enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING, 0}
}

// Start starts (or joins, per its policy) the workflow typ under id on the shared queue.
func Start(ctx context.Context, c client.Client, typ, id string, in any) (client.WorkflowRun, error) {
	p := PolicyOf(typ)
	run, err := c.ExecuteWorkflow(ctx, TaggedStart(client.StartWorkflowOptions{ID: id, TaskQueue: TaskQueue,
		WorkflowIDReusePolicy: p.Reuse, WorkflowIDConflictPolicy: p.Conflict, WorkflowExecutionTimeout: p.Timeout,
		// A FAIL policy must say so; without it the SDK answers with the running workflow's handle.
		WorkflowExecutionErrorWhenAlreadyStarted: p.Conflict == enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL}, typ, in), typ, in)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", id, err)
	}
	return run, nil
}

// StartHostUpdate sends an update to an entity workflow (a runtime host's, a room
// session's) and returns once it accepted it (its validator ran), not when it completed: an
// operation tracks the rest.
func StartHostUpdate(ctx context.Context, c client.Client, host, updateID, name string, arg any) (runID string, err error) {
	args := []any{}
	if arg != nil {
		args = append(args, arg)
	}
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{UpdateID: updateID, WorkflowID: host,
		UpdateName: name, Args: args, WaitForStage: client.WorkflowUpdateStageAccepted})
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", name, host, err)
	}
	return h.RunID(), nil
}

// Outcome is what Temporal says of an operation: done with its raw result, or done with
// err (an ApplicationError classifies through the error table), or still running.
type Outcome struct {
	Done   bool
	Result json.RawMessage
	Err    error
	// Stage is the activity the operation's workflow waits on ("" when none or unknown).
	Stage string
}

// Observe reports an operation's outcome, waiting up to wait for it to finish.
func Observe(ctx context.Context, c client.Client, op domain.Operation, wait time.Duration) (Outcome, error) {
	if op.UpdateID != "" {
		// An update's outcome is only read by polling its handle, which answers at once
		// when the update completed; a zero wait would never see it.
		wait = max(wait, time.Second)
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var raw json.RawMessage
	var err error
	if op.UpdateID != "" {
		err = c.GetWorkflowUpdateHandle(client.GetWorkflowUpdateHandleOptions{WorkflowID: op.WorkflowID,
			RunID: op.RunID, UpdateID: op.UpdateID}).Get(wctx, &raw)
	} else {
		if wait <= 0 {
			d, derr := c.DescribeWorkflowExecution(ctx, op.WorkflowID, op.RunID)
			if derr != nil {
				return Outcome{}, fmt.Errorf("describe %s: %w", op.WorkflowID, derr)
			}
			if d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
				return Outcome{Stage: stageOf(d.GetPendingActivities())}, nil
			}
			wctx = ctx
		}
		err = c.GetWorkflow(wctx, op.WorkflowID, op.RunID).Get(wctx, &raw)
	}
	switch {
	case err == nil:
		return Outcome{Done: true, Result: raw}, nil
	case ctx.Err() != nil:
		return Outcome{}, ctx.Err()
	case errors.Is(err, context.DeadlineExceeded) || wctx.Err() != nil:
		return stageNow(ctx, c, op), nil
	}
	var app *temporal.ApplicationError
	var canceled *temporal.CanceledError
	var terminated *temporal.TerminatedError
	var timeout *temporal.TimeoutError
	if errors.As(err, &app) || errors.As(err, &canceled) || errors.As(err, &terminated) || errors.As(err, &timeout) {
		return Outcome{Done: true, Err: err}, nil
	}
	return Outcome{}, fmt.Errorf("observe %s: %w", op.WorkflowID, err)
}

func stageNow(ctx context.Context, c client.Client, op domain.Operation) Outcome {
	if op.UpdateID != "" {
		return Outcome{}
	}
	d, err := c.DescribeWorkflowExecution(ctx, op.WorkflowID, op.RunID)
	if err != nil {
		return Outcome{}
	}
	return Outcome{Stage: stageOf(d.GetPendingActivities())}
}

// stageOf names the activity a workflow waits on: its current stage as an operator sees it.
func stageOf(pending []*workflowpb.PendingActivityInfo) string {
	for _, p := range pending {
		if n := p.GetActivityType().GetName(); n != "" {
			return n
		}
	}
	return ""
}
