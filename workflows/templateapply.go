package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// templateApplyMemberTimeout bounds one room's apply: it waits for a running turn to end,
// then replaces the runtime (and, failing, restores it).
const templateApplyMemberTimeout = 2 * time.Hour

// TemplateApply applies one saved generation of a template (TemplateApply:<template>:<gen>)
// to every room made from it: each room's RoomSession moves its runtime to the generation at
// its turn boundary (a dormant room takes it at once), committing it only once a runtime
// accepted it; a runtime host whose compatibility fingerprint the edit changed is recreated
// once through its RuntimeHost reset with the replacement, preserving every member. A
// generation a newer save superseded does nothing and can never become effective.
func TemplateApply(ctx workflow.Context, in contract.TemplateApplyInput) (contract.TemplateApplyResult, error) {
	stage := domain.StagePlanning
	flush := publishStage(ctx, contract.TypeTemplateApply, in.SearchTags(), func() string { return string(stage) },
		func() string { return fmt.Sprintf("template %s generation %d: %s", in.Template, in.Generation, stage) })
	defer func() {
		stage = domain.StageDone
		flush(ctx)
	}()
	var sess *activities.Sessions
	var h *activities.Hosts
	out := contract.TemplateApplyResult{Sessions: []contract.TemplateApplyOne{}, Hosts: []contract.TemplateApplyOne{}}
	jam := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: 30 * time.Second},
	})
	var plan activities.TemplateApplyPlan
	if err := workflow.ExecuteActivity(jam, sess.PlanTemplateApply, in).Get(ctx, &plan); err != nil {
		return out, err
	}
	if plan.Superseded {
		out.Superseded = true
		return out, nil
	}
	stage = domain.StageApplying
	long := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: templateApplyMemberTimeout, HeartbeatTimeout: runtimeHeartbeat,
		RetryPolicy: contract.Retry(temporal.RetryPolicy{MaximumInterval: 30 * time.Second}),
	})
	// Rooms apply independently: one in a long turn does not hold the others back.
	sessions := make([]workflow.Future, len(plan.Sessions))
	for i, s := range plan.Sessions {
		sessions[i] = workflow.ExecuteActivity(long, h.ApplyMember, activities.ConfigRef{RuntimeSession: s, Generation: in.Generation})
	}
	// A recreation that fails is not retried for ever: its members keep the configuration
	// they had, recorded as failed.
	replace := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: templateApplyMemberTimeout, HeartbeatTimeout: runtimeHeartbeat,
		RetryPolicy: contract.Retry(temporal.RetryPolicy{MaximumInterval: 30 * time.Second, MaximumAttempts: 3}),
	})
	hosts := make([]workflow.Future, len(plan.Hosts))
	for i, rep := range plan.Hosts {
		hosts[i] = workflow.ExecuteActivity(replace, h.ReplaceHost, contract.CommitHostReplacementInput{Host: rep.Host,
			Template: in.Template, Generation: in.Generation, Fingerprint: rep.Fingerprint})
	}
	for i, f := range sessions {
		one := contract.TemplateApplyOne{ID: plan.Sessions[i]}
		if err := f.Get(ctx, nil); err != nil {
			one.Error = errorText(err)
		}
		out.Sessions = append(out.Sessions, one)
	}
	for i, f := range hosts {
		one := contract.TemplateApplyOne{ID: plan.Hosts[i].Host}
		if err := f.Get(ctx, &one.Replaced); err != nil {
			one.Error = errorText(err)
		}
		if !one.Replaced {
			reason := "the runtime host was not recreated for this generation"
			if one.Error != "" {
				reason += ": " + one.Error
			}
			for _, m := range plan.Hosts[i].Members {
				_ = workflow.ExecuteActivity(jam, sess.FailConfig, activities.ConfigRef{RuntimeSession: m,
					Generation: in.Generation, Reason: reason}).Get(ctx, nil)
			}
		}
		out.Hosts = append(out.Hosts, one)
	}
	return out, nil
}
