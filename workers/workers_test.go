package workers

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/testsupport/temporaltest"
	"github.com/jam-dev/jam/internal/testsupport/teststore"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

func TestWorkersRegisterTheNodeAndKeepItsHeartbeatAlive(t *testing.T) {
	ts := temporaltest.Start(t)
	st := teststore.SQLite(t)
	ctx := context.Background()
	w, err := Start(ctx, Config{
		Client: temporaltest.Dial(t, ts.FrontendAddress()), Store: st, Node: "n1", DataDir: t.TempDir(),
		Version: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		HeartbeatInterval: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	first, err := st.GetNode(ctx, "n1")
	if err != nil {
		t.Fatalf("node not registered at start: %v", err)
	}
	wait.Eventually(t, 5*time.Second, func() bool {
		n, err := st.GetNode(ctx, "n1")
		return err == nil && n.HeartbeatAt.After(first.HeartbeatAt)
	}, "a heartbeat after the first")

	// An operator who clears the row does not make the node vanish for good.
	if _, err := st.DB().ExecContext(ctx, `DELETE FROM nodes WHERE name = 'n1'`); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 5*time.Second, func() error {
		_, err := st.GetNode(ctx, "n1")
		return err
	}, "the cleared node to register again")

	w.Stop()
	stopped, _ := st.GetNode(ctx, "n1")
	wait.Never(t, 200*time.Millisecond, func() bool {
		after, _ := st.GetNode(ctx, "n1")
		return !after.HeartbeatAt.Equal(stopped.HeartbeatAt)
	}, "a stopped worker heartbeating")
}

func TestWorkersRefuseABadNodeName(t *testing.T) {
	if _, err := Start(context.Background(), Config{Node: "no spaces"}); err == nil {
		t.Fatal("accepted")
	}
}

func TestAWorkerDisplacedByAnotherMachineStopsServing(t *testing.T) {
	ts := temporaltest.Start(t)
	st := teststore.SQLite(t)
	ctx := context.Background()
	w, err := Start(ctx, Config{
		Client: temporaltest.Dial(t, ts.FrontendAddress()), Store: st, Node: "n1", DataDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), HeartbeatInterval: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	// Another machine takes the name over (as after this worker looked stale).
	if _, err := st.DB().ExecContext(ctx, `UPDATE nodes SET hostname = 'elsewhere', pid = 1 WHERE name = 'n1'`); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-w.Fatal():
		if !errors.Is(err, store.ErrNodeTaken) {
			t.Fatalf("fatal error %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the displaced worker kept serving")
	}
}

// Stopping the workers lets a running activity finish instead of cutting it off.
func TestStopLetsRunningActivitiesFinish(t *testing.T) {
	ts := temporaltest.Start(t)
	st := teststore.SQLite(t)
	tc := temporaltest.Dial(t, ts.FrontendAddress())
	ctx := context.Background()
	started, finished := make(chan struct{}), make(chan struct{})
	slow := func(ctx context.Context) error {
		close(started)
		time.Sleep(time.Second)
		close(finished)
		return nil
	}
	w, err := Start(ctx, Config{
		Client: tc, Store: st, Node: "n1", DataDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Register: func(_, node worker.Registry) {
			node.RegisterActivityWithOptions(slow, activity.RegisterOptions{Name: "SlowTestActivity"})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	wf := func(ctx workflow.Context) error {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue: contract.NodeTaskQueue("n1"), StartToCloseTimeout: time.Minute,
		})
		return workflow.ExecuteActivity(ctx, "SlowTestActivity").Get(ctx, nil)
	}
	// The workflow runs on a separate worker so only the node worker's drain is under test.
	wfWorker := worker.New(tc, "drain-test", worker.Options{})
	wfWorker.RegisterWorkflowWithOptions(wf, workflow.RegisterOptions{Name: "DrainTest"})
	if err := wfWorker.Start(); err != nil {
		t.Fatal(err)
	}
	defer wfWorker.Stop()
	if _, err := tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{TaskQueue: "drain-test"}, "DrainTest"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("activity never started")
	}
	w.Stop()
	select {
	case <-finished:
	default:
		t.Fatal("Stop returned while the activity was still running")
	}
}
