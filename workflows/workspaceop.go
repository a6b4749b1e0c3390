package workflows

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// workspaceByteTimeout bounds one byte step (an export or restore of a large workspace, or
// its verification); heartbeats tell a dead worker apart long before it.
const workspaceByteTimeout = 2 * time.Hour

// WorkspaceOp runs one operation on a workspace; its id (WorkspaceOp:<workspace>, conflict
// policy FAIL) and the store's one-running-operation index keep it to one at a time. The
// Running operation (with its immutable intent) is persisted before any side effect, so an
// operation interrupted anywhere is finished from its intent — by this run when the worker
// dies, or by retry_reconcile when the run itself failed. Every step is idempotent.
func WorkspaceOp(ctx workflow.Context, in contract.WorkspaceOpInput) (contract.WorkspaceOpResult, error) {
	if in.Action == domain.WorkspaceActionDeleteExport && !in.ConfirmPermanent {
		return contract.WorkspaceOpResult{}, contract.Fail(
			"confirm_permanent must be true: a deleted export cannot be restored", domain.ErrTypeValidation, nil)
	}
	stage := domain.StageBeginning
	flush := publishStage(ctx, contract.TypeWorkspaceOp, in.SearchTags(), func() string { return string(stage) },
		func() string { return fmt.Sprintf("%s of workspace %s: %s", in.Action, in.Workspace, stage) })
	defer flush(ctx)
	var rec *activities.WorkspaceRecords
	jam := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         contract.Retry(temporal.RetryPolicy{MaximumInterval: 30 * time.Second}),
	})
	var begin activities.BeginWorkspaceOpResult
	if err := workflow.ExecuteActivity(jam, rec.BeginWorkspaceOp, activities.BeginWorkspaceOpInput{Workspace: in.Workspace,
		Action: in.Action, ExportID: in.ExportID, Retention: in.Retention, ForceDiscard: in.ForceDiscard, Repo: in.Repo}).Get(ctx, &begin); err != nil {
		return contract.WorkspaceOpResult{}, err
	}
	out := contract.WorkspaceOpResult{Operation: begin.Op, Resumed: begin.Resumed}
	if begin.Done {
		stage = domain.StageDone
		return out, nil
	}
	r := workspaceRun{ctx: ctx, jam: jam, begin: begin, out: &out, stage: &stage,
		node: workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue: contract.NodeTaskQueue(begin.Host.Node), StartToCloseTimeout: workspaceByteTimeout, HeartbeatTimeout: runtimeHeartbeat,
			RetryPolicy: contract.Retry(temporal.RetryPolicy{MaximumInterval: 30 * time.Second}),
		}),
		ref: contract.WorkspaceRef{Workspace: begin.Workspace.ID, Host: begin.Workspace.RuntimeHostID,
			Session: begin.Workspace.RuntimeSessionID, Export: begin.Intent.ExportID},
	}
	if begin.Intent.Action.IsRepoAction() {
		// A new kind of step, reached only by requests that name it: no recorded history
		// takes this branch, so it needs no version gate.
		err := r.repository()
		stage = domain.StageDone
		return out, err
	}
	var err error
	switch begin.Intent.Action {
	case domain.WorkspaceActionArchive:
		err = r.archive()
	case domain.WorkspaceActionExport:
		err = r.export()
	case domain.WorkspaceActionRestore:
		err = r.restore()
	case domain.WorkspaceActionDeleteExport:
		err = r.deleteExport()
	default:
		err = contract.Fail(fmt.Sprintf("operation %s has no runnable intent", begin.Op.ID), domain.ErrTypeValidation, nil)
	}
	if err != nil {
		err = r.failed(err)
	}
	stage = domain.StageDone
	return out, err
}

type workspaceRun struct {
	ctx       workflow.Context
	jam, node workflow.Context
	begin     activities.BeginWorkspaceOpResult
	ref       contract.WorkspaceRef
	out       *contract.WorkspaceOpResult
	// stage is the step the operation is at (published as JamStage).
	stage *domain.WorkflowStage
}

// versionArchiveSettles gates the archive's wait for the host's checkpoint after the stop.
const versionArchiveSettles = "archive-settles-host"

// archive: stop the live session (BeforeStop checkpoint, held so no message wakes it), mark
// its membership dormant, inspect removal afresh, export, prune per retention, remove the
// live session directory (after the export verifies), mark the workspace archived. Shared
// siblings are untouched.
func (r *workspaceRun) archive() error {
	var h *activities.Hosts
	members := workflow.WithActivityOptions(r.ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute, HeartbeatTimeout: runtimeHeartbeat,
		RetryPolicy: &temporal.RetryPolicy{MaximumInterval: 30 * time.Second},
	})
	*r.stage = domain.StageStopping
	if err := workflow.ExecuteActivity(members, h.StopMember, activities.StopMemberInput{RuntimeSession: r.ref.Session,
		Reason: domain.StopOperator}).Get(r.ctx, nil); err != nil {
		return fmt.Errorf("stop session %s: %w", r.ref.Session, err)
	}
	// The stop released the host, whose park checkpoints what the member last wrote beside
	// this workflow: the export must wait for that generation, or a restore resumes from an
	// older one (or not at all, its newest checkpoint gone with the host).
	if r.ref.Host != uuid.Nil && workflow.GetVersion(r.ctx, versionArchiveSettles, workflow.DefaultVersion, 1) >= 1 {
		settle := workflow.WithActivityOptions(r.ctx, workflow.ActivityOptions{
			StartToCloseTimeout: checkpointTimeout + 10*time.Minute, HeartbeatTimeout: runtimeHeartbeat,
			RetryPolicy: &temporal.RetryPolicy{MaximumInterval: 30 * time.Second},
		})
		if err := workflow.ExecuteActivity(settle, h.SettleHost, activities.SettleHostInput{Host: r.ref.Host}).Get(r.ctx, nil); err != nil {
			return fmt.Errorf("checkpoint host %s after the stop: %w", r.ref.Host, err)
		}
	}
	var rec *activities.WorkspaceRecords
	if err := workflow.ExecuteActivity(r.jam, rec.MarkDormant, activities.MarkDormantInput{RuntimeSession: r.ref.Session}).Get(r.ctx, nil); err != nil {
		return err
	}
	var w *activities.Workspaces
	if !r.begin.ExportRecorded {
		// A resumed archive that already published its export passed this inspection; its
		// live bytes may be partly removed since.
		var rep contract.RemovalReport
		*r.stage = domain.StageInspecting
		if err := workflow.ExecuteActivity(r.node, w.InspectRemoval, r.ref).Get(r.ctx, &rep); err != nil {
			return err
		}
		if len(rep.Blockers) > 0 && !r.begin.Intent.ForceDiscard {
			r.out.Blockers = rep.Blockers
			return contract.Fail("removal is blocked: "+strings.Join(rep.Blockers, "; "),
				domain.ErrTypeRemovalBlocked, nil)
		}
	}
	if err := r.exportOnly(); err != nil {
		return err
	}
	if r.begin.Intent.Retention == domain.RetainLatest {
		*r.stage = domain.StagePruning
		if err := workflow.ExecuteActivity(r.node, w.PruneExports, activities.PruneExportsInput{Workspace: r.ref.Workspace,
			Keep: r.ref.Export}).Get(r.ctx, nil); err != nil {
			return err
		}
	}
	*r.stage = domain.StageRemoving
	if err := workflow.ExecuteActivity(r.node, w.RemoveSessionBytes, r.ref).Get(r.ctx, nil); err != nil {
		return err
	}
	return r.finish(activities.FinishWorkspaceOpInput{State: domain.OpSucceeded, ResultClass: domain.ResultArchived,
		WorkspaceState: domain.WorkspaceArchived})
}

// exportOnly creates (or verifies, on a retry) the export and publishes its record.
func (r *workspaceRun) exportOnly() error {
	var w *activities.Workspaces
	var rec *activities.WorkspaceRecords
	var e domain.WorkspaceExport
	*r.stage = domain.StageExporting
	if err := workflow.ExecuteActivity(r.node, w.CreateExport, r.ref).Get(r.ctx, &e); err != nil {
		return err
	}
	if err := workflow.ExecuteActivity(r.jam, rec.RecordExport, e).Get(r.ctx, nil); err != nil {
		return err
	}
	r.out.Export = &e
	return nil
}

func (r *workspaceRun) export() error {
	if err := r.exportOnly(); err != nil {
		return err
	}
	return r.finish(activities.FinishWorkspaceOpInput{State: domain.OpSucceeded, ResultClass: domain.ResultExported})
}

// restore: the export's owner must be this workspace; its checkpoint comes back first, then
// the workspace through a private staging directory; an archived or removed host returns to
// parked. The session stays held until it is restarted.
func (r *workspaceRun) restore() error {
	var w *activities.Workspaces
	*r.stage = domain.StageRestoring
	if err := workflow.ExecuteActivity(r.node, w.RestoreExport, r.ref).Get(r.ctx, nil); err != nil {
		return err
	}
	return r.finish(activities.FinishWorkspaceOpInput{State: domain.OpSucceeded, ResultClass: domain.ResultRestoredExport,
		WorkspaceState: domain.WorkspaceReady, ReviveHost: true})
}

// deleteExport removes one export's bytes, then stamps its record; the export id is in the
// operation's intent, so a replay deletes exactly that one.
func (r *workspaceRun) deleteExport() error {
	var w *activities.Workspaces
	*r.stage = domain.StageDeleting
	if err := workflow.ExecuteActivity(r.node, w.DeleteExportBytes, r.ref).Get(r.ctx, nil); err != nil {
		return err
	}
	return r.finish(activities.FinishWorkspaceOpInput{State: domain.OpSucceeded, ResultClass: domain.ResultExportDeleted})
}

// repoResults are the result classes of the repository actions.
var repoResults = map[domain.WorkspaceAction]string{
	domain.WorkspaceActionClone: domain.ResultCloned, domain.WorkspaceActionBranch: domain.ResultBranched,
	domain.WorkspaceActionCommit: domain.ResultCommitted, domain.WorkspaceActionPush: domain.ResultPushed,
	domain.WorkspaceActionPullRequest: domain.ResultPullRequest, domain.WorkspaceActionChecks: domain.ResultChecked,
}

// repository runs git or gh once in the session's workspace. The step is never retried: a
// push or a pull request cut by a crash (its heartbeat stops) is recorded Failed, and a new
// request runs it again if the operator or agent still wants it.
func (r *workspaceRun) repository() error {
	var w *activities.Workspaces
	*r.stage = domain.StageRepository
	once := workflow.WithActivityOptions(r.ctx, workflow.ActivityOptions{
		TaskQueue:           contract.NodeTaskQueue(r.begin.Host.Node),
		StartToCloseTimeout: repoStepTimeout, HeartbeatTimeout: runtimeHeartbeat,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var res domain.RepoResult
	err := workflow.ExecuteActivity(once, w.RunRepoOp, activities.RepoOpInput{Ref: r.ref, Action: r.begin.Intent.Action,
		Request: *r.begin.Intent.Repo}).Get(r.ctx, &res)
	if err != nil {
		msg := "the worker running it stopped before it finished; it is not replayed: check the repository and ask again"
		var app *temporal.ApplicationError
		if errors.As(err, &app) {
			msg = app.Message()
		}
		if ferr := r.finish(activities.FinishWorkspaceOpInput{State: domain.OpFailed, ResultClass: domain.ResultFailed,
			Error: domain.Truncate(msg, 2048)}); ferr != nil {
			return errors.Join(err, ferr)
		}
		return err
	}
	r.out.Repository = &res
	return r.finish(activities.FinishWorkspaceOpInput{State: domain.OpSucceeded, ResultClass: repoResults[r.begin.Intent.Action]})
}

// repoStepTimeout bounds one repository step: the longest call (a clone) and its checks.
const repoStepTimeout = 12 * time.Minute

func (r *workspaceRun) finish(in activities.FinishWorkspaceOpInput) error {
	var rec *activities.WorkspaceRecords
	in.Op = r.begin.Op.ID
	var op domain.WorkspaceOperation
	*r.stage = domain.StageFinishing
	if err := workflow.ExecuteActivity(r.jam, rec.FinishWorkspaceOp, in).Get(r.ctx, &op); err != nil {
		return err
	}
	r.out.Operation = op
	return nil
}

// failed records a refusal (nothing destructive happened: the request did not fit) as the
// operation's outcome. Any other failure leaves the operation running, to be finished from
// its intent by retry_reconcile: an archive half done must complete, never be abandoned.
func (r *workspaceRun) failed(err error) error {
	var app *temporal.ApplicationError
	if !errors.As(err, &app) {
		return err
	}
	in := activities.FinishWorkspaceOpInput{State: domain.OpFailed, Error: app.Message()}
	cls, _ := domain.ErrorClassOf(app.Type())
	switch cls.Type {
	case domain.ErrTypeRemovalBlocked:
		in.ResultClass, in.WorkspaceState = domain.ResultRemovalBlocked, domain.WorkspaceRemovalBlocked
	case domain.ErrTypeWorkspaceRefused, domain.ErrTypeValidation:
		if (r.out.Export != nil || r.begin.ExportRecorded) && r.begin.Intent.Action == domain.WorkspaceActionArchive {
			// Past its export an archive is only ever finished.
			return err
		}
		in.ResultClass = domain.ResultRefused
	default:
		return err
	}
	if ferr := r.finish(in); ferr != nil {
		return errors.Join(err, ferr)
	}
	return err
}
