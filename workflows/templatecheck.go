package workflows

import (
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
)

// TemplateCheck asks a node's own worker whether a template being saved could start there
// (its variables set, its command resolving). It reads only. Pickup and answer are each
// bounded by contract.TemplateCheckTimeout, shorter than a probe's: a save waits for it, and
// a node that is slow to answer is left unknown rather than holding the save.
func TemplateCheck(ctx workflow.Context, in contract.TemplateCheckInput) (contract.TemplateCheck, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              contract.NodeTaskQueue(in.Node),
		ScheduleToStartTimeout: contract.TemplateCheckTimeout,
		StartToCloseTimeout:    contract.TemplateCheckTimeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var n *activities.Node
	var out contract.TemplateCheck
	err := workflow.ExecuteActivity(ctx, n.CheckTemplate, in).Get(ctx, &out)
	return out, err
}
