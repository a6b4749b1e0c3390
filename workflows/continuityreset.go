package workflows

import (
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// ContinuityReset is the explicit "start fresh" of a runtime host whose continuity cannot be
// honoured: fresh evidence is inspected and must match what the operator confirmed; the
// immutable reset record (every session and binding mapped to a newly minted replacement) is
// persisted first; the host's runtimes are stopped and held; the rooms move to their
// replacements, the source memberships go dormant, the source workspaces and finally the
// source host are archived; the old session workflows end and the replacements start.
// Nothing is deleted. Every step is idempotent, so a replay after a crash completes it once.
func ContinuityReset(ctx workflow.Context, in contract.ContinuityResetInput) (domain.ContinuityReset, error) {
	var h *activities.Hosts
	var ck *activities.Checkpoints
	jam := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: 30 * time.Second},
	})
	var found activities.FindResetResult
	if err := workflow.ExecuteActivity(jam, h.FindReset, activities.FindResetInput{Host: in.Host}).Get(ctx, &found); err != nil {
		return domain.ContinuityReset{}, err
	}
	reset := found.Reset
	if !found.Found {
		var rep contract.ContinuityReport
		if err := workflow.ExecuteActivity(askNode(ctx, in.Node, contract.ContinuityInspectionTimeout), ck.InspectContinuity,
			activities.InspectContinuityInput{Host: in.Host}).Get(ctx, &rep); err != nil {
			return domain.ContinuityReset{}, err
		}
		if rep.EvidenceChecksum != in.EvidenceChecksum {
			return domain.ContinuityReset{}, contract.Fail(
				"the continuity evidence changed since it was inspected; inspect again", domain.ErrTypeEvidenceChanged, nil)
		}
		if !rep.CanStartFresh {
			return domain.ContinuityReset{}, contract.Fail(
				fmt.Sprintf("continuity is %s and runtime running is %v: start-fresh is not offered", rep.Status, rep.RuntimeRunning),
				domain.ErrTypeNotResettable, nil)
		}
		var id uuid.UUID
		if err := workflow.SideEffect(ctx, func(workflow.Context) any { return uuid.New() }).Get(&id); err != nil {
			return domain.ContinuityReset{}, err
		}
		if err := workflow.ExecuteActivity(jam, h.PrepareReset, activities.PrepareResetInput{ID: id, Host: in.Host,
			EvidenceChecksum: in.EvidenceChecksum}).Get(ctx, &reset); err != nil {
			return domain.ContinuityReset{}, err
		}
	}
	members := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute, HeartbeatTimeout: runtimeHeartbeat,
		RetryPolicy: &temporal.RetryPolicy{MaximumInterval: 30 * time.Second},
	})
	// Held, so no message wakes a source session between here and the move.
	for _, m := range reset.Mapping {
		if err := workflow.ExecuteActivity(members, h.StopMember, activities.StopMemberInput{RuntimeSession: m.SourceSession,
			Reason: domain.StopOperator}).Get(ctx, nil); err != nil {
			return reset, fmt.Errorf("stop source session %s: %w", m.SourceSession, err)
		}
	}
	if err := workflow.ExecuteActivity(jam, h.ApplyReset, activities.ApplyResetInput{Reset: reset}).Get(ctx, nil); err != nil {
		return reset, err
	}
	for _, m := range reset.Mapping {
		if err := workflow.ExecuteActivity(members, h.RetireMember, activities.MemberInput{RuntimeSession: m.SourceSession}).Get(ctx, nil); err != nil {
			return reset, fmt.Errorf("retire source session %s: %w", m.SourceSession, err)
		}
	}
	for _, m := range reset.Mapping {
		if !m.Active {
			continue
		}
		if err := workflow.ExecuteActivity(jam, h.WakeMember, activities.MemberInput{RuntimeSession: m.ReplacementSession,
			AgentID: m.AgentID, RoomID: m.RoomID, BindingID: m.ReplacementBinding}).Get(ctx, nil); err != nil {
			return reset, fmt.Errorf("start replacement session %s: %w", m.ReplacementSession, err)
		}
	}
	return reset, nil
}
