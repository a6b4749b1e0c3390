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

// HostCleanup removes a runtime host whose every member is preserved: one cleanup per host,
// Prepared (after a fresh preflight, with the planned and retained bytes, the host taken out
// of service in the same transaction) → SandboxRemoved
// (ownership-proven `sbx rm`; an absent sandbox counts) → RootRemoved (never before the
// sandbox; an absent root counts) → Succeeded (host removed). Exports are never touched. A
// replay resumes from the recorded stage.
func HostCleanup(ctx workflow.Context, in contract.HostCleanupInput) (contract.HostCleanupResult, error) {
	if !in.ConfirmPermanent {
		return contract.HostCleanupResult{}, contract.Fail(
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
		TaskQueue: contract.NodeTaskQueue(in.Node), StartToCloseTimeout: workspaceByteTimeout, HeartbeatTimeout: runtimeHeartbeat,
		RetryPolicy: contract.Retry(temporal.RetryPolicy{MaximumInterval: 30 * time.Second}),
	})
	var cur *domain.HostCleanupOperation
	if err := workflow.ExecuteActivity(jam, rec.FindCleanup, activities.HostRef{Host: in.Host}).Get(ctx, &cur); err != nil {
		return contract.HostCleanupResult{}, err
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
		var rep contract.CleanupReport
		if err := workflow.ExecuteActivity(node, w.InspectCleanup, activities.HostRef{Host: in.Host}).Get(ctx, &rep); err != nil {
			return contract.HostCleanupResult{}, err
		}
		if len(rep.Blockers) > 0 {
			return contract.HostCleanupResult{Report: &rep}, contract.Fail(
				"host cleanup is blocked: "+strings.Join(rep.Blockers, "; "), domain.ErrTypeCleanupBlocked, nil, rep)
		}
		var id uuid.UUID
		if err := workflow.SideEffect(ctx, func(workflow.Context) any { return uuid.New() }).Get(&id); err != nil {
			return contract.HostCleanupResult{}, err
		}
		if err := stage(activities.CleanupStageInput{ID: id, Host: in.Host, Stage: domain.CleanupPrepared,
			PlannedRuntimeHostBytes: rep.PlannedRuntimeHostBytes, RetainedExportBytes: rep.RetainedExportBytes}); err != nil {
			return contract.HostCleanupResult{}, err
		}
	}
	checkQuiet := func() error {
		return workflow.ExecuteActivity(node, w.CheckQuiet, activities.HostRef{Host: in.Host}).Get(ctx, nil)
	}
	if cur.Stage == domain.CleanupPrepared {
		if err := checkQuiet(); err != nil {
			return contract.HostCleanupResult{Cleanup: *cur}, err
		}
		if err := workflow.ExecuteActivity(node, sb.RemoveSandbox, activities.HostSandboxInput{Host: in.Host}).Get(ctx, nil); err != nil &&
			!contract.Is(err, domain.ErrTypeNoSandbox) {
			return contract.HostCleanupResult{Cleanup: *cur}, err
		}
		if err := stage(activities.CleanupStageInput{ID: cur.ID, Host: in.Host, Stage: domain.CleanupSandboxRemoved}); err != nil {
			return contract.HostCleanupResult{Cleanup: *cur}, err
		}
	}
	if cur.Stage == domain.CleanupSandboxRemoved {
		if err := checkQuiet(); err != nil {
			return contract.HostCleanupResult{Cleanup: *cur}, err
		}
		var removed int64
		if err := workflow.ExecuteActivity(node, w.RemoveHostRoot, activities.RemoveHostRootInput{Cleanup: cur.ID,
			Host: in.Host}).Get(ctx, &removed); err != nil {
			return contract.HostCleanupResult{Cleanup: *cur}, err
		}
		if err := stage(activities.CleanupStageInput{ID: cur.ID, Host: in.Host, Stage: domain.CleanupRootRemoved,
			RemovedRuntimeHostBytes: removed}); err != nil {
			return contract.HostCleanupResult{Cleanup: *cur}, err
		}
	}
	if cur.Stage == domain.CleanupRootRemoved {
		if err := stage(activities.CleanupStageInput{ID: cur.ID, Host: in.Host, Stage: domain.CleanupSucceeded}); err != nil {
			return contract.HostCleanupResult{Cleanup: *cur}, err
		}
	}
	return contract.HostCleanupResult{Cleanup: *cur}, nil
}

// CleanupInspection asks the host's node for the cleanup preflight. It reads only.
func CleanupInspection(ctx workflow.Context, in contract.HostProbeInput) (contract.CleanupReport, error) {
	ctx = askNode(ctx, in.Node, contract.CleanupInspectionTimeout)
	var w *activities.Workspaces
	var out contract.CleanupReport
	err := workflow.ExecuteActivity(ctx, w.InspectCleanup, activities.HostRef{Host: in.Host}).Get(ctx, &out)
	return out, err
}

// HostMeasure asks the host's node how many bytes its root and session workspaces hold.
func HostMeasure(ctx workflow.Context, in contract.HostProbeInput) (contract.HostCapacity, error) {
	ctx = askNode(ctx, in.Node, contract.HostMeasureTimeout)
	var w *activities.Workspaces
	var out contract.HostCapacity
	err := workflow.ExecuteActivity(ctx, w.MeasureHost, activities.HostRef{Host: in.Host}).Get(ctx, &out)
	return out, err
}

// RemovalInspection asks the workspace's node what removing it would lose. It reads only.
func RemovalInspection(ctx workflow.Context, in contract.RemovalInspectionInput) (contract.RemovalReport, error) {
	ctx = askNode(ctx, in.Node, contract.RemovalInspectionTimeout)
	var w *activities.Workspaces
	var out contract.RemovalReport
	err := workflow.ExecuteActivity(ctx, w.InspectRemoval, in.Ref).Get(ctx, &out)
	return out, err
}
