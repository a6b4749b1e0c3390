package workflows

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
)

// ReconcileScheduleID names the Temporal Schedule that runs Reconcile.
const ReconcileScheduleID = contract.ReconcileScheduleID

// ReconcileInterval is how often the schedule runs Reconcile unless the operator says
// otherwise (JAM_RECONCILE_INTERVAL_SECS).
const ReconcileInterval = time.Minute

// maxPokesPerRun bounds one Reconcile run's history; the rest wait for the next run.
const maxPokesPerRun = 1000

// ReconcileReport is what one Reconcile run found and did (the contract's: `jam ops
// reconcile status` reads it).
type ReconcileReport = contract.ReconcileReport

// versionReconcileRetry gates telling failed sessions that a node gained their adapter (or,
// with the same commands, restarted since a failure its environment decides).
const versionReconcileRetry = "reconcile-retry-adapters"

// versionReconcileMove gates telling sessions on draining nodes that they can move.
const versionReconcileMove = "reconcile-move-off-draining"

// Reconcile heals lost pokes: every room session whose room has unsettled messages while its
// agent wants to run is poked (a live session runs a turn; a dormant one wakes). It changes
// no record itself; what it found is its result, visible in the Temporal UI.
func Reconcile(ctx workflow.Context) (ReconcileReport, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	var sess *activities.Sessions
	var found activities.BacklogReport
	if err := workflow.ExecuteActivity(actx, sess.FindBacklog).Get(ctx, &found); err != nil {
		return ReconcileReport{}, err
	}
	rep := ReconcileReport{StaleNodes: found.StaleNodes}
	ids := found.Sessions
	if len(ids) > maxPokesPerRun {
		rep.Deferred = len(ids) - maxPokesPerRun
		ids = ids[:maxPokesPerRun]
	}
	futures := make([]workflow.Future, len(ids))
	for i, id := range ids {
		futures[i] = workflow.SignalExternalWorkflow(ctx, contract.RoomSessionID(id), "", contract.SignalInbound, nil)
	}
	for i, f := range futures {
		if err := f.Get(ctx, nil); err == nil {
			rep.Poked++
			continue
		}
		// No running workflow: start it (abandoned, so it outlives this run); its first
		// step loads the backlog.
		// Tagged with its agent and room as every other start of it is, so `jam ops find`
		// and the Web UI find it (search attributes are not part of the replayed command).
		room := found.Rooms[ids[i]]
		in := contract.RoomSessionInput{RuntimeSession: ids[i], AgentID: room.Agent, RoomID: room.Room}
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:            contract.RoomSessionID(ids[i]),
			ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
			WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			TypedSearchAttributes: in.SearchTags().Attributes(contract.TypeRoomSession),
			StaticSummary:         in.SearchTags().Summary(contract.TypeRoomSession),
		})
		child := workflow.ExecuteChildWorkflow(cctx, RoomSession, in)
		if err := child.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("reconcile could not start a room session", "runtime_session", ids[i], "error", err)
			continue
		}
		rep.Started = append(rep.Started, ids[i])
	}
	if len(found.Retry) > 0 && workflow.GetVersion(ctx, versionReconcileRetry, workflow.DefaultVersion, 1) >= 1 {
		retry := found.Retry[:min(len(found.Retry), maxPokesPerRun)]
		futures := make([]workflow.Future, len(retry))
		for i, id := range retry {
			reason := found.RetryReasons[id]
			if reason == "" {
				reason = "a live node now has the runtime adapter"
			}
			futures[i] = workflow.SignalExternalWorkflow(ctx, contract.RoomSessionID(id), "", contract.SignalRetry,
				contract.RetrySignal{Reason: reason})
		}
		for _, f := range futures {
			if f.Get(ctx, nil) == nil {
				rep.Retried++
			}
		}
	}
	if len(found.Move) > 0 && workflow.GetVersion(ctx, versionReconcileMove, workflow.DefaultVersion, 1) >= 1 {
		move := found.Move[:min(len(found.Move), maxPokesPerRun)]
		futures := make([]workflow.Future, len(move))
		for i, m := range move {
			futures[i] = workflow.SignalExternalWorkflow(ctx, contract.RoomSessionID(m.RuntimeSession), "", contract.SignalMove,
				contract.MoveSignal{Node: m.Node})
		}
		for _, f := range futures {
			if f.Get(ctx, nil) == nil {
				rep.Moved++
			}
		}
	}
	if len(rep.StaleNodes) > 0 {
		workflow.GetLogger(ctx).Warn("stale nodes", "nodes", rep.StaleNodes)
	}
	return rep, nil
}

// reconcileAction starts a Reconcile run tagged JamKind=Reconcile, so its runs are found
// (or filtered out) by kind.
func reconcileAction() *client.ScheduleWorkflowAction {
	return &client.ScheduleWorkflowAction{
		ID:                    ReconcileScheduleID,
		Workflow:              Reconcile,
		TaskQueue:             contract.TaskQueue,
		TypedSearchAttributes: contract.Tags{}.Attributes(contract.TypeReconcile),
		StaticSummary:         "Reconcile: re-pokes sessions with backlog and marks stale nodes",
	}
}

// EnsureReconcileSchedule creates the Reconcile schedule, running every interval (0 is
// ReconcileInterval), unless it exists; an existing one with another interval is moved to
// this one. Every process that runs workflows calls it at start.
func EnsureReconcileSchedule(ctx context.Context, c client.Client, interval time.Duration) error {
	if interval <= 0 {
		interval = ReconcileInterval
	}
	spec := client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: interval}}}
	_, err := c.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:      ReconcileScheduleID,
		Spec:    spec,
		Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
		Action:  reconcileAction(),
	})
	var exists *serviceerror.AlreadyExists
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, temporal.ErrScheduleAlreadyRunning) && !errors.As(err, &exists):
		return fmt.Errorf("create the %s schedule: %w", ReconcileScheduleID, err)
	}
	h := c.ScheduleClient().GetHandle(ctx, ReconcileScheduleID)
	err = h.Update(ctx, client.ScheduleUpdateOptions{DoUpdate: func(in client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
		cur := in.Description.Schedule.Spec
		act, _ := in.Description.Schedule.Action.(*client.ScheduleWorkflowAction)
		tagged := act != nil && act.StaticSummary != ""
		if cur != nil && len(cur.Intervals) == 1 && cur.Intervals[0].Every == interval && tagged {
			return nil, temporal.ErrSkipScheduleUpdate
		}
		// A schedule made before its runs were tagged gets the tagged action too.
		in.Description.Schedule.Spec, in.Description.Schedule.Action = &spec, reconcileAction()
		return &client.ScheduleUpdate{Schedule: &in.Description.Schedule}, nil
	}})
	if err != nil {
		return fmt.Errorf("update the %s schedule's interval: %w", ReconcileScheduleID, err)
	}
	return nil
}
