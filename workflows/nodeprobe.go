package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/activities"
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
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              NodeTaskQueue(in.Node),
		ScheduleToStartTimeout: NodeProbeTimeout,
		StartToCloseTimeout:    NodeProbeTimeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	var n *activities.Node
	var report activities.NodeReport
	err := workflow.ExecuteActivity(ctx, n.DescribeNode, activities.DescribeNodeInput{}).Get(ctx, &report)
	return report, err
}
