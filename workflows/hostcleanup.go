package workflows

import (
	"strings"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// HostCleanupInput is an operator's confirmed removal of one whole runtime host.
type HostCleanupInput struct {
	Host             uuid.UUID `json:"host"`
	Node             string    `json:"node"`
	ConfirmPermanent bool      `json:"confirm_permanent"`
}

// HostCleanupResult is the cleanup record and, when it was refused, the preflight.
type HostCleanupResult struct {
	Cleanup domain.HostCleanupOperation `json:"cleanup"`
	Report  *activities.CleanupReport   `json:"report,omitempty"`
}

// CleanupInspectionTimeout bounds a preflight: an `sbx ls` (12 s), the verification of an
// export per member, and the pickup.
const CleanupInspectionTimeout = 10 * time.Minute

// HostCleanup removes a runtime host whose every member is preserved: one cleanup per host,
// Prepared (after a fresh preflight, with the planned and retained bytes, the host taken out
// of service in the same transaction) → SandboxRemoved
// (ownership-proven `sbx rm`; an absent sandbox counts) → RootRemoved (never before the
// sandbox; an absent root counts) → Succeeded (host removed). Exports are never touched. A
// replay resumes from the recorded stage.
func HostCleanup(ctx workflow.Context, in HostCleanupInput) (HostCleanupResult, error) {
	if !in.ConfirmPermanent {
		return HostCleanupResult{}, contract.Fail(
			"confirm_permanent must be true: the host's sandbox and files are removed for good", domain.ErrTypeValidation, nil)
	}
	var rec *activities.WorkspaceRecords
	var w *activities.Workspaces
	var sb *activities.Sandbox
	jam := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         contract.Retry(temporal.RetryPolicy{MaximumInterval: 30 * time.Second}),
	})
	node := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: NodeTaskQueue(in.Node), StartToCloseTimeout: workspaceByteTimeout, HeartbeatTimeout: runtimeHeartbeat,
		RetryPolicy: contract.Retry(temporal.RetryPolicy{MaximumInterval: 30 * time.Second}),
	})
	var cur *domain.HostCleanupOperation
	if err := workflow.ExecuteActivity(jam, rec.FindCleanup, activities.HostRef{Host: in.Host}).Get(ctx, &cur); err != nil {
		return HostCleanupResult{}, err
	}
	stage := func(s activities.CleanupStageInput) error {
		var op domain.HostCleanupOperation
		if err := workflow.ExecuteActivity(jam, rec.WriteCleanupStage, s).Get(ctx, &op); err != nil {
			return err
		}
		cur = &op
		return nil
	}
	if cur == nil {
		var rep activities.CleanupReport
		if err := workflow.ExecuteActivity(node, w.InspectCleanup, activities.HostRef{Host: in.Host}).Get(ctx, &rep); err != nil {
			return HostCleanupResult{}, err
		}
		if len(rep.Blockers) > 0 {
			return HostCleanupResult{Report: &rep}, contract.Fail(
				"host cleanup is blocked: "+strings.Join(rep.Blockers, "; "), domain.ErrTypeCleanupBlocked, nil, rep)
		}
		var id uuid.UUID
		if err := workflow.SideEffect(ctx, func(workflow.Context) any { return uuid.New() }).Get(&id); err != nil {
			return HostCleanupResult{}, err
		}
		if err := stage(activities.CleanupStageInput{ID: id, Host: in.Host, Stage: domain.CleanupPrepared,
			PlannedRuntimeHostBytes: rep.PlannedRuntimeHostBytes, RetainedExportBytes: rep.RetainedExportBytes}); err != nil {
			return HostCleanupResult{}, err
		}
	}
	checkQuiet := func() error {
		return workflow.ExecuteActivity(node, w.CheckQuiet, activities.HostRef{Host: in.Host}).Get(ctx, nil)
	}
	if cur.Stage == domain.CleanupPrepared {
		if err := checkQuiet(); err != nil {
			return HostCleanupResult{Cleanup: *cur}, err
		}
		if err := workflow.ExecuteActivity(node, sb.RemoveSandbox, activities.HostSandboxInput{Host: in.Host}).Get(ctx, nil); err != nil &&
			!contract.Is(err, domain.ErrTypeNoSandbox) {
			return HostCleanupResult{Cleanup: *cur}, err
		}
		if err := stage(activities.CleanupStageInput{ID: cur.ID, Host: in.Host, Stage: domain.CleanupSandboxRemoved}); err != nil {
			return HostCleanupResult{Cleanup: *cur}, err
		}
	}
	if cur.Stage == domain.CleanupSandboxRemoved {
		if err := checkQuiet(); err != nil {
			return HostCleanupResult{Cleanup: *cur}, err
		}
		var removed int64
		if err := workflow.ExecuteActivity(node, w.RemoveHostRoot, activities.RemoveHostRootInput{Cleanup: cur.ID,
			Host: in.Host}).Get(ctx, &removed); err != nil {
			return HostCleanupResult{Cleanup: *cur}, err
		}
		if err := stage(activities.CleanupStageInput{ID: cur.ID, Host: in.Host, Stage: domain.CleanupRootRemoved,
			RemovedRuntimeHostBytes: removed}); err != nil {
			return HostCleanupResult{Cleanup: *cur}, err
		}
	}
	if cur.Stage == domain.CleanupRootRemoved {
		if err := stage(activities.CleanupStageInput{ID: cur.ID, Host: in.Host, Stage: domain.CleanupSucceeded}); err != nil {
			return HostCleanupResult{Cleanup: *cur}, err
		}
	}
	return HostCleanupResult{Cleanup: *cur}, nil
}

// CleanupInspection asks the host's node for the cleanup preflight. It reads only.
func CleanupInspection(ctx workflow.Context, in HostProbeInput) (activities.CleanupReport, error) {
	ctx = askNode(ctx, in.Node, CleanupInspectionTimeout)
	var w *activities.Workspaces
	var out activities.CleanupReport
	err := workflow.ExecuteActivity(ctx, w.InspectCleanup, activities.HostRef{Host: in.Host}).Get(ctx, &out)
	return out, err
}

// HostMeasureTimeout bounds measuring a host's bytes on its node.
const HostMeasureTimeout = 30 * time.Second

// HostMeasure asks the host's node how many bytes its root and session workspaces hold.
func HostMeasure(ctx workflow.Context, in HostProbeInput) (activities.HostCapacity, error) {
	ctx = askNode(ctx, in.Node, HostMeasureTimeout)
	var w *activities.Workspaces
	var out activities.HostCapacity
	err := workflow.ExecuteActivity(ctx, w.MeasureHost, activities.HostRef{Host: in.Host}).Get(ctx, &out)
	return out, err
}

// RemovalInspectionInput names a workspace (with its owner) on its host's node.
type RemovalInspectionInput struct {
	Node string                  `json:"node"`
	Ref  activities.WorkspaceRef `json:"ref"`
}

// RemovalInspectionTimeout bounds a removal inspection: up to 16 repositories at 4 s each
// per git call, and the byte count.
const RemovalInspectionTimeout = 3 * time.Minute

// RemovalInspection asks the workspace's node what removing it would lose. It reads only.
func RemovalInspection(ctx workflow.Context, in RemovalInspectionInput) (activities.RemovalReport, error) {
	ctx = askNode(ctx, in.Node, RemovalInspectionTimeout)
	var w *activities.Workspaces
	var out activities.RemovalReport
	err := workflow.ExecuteActivity(ctx, w.InspectRemoval, in.Ref).Get(ctx, &out)
	return out, err
}
