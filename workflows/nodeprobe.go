package workflows

import (
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/sandbox"
)

// NodeProbeTimeout bounds how long a probe waits for the node's worker to pick the task up
// and answer; a node that does not answer within it is reported as not serving.
const NodeProbeTimeout = 10 * time.Second

// NodeProbeInput names the node to probe.
type NodeProbeInput struct {
	Node string `json:"node"`
}

// NodeProbe asks a node's own worker to describe its machine. The activity runs on the
// node's task queue with no retries, so the probe answers the operator's question "is this
// node's worker serving right now?" within NodeProbeTimeout.
func NodeProbe(ctx workflow.Context, in NodeProbeInput) (activities.NodeReport, error) {
	ctx = askNode(ctx, in.Node, NodeProbeTimeout)
	var n *activities.Node
	var report activities.NodeReport
	err := workflow.ExecuteActivity(ctx, n.DescribeNode, activities.DescribeNodeInput{}).Get(ctx, &report)
	return report, err
}

// SandboxProbeTimeout bounds a sandbox support probe: the probe's own 12 s and the pickup.
const SandboxProbeTimeout = 15 * time.Second

// SandboxProbe asks a node's own worker to classify its `sbx` support.
func SandboxProbe(ctx workflow.Context, in NodeProbeInput) (sandbox.Support, error) {
	ctx = askNode(ctx, in.Node, SandboxProbeTimeout)
	var sb *activities.Sandbox
	var out sandbox.Support
	err := workflow.ExecuteActivity(ctx, sb.ProbeSandboxSupport, activities.ProbeSandboxInput{}).Get(ctx, &out)
	return out, err
}

// askNode runs one activity on the node's own queue, once, picked up within NodeProbeTimeout
// and finished within bound: a question to the node's worker as it is right now.
func askNode(ctx workflow.Context, node string, bound time.Duration) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              NodeTaskQueue(node),
		ScheduleToStartTimeout: NodeProbeTimeout,
		StartToCloseTimeout:    bound,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
}

// SandboxInventoryTimeout bounds an inventory: one `sbx ls` (12 s), the markers on disk and
// the runtime hosts, plus the pickup.
const SandboxInventoryTimeout = 20 * time.Second

// SandboxInventory asks a node's own worker to classify its sandboxes and owner markers. It
// reads only.
func SandboxInventory(ctx workflow.Context, in NodeProbeInput) (sandbox.Inventory, error) {
	ctx = askNode(ctx, in.Node, SandboxInventoryTimeout)
	var sb *activities.Sandbox
	var out sandbox.Inventory
	err := workflow.ExecuteActivity(ctx, sb.SandboxInventory, activities.SandboxInventoryInput{}).Get(ctx, &out)
	return out, err
}

// ContinuityInspectionTimeout bounds an inspection: the store reads and the newest
// checkpoint's verification on the host's node, plus the pickup.
const ContinuityInspectionTimeout = 30 * time.Second

// HostProbeInput names a runtime host and the node it is pinned to.
type HostProbeInput struct {
	Node string    `json:"node"`
	Host uuid.UUID `json:"host"`
}

// ContinuityInspection asks the host's node to inspect its continuity. It reads only.
func ContinuityInspection(ctx workflow.Context, in HostProbeInput) (activities.ContinuityReport, error) {
	ctx = askNode(ctx, in.Node, ContinuityInspectionTimeout)
	var ck *activities.Checkpoints
	var out activities.ContinuityReport
	err := workflow.ExecuteActivity(ctx, ck.InspectContinuity, activities.InspectContinuityInput{Host: in.Host}).Get(ctx, &out)
	return out, err
}
