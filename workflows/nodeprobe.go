package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/sandbox"
)

// NodeProbe asks a node's own worker to describe its machine. The activity runs on the
// node's task queue with no retries, so the probe answers the operator's question "is this
// node's worker serving right now?", and what provider CLIs it can run, within
// contract.NodeProbeTimeout.
func NodeProbe(ctx workflow.Context, in contract.NodeProbeInput) (contract.NodeReport, error) {
	ctx = askNode(ctx, in.Node, contract.NodeProbeTimeout)
	var n *activities.Node
	var report contract.NodeReport
	err := workflow.ExecuteActivity(ctx, n.DescribeNode, activities.DescribeNodeInput{}).Get(ctx, &report)
	return report, err
}

// SandboxProbe asks a node's own worker to classify its `sbx` support.
func SandboxProbe(ctx workflow.Context, in contract.NodeProbeInput) (sandbox.Support, error) {
	ctx = askNode(ctx, in.Node, contract.SandboxProbeTimeout)
	var sb *activities.Sandbox
	var out sandbox.Support
	err := workflow.ExecuteActivity(ctx, sb.ProbeSandboxSupport, activities.ProbeSandboxInput{}).Get(ctx, &out)
	return out, err
}

// askNode runs one activity on the node's own queue, once, picked up within contract.NodeProbeTimeout
// and finished within bound: a question to the node's worker as it is right now.
func askNode(ctx workflow.Context, node string, bound time.Duration) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              contract.NodeTaskQueue(node),
		ScheduleToStartTimeout: contract.NodeProbeTimeout,
		StartToCloseTimeout:    bound,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
}

// SandboxInventory asks a node's own worker to classify its sandboxes and owner markers. It
// reads only.
func SandboxInventory(ctx workflow.Context, in contract.NodeProbeInput) (sandbox.Inventory, error) {
	ctx = askNode(ctx, in.Node, contract.SandboxInventoryTimeout)
	var sb *activities.Sandbox
	var out sandbox.Inventory
	err := workflow.ExecuteActivity(ctx, sb.SandboxInventory, activities.SandboxInventoryInput{}).Get(ctx, &out)
	return out, err
}

// ContinuityInspection asks the host's node to inspect its continuity. It reads only.
func ContinuityInspection(ctx workflow.Context, in contract.HostProbeInput) (contract.ContinuityReport, error) {
	ctx = askNode(ctx, in.Node, contract.ContinuityInspectionTimeout)
	var ck *activities.Checkpoints
	var out contract.ContinuityReport
	err := workflow.ExecuteActivity(ctx, ck.InspectContinuity, activities.InspectContinuityInput{Host: in.Host}).Get(ctx, &out)
	return out, err
}
