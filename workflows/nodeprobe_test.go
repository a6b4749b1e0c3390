package workflows

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

func TestNodeProbeAsksTheNodesOwnQueueOnce(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	var n *activities.Node
	env.RegisterActivity(n)
	want := contract.NodeReport{Node: "w1", PID: 42, ReportedAt: time.Unix(0, 0).UTC(),
		CLIs: []domain.NodeCLI{{Command: "codex", Version: "0.169.0"}}}
	var queue string
	env.OnActivity(n.DescribeNode, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, _ activities.DescribeNodeInput) (contract.NodeReport, error) {
			queue = activity.GetInfo(ctx).TaskQueue
			return want, nil
		})
	env.ExecuteWorkflow(NodeProbe, contract.NodeProbeInput{Node: "w1"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	var got contract.NodeReport
	if err := env.GetWorkflowResult(&got); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("result %+v, %v", got, err)
	}
	if queue != contract.NodeTaskQueue("w1") {
		t.Fatalf("activity ran on %q, want the node queue", queue)
	}
}

func TestNodeProbeDoesNotRetryAFailingNode(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	var n *activities.Node
	env.RegisterActivity(n)
	calls := 0
	env.OnActivity(n.DescribeNode, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.DescribeNodeInput) (contract.NodeReport, error) {
			calls++
			return contract.NodeReport{}, errors.New("statfs failed")
		})
	env.ExecuteWorkflow(NodeProbe, contract.NodeProbeInput{Node: "w1"})
	var appErr *temporal.ApplicationError
	if err := env.GetWorkflowError(); !errors.As(err, &appErr) {
		t.Fatalf("workflow error %v, want the activity's failure", err)
	}
	if calls != 1 {
		t.Fatalf("activity ran %d times, want 1", calls)
	}
}
