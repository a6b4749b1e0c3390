package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
)

// GitHubReadiness asks a workspace's node whether its guest can reach and authenticate to
// GitHub repositories. It reads only.
func GitHubReadiness(ctx workflow.Context, in contract.GitHubReadinessInput) (contract.GitHubReadiness, error) {
	ctx = askNode(ctx, in.Node, contract.GitHubReadinessTimeout)
	var w *activities.Workspaces
	var out contract.GitHubReadiness
	err := workflow.ExecuteActivity(ctx, w.GitHubReadiness, in).Get(ctx, &out)
	return out, err
}
