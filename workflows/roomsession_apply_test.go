package workflows

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// applyEnv is a live RoomSession (one slow turn) whose configuration apply is observed.
type applyEnv struct {
	env        *testsuite.TestWorkflowEnvironment
	prepares   []int64 // the ConfigGeneration of each prepare
	failGen    int64   // a prepare of this candidate generation fails
	interrupts int
	teardowns  []domain.CheckpointReason
	ops        []string
	inTurnAt   []bool
}

func newApplyEnv() *applyEnv {
	var suite testsuite.WorkflowTestSuite
	e := &applyEnv{env: suite.NewTestWorkflowEnvironment()}
	e.env.RegisterActivity(&activities.Sessions{})
	e.env.RegisterActivity(&activities.Runtimes{})
	var sess *activities.Sessions
	var rt *activities.Runtimes
	backlog := 1
	e.env.OnActivity(sess.LoadSession, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.LoadSessionInput) (activities.LoadSessionResult, error) {
			return activities.LoadSessionResult{Backlog: backlog, Lazy: true, IdleSecs: 600, Node: "n1"}, nil
		})
	e.env.OnActivity(rt.PrepareRuntime, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.PrepareRuntimeInput) (activities.PrepareRuntimeResult, error) {
			e.prepares = append(e.prepares, in.ConfigGeneration)
			if in.ConfigGeneration != 0 && in.ConfigGeneration == e.failGen {
				return activities.PrepareRuntimeResult{}, contract.Fail("no such executable", "ExecutableRefused", nil)
			}
			return activities.PrepareRuntimeResult{Generation: int64(len(e.prepares)), IdlePolicy: domain.IdleAllow}, nil
		})
	e.env.OnActivity(rt.RunTurn, mock.Anything, mock.Anything).After(30 * time.Second).Return(
		func(context.Context, activities.RunTurnInput) (activities.RunTurnResult, error) {
			e.ops = append(e.ops, "turn")
			backlog = 0
			return activities.RunTurnResult{Outcome: domain.TurnComplete, Messages: 1, Settled: 1}, nil
		})
	e.env.OnActivity(rt.InterruptTurn, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.InterruptTurnInput) error { e.interrupts++; return nil })
	e.env.OnActivity(rt.TeardownRuntime, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.TeardownRuntimeInput) error {
			e.teardowns = append(e.teardowns, in.Reason)
			e.ops = append(e.ops, "teardown:"+string(in.Reason))
			return nil
		})
	e.env.OnActivity(sess.MarkApplying, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.ConfigRef) (bool, error) {
			e.ops = append(e.ops, "applying")
			return false, nil
		})
	e.env.OnActivity(sess.CommitConfig, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ConfigRef) (activities.CommitConfigResult, error) {
			e.ops = append(e.ops, "commit")
			return activities.CommitConfigResult{}, nil
		})
	e.env.OnActivity(sess.FailConfig, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.ConfigRef) error {
			if in.Reason == "" {
				return errors.New("a failure without a reason")
			}
			e.ops = append(e.ops, "failed")
			return nil
		})
	return e
}

func (e *applyEnv) run(t *testing.T, gen int64) error {
	t.Helper()
	var applyErr error = errors.New("not answered")
	e.env.RegisterDelayedCallback(func() {
		e.env.UpdateWorkflow(contract.UpdateApplyConfig, "apply", &testsuite.TestUpdateCallback{OnReject: func(err error) { applyErr = err },
			OnAccept: func() {}, OnComplete: func(_ interface{}, err error) { applyErr = err }}, contract.ApplyConfigRequest{Generation: gen})
	}, 5*time.Second)
	e.env.RegisterDelayedCallback(func() {
		v, _ := e.env.QueryWorkflow(contract.QueryState)
		var st contract.RoomSessionStatus
		_ = v.Get(&st)
		e.inTurnAt = append(e.inTurnAt, st.InTurn)
	}, 20*time.Second)
	e.env.RegisterDelayedCallback(func() { e.env.CancelWorkflow() }, time.Hour)
	e.env.ExecuteWorkflow(RoomSession, contract.RoomSessionInput{RuntimeSession: uuid.New()})
	return applyErr
}

// A room mid-turn applies after its turn completes, not during it: the turn is not
// interrupted, then the runtime is torn down (before_reset), the candidate started and only
// then committed.
func TestAConfigApplyWaitsForTheTurnBoundaryThenCommitsTheStartedCandidate(t *testing.T) {
	e := newApplyEnv()
	if err := e.run(t, 7); err != nil {
		t.Fatal(err)
	}
	if e.interrupts != 0 || len(e.inTurnAt) != 1 || !e.inTurnAt[0] {
		t.Fatalf("the turn was disturbed: %d interrupts, in turn at 20 s: %v", e.interrupts, e.inTurnAt)
	}
	if want := []string{"turn", "applying", "teardown:before_reset", "commit"}; !slices.Equal(e.ops[:4], want) {
		t.Fatalf("ops %v, want %v first", e.ops, want)
	}
	if !slices.Equal(e.prepares, []int64{0, 7}) {
		t.Fatalf("prepares %v: the original, then the candidate", e.prepares)
	}
}

// A candidate that cannot start is replaced by the old configuration again and the failure
// recorded; nothing is committed.
func TestAFailedCandidateRestoresTheOldConfigurationAndRecordsTheFailure(t *testing.T) {
	e := newApplyEnv()
	e.failGen = 7
	if err := e.run(t, 7); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(e.prepares, []int64{0, 7, 0}) {
		t.Fatalf("prepares %v: the original, the failed candidate, the original again", e.prepares)
	}
	if slices.Contains(e.ops, "commit") || !slices.Contains(e.ops, "failed") {
		t.Fatalf("ops %v", e.ops)
	}
}

// A turn refused because its host is being recreated for a template edit keeps the runtime
// (no teardown) and its messages, and is asked for again shortly.
func TestATurnRefusedDuringAHostRecreationWaitsWithoutTearingDown(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.Sessions{})
	env.RegisterActivity(&activities.Runtimes{})
	env.RegisterActivity(&activities.Hosts{})
	var sess *activities.Sessions
	var rt *activities.Runtimes
	var h *activities.Hosts
	backlog := 1
	env.OnActivity(sess.LoadSession, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.LoadSessionInput) (activities.LoadSessionResult, error) {
			return activities.LoadSessionResult{Backlog: backlog, Lazy: true, IdleSecs: 600, Node: "n1", Sandboxed: true}, nil
		})
	env.OnActivity(h.AcquireHost, mock.Anything, mock.Anything).Return(
		contract.HostLease{Host: uuid.New(), SandboxName: "jam-x", Node: "n1"}, nil)
	env.OnActivity(h.ReleaseHost, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(rt.PrepareRuntime, mock.Anything, mock.Anything).Return(
		activities.PrepareRuntimeResult{Generation: 1, IdlePolicy: domain.IdleAllow}, nil)
	permits := 0
	env.OnActivity(h.TurnPermit, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.TurnPermitInput) error {
			if in.Done {
				return nil
			}
			permits++
			if permits == 2 { // the prepare's permit passed; the first turn's is refused
				return contract.Fail("recreating", domain.ErrTypeHostReplacing, nil)
			}
			return nil
		})
	turns := 0
	env.OnActivity(rt.RunTurn, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.RunTurnInput) (activities.RunTurnResult, error) {
			turns++
			backlog = 0
			return activities.RunTurnResult{Outcome: domain.TurnComplete, Messages: 1, Settled: 1}, nil
		})
	var teardowns int
	env.OnActivity(rt.TeardownRuntime, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.TeardownRuntimeInput) error { teardowns++; return nil })
	env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, time.Minute)
	env.ExecuteWorkflow(RoomSession, contract.RoomSessionInput{RuntimeSession: uuid.New()})
	if teardowns != 0 || turns != 1 || permits < 3 {
		t.Fatalf("teardowns %d, turns %d, permits asked %d: the refused turn must wait, not tear down", teardowns, turns, permits)
	}
}
