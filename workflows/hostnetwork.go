package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
)

// HostNetwork asks the host's node for its sandbox's network journal and a bounded
// readiness check. It reads only.
func HostNetwork(ctx workflow.Context, in contract.HostProbeInput) (contract.NetworkReport, error) {
	ctx = askNode(ctx, in.Node, contract.HostNetworkTimeout)
	var sb *activities.Sandbox
	var out contract.NetworkReport
	err := workflow.ExecuteActivity(ctx, sb.InspectNetwork, activities.HostNetworkInput{Host: in.Host}).Get(ctx, &out)
	return out, err
}
