package workflows

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// sessionEnv is a RoomSession under the test suite with its activities mocked.
type sessionEnv struct {
	t   *testing.T
	env *testsuite.TestWorkflowEnvironment
	id  uuid.UUID
	// backlog is what LoadSession reports; RunTurn settles it.
	backlog  int
	lazy     bool
	stopped  bool
	policy   domain.IdlePolicy
	prepares int
	turns    int
	loads    int
	// full is how many more wakes find every node full (LoadSession names no node).
	full int
	// teardowns records every teardown reason.
	teardowns []domain.CheckpointReason
	// turnErr, when set, fails the next RunTurn once.
	turnErr error
	// turnTakes is how long (simulated) each RunTurn runs.
	turnTakes time.Duration
	// prepareErr, when set, decides whether a PrepareRuntime fails.
	prepareErr func(activities.PrepareRuntimeInput) error
}

func newSessionEnv(t *testing.T, opts ...func(*sessionEnv)) *sessionEnv {
	var suite testsuite.WorkflowTestSuite
	e := &sessionEnv{t: t, env: suite.NewTestWorkflowEnvironment(), id: uuid.New(), lazy: true, policy: domain.IdleAllow}
	for _, o := range opts {
		o(e)
	}
	e.env.RegisterActivity(&activities.Sessions{})
	e.env.RegisterActivity(&activities.Runtimes{})
	var sess *activities.Sessions
	var rt *activities.Runtimes
	e.env.OnActivity(sess.LoadSession, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.LoadSessionInput) (activities.LoadSessionResult, error) {
			e.loads++
			out := activities.LoadSessionResult{Backlog: e.backlog, Lazy: e.lazy, IdleSecs: 2, Node: "n1", AgentStopped: e.stopped}
			if e.full > 0 && e.backlog > 0 {
				e.full--
				out.Node, out.Waiting = "", "every live node that runs acp is full or draining (1 full, 0 draining)"
			}
			return out, nil
		})
	e.env.OnActivity(rt.PrepareRuntime, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.PrepareRuntimeInput) (activities.PrepareRuntimeResult, error) {
			e.prepares++
			if e.prepareErr != nil {
				if err := e.prepareErr(in); err != nil {
					return activities.PrepareRuntimeResult{}, err
				}
			}
			return activities.PrepareRuntimeResult{Generation: int64(e.prepares), PID: 100 + e.prepares, IdlePolicy: e.policy}, nil
		})
	e.env.OnActivity(rt.RunTurn, mock.Anything, mock.Anything).After(e.turnTakes).Return(
		func(_ context.Context, in activities.RunTurnInput) (activities.RunTurnResult, error) {
			if err := e.turnErr; err != nil {
				e.turnErr = nil
				return activities.RunTurnResult{}, err
			}
			e.turns++
			n := e.backlog
			e.backlog = 0
			return activities.RunTurnResult{Outcome: domain.TurnComplete, Messages: n, Settled: n}, nil
		})
	e.env.OnActivity(rt.TeardownRuntime, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.TeardownRuntimeInput) error {
			e.teardowns = append(e.teardowns, in.Reason)
			return nil
		})
	e.env.OnActivity(rt.InterruptTurn, mock.Anything, mock.Anything).Return(nil)
	return e
}

// at runs f at simulated time d after start.
func (e *sessionEnv) at(d time.Duration, f func()) { e.env.RegisterDelayedCallback(f, d) }

func (e *sessionEnv) poke() { e.env.SignalWorkflow(contract.SignalInbound, nil) }

func (e *sessionEnv) state() contract.RoomSessionStatus {
	e.t.Helper()
	v, err := e.env.QueryWorkflow(contract.QueryState)
	if err != nil {
		e.t.Fatalf("query: %v", err)
	}
	var st contract.RoomSessionStatus
	if err := v.Get(&st); err != nil {
		e.t.Fatal(err)
	}
	return st
}

// updateResult is where an update ends up: rejected at once by its validator, or completed
// once the main loop has done the work.
type updateResult struct {
	done bool
	err  error
}

// update sends an update; validator rejections are known on return, completions later.
func (e *sessionEnv) update(name string, arg any) *updateResult {
	r := &updateResult{}
	e.env.UpdateWorkflow(name, uuid.NewString(), &testsuite.TestUpdateCallback{
		OnReject:   func(err error) { r.done, r.err = true, err },
		OnAccept:   func() {},
		OnComplete: func(_ interface{}, err error) { r.done, r.err = true, err },
	}, arg)
	return r
}

// completed fails the test unless the update finished without error.
func (r *updateResult) completed(t *testing.T, what string) {
	t.Helper()
	if !r.done || r.err != nil {
		t.Errorf("%s: done %v, error %v", what, r.done, r.err)
	}
}

// run executes the workflow; end removes the session finally at simulated time d so the
// entity workflow completes.
func (e *sessionEnv) run(end time.Duration) {
	e.t.Helper()
	e.at(end, func() { e.update(contract.UpdateRemove, contract.RemoveRequest{Final: true}) })
	e.env.ExecuteWorkflow(RoomSession, contract.RoomSessionInput{RuntimeSession: e.id})
	if !e.env.IsWorkflowCompleted() {
		e.t.Fatal("workflow did not complete")
	}
	if err := e.env.GetWorkflowError(); err != nil {
		e.t.Fatalf("workflow error: %v", err)
	}
}

func TestRoomSessionRegistersDormantAndStartsNothingWithoutBacklog(t *testing.T) {
	e := newSessionEnv(t)
	e.at(time.Second, func() {
		e.poke()
	})
	e.at(2*time.Second, func() {
		if st := e.state(); st.Phase != domain.PhaseDormant || st.Presence != domain.PresenceDormant {
			t.Errorf("state %+v", st)
		}
	})
	e.run(time.Minute)
	if e.prepares != 0 || e.turns != 0 {
		t.Fatalf("prepares %d turns %d, want none", e.prepares, e.turns)
	}
}

func TestRoomSessionWakesOnceForABurstAndAnswersIt(t *testing.T) {
	e := newSessionEnv(t)
	e.at(time.Second, func() {
		e.backlog = 3
		e.poke()
		e.poke()
		e.poke()
	})
	e.at(2*time.Second, func() {
		st := e.state()
		if st.Phase != domain.PhaseLive || st.Generation != 1 || st.PID != 101 || st.Node != "n1" {
			t.Errorf("state %+v", st)
		}
	})
	e.run(time.Second * 3 / 2 * 2)
	if e.prepares != 1 || e.loads != 2 {
		t.Fatalf("prepares %d loads %d, want the registration's load and one wake for the burst", e.prepares, e.loads)
	}
	if e.turns < 1 {
		t.Fatalf("turns %d", e.turns)
	}
}

func TestRoomSessionBindsLiveWhenTheLifecycleIsNotLazy(t *testing.T) {
	e := newSessionEnv(t)
	e.lazy = false
	e.at(time.Hour, func() {
		if st := e.state(); st.Phase != domain.PhaseLive {
			t.Errorf("not lazy: state %+v, want live without a message and never reaped", st)
		}
	})
	e.run(2 * time.Hour)
	if e.prepares != 1 || len(e.teardowns) != 1 || e.teardowns[0] != domain.CheckpointBeforeRemove {
		t.Fatalf("prepares %d teardowns %v", e.prepares, e.teardowns)
	}
}

func TestIdleReapStopsTheRuntimeBeforeStopAndTheNextMessageWakesIt(t *testing.T) {
	e := newSessionEnv(t)
	e.at(time.Second, func() { e.backlog = 1; e.poke() })
	e.at(10*time.Second, func() {
		if st := e.state(); st.Phase != domain.PhaseDormant {
			t.Errorf("after idle threshold: %+v", st)
		}
		e.backlog = 1
		e.poke()
	})
	e.at(11*time.Second, func() {
		if st := e.state(); st.Phase != domain.PhaseLive || st.Generation != 2 {
			t.Errorf("after wake: %+v", st)
		}
	})
	e.run(12 * time.Second)
	if e.prepares != 2 || len(e.teardowns) < 1 || e.teardowns[0] != domain.CheckpointBeforeStop {
		t.Fatalf("prepares %d teardowns %v", e.prepares, e.teardowns)
	}
}

func TestIdleReapKeepsKeepAliveRuntimes(t *testing.T) {
	e := newSessionEnv(t)
	e.policy = domain.IdleKeepAlive
	e.at(time.Second, func() { e.backlog = 1; e.poke() })
	e.at(time.Hour, func() {
		if st := e.state(); st.Phase != domain.PhaseLive {
			t.Errorf("keep-alive runtime reaped: %+v", st)
		}
	})
	e.run(2 * time.Hour)
	if len(e.teardowns) != 1 || e.teardowns[0] != domain.CheckpointBeforeRemove {
		t.Fatalf("teardowns %v, want only the final removal", e.teardowns)
	}
}

func TestAStoppedAgentIsNotWokenByMessages(t *testing.T) {
	e := newSessionEnv(t)
	e.stopped = true
	e.at(time.Second, func() { e.backlog = 2; e.poke() })
	e.run(time.Minute)
	if e.prepares != 0 {
		t.Fatalf("a stopped agent's session woke %d times", e.prepares)
	}
}

func TestSessionStopHoldsTheRoomDownUntilRestart(t *testing.T) {
	e := newSessionEnv(t)
	e.at(time.Second, func() { e.backlog = 1; e.poke() })
	var stop, restart *updateResult
	e.at(time.Second*3/2, func() {
		stop = e.update(contract.UpdateStop, contract.StopRequest{Reason: string(domain.StopOperator)})
	})
	e.at(time.Second*13/8, func() {
		stop.completed(t, "stop")
		if st := e.state(); st.Phase != domain.PhaseDormant || !st.Held {
			t.Errorf("after stop: %+v", st)
		}
		e.backlog = 1
		e.poke()
	})
	e.at(time.Second*7/4, func() {
		if e.prepares != 1 {
			t.Errorf("a held session woke on a message")
		}
		restart = e.update(contract.UpdateRestart, contract.RestartRequest{})
	})
	e.at(time.Second*9/5, func() {
		restart.completed(t, "restart")
		if st := e.state(); st.Phase != domain.PhaseLive || st.Held {
			t.Errorf("after restart: %+v", st)
		}
	})
	e.run(time.Second * 19 / 10)
	if e.prepares != 2 || len(e.teardowns) < 1 || e.teardowns[0] != domain.CheckpointBeforeStop {
		t.Fatalf("prepares %d teardowns %v", e.prepares, e.teardowns)
	}
}

func TestAgentRestartBringsBackOnlyRoomsWithBacklog(t *testing.T) {
	e := newSessionEnv(t)
	e.at(time.Second, func() { e.backlog = 1; e.poke() })
	var restart *updateResult
	e.at(time.Second*3/2, func() { restart = e.update(contract.UpdateRestart, contract.RestartRequest{OnlyIfBacklog: true}) })
	e.at(time.Second*7/4, func() {
		restart.completed(t, "restart")
		if st := e.state(); st.Phase != domain.PhaseDormant {
			t.Errorf("a room without backlog came back after an agent restart: %+v", st)
		}
	})
	e.run(time.Second * 2)
	if e.prepares != 1 {
		t.Fatalf("prepares %d", e.prepares)
	}
}

func TestUpdateValidatorsRejectBadInputBeforeHistory(t *testing.T) {
	e := newSessionEnv(t)
	var bogus, remove, restart, stop, again *updateResult
	e.at(time.Second, func() {
		bogus = e.update(contract.UpdateStop, contract.StopRequest{Reason: "because"})
		remove = e.update(contract.UpdateRemove, contract.RemoveRequest{})
	})
	e.at(2*time.Second, func() {
		if !bogus.done || !contract.Is(bogus.err, domain.ErrTypeValidation) {
			t.Errorf("bogus stop reason: %+v", bogus)
		}
		remove.completed(t, "remove")
		restart = e.update(contract.UpdateRestart, contract.RestartRequest{})
		stop = e.update(contract.UpdateStop, contract.StopRequest{Reason: string(domain.StopOperator)})
		again = e.update(contract.UpdateRemove, contract.RemoveRequest{})
	})
	e.at(3*time.Second, func() {
		for what, r := range map[string]*updateResult{"restart": restart, "stop": stop, "second remove": again} {
			if !r.done || !contract.Is(r.err, domain.ErrTypeRetired) {
				t.Errorf("%s of a retired session: %+v", what, r)
			}
		}
	})
	e.run(time.Minute)
}

func TestARuntimeLostMidTurnGoesDormantAndTheQueuedMessageWakesIt(t *testing.T) {
	for name, lost := range map[string]error{
		"worker restarted":  contract.Fail("gone", domain.ErrTypeRuntimeNotLive, nil),
		"heartbeat timeout": temporal.NewTimeoutError(0, errors.New("heartbeat")),
	} {
		t.Run(name, func(t *testing.T) {
			e := newSessionEnv(t)
			e.turnErr = lost
			e.at(time.Second, func() { e.backlog = 1; e.poke() })
			e.run(time.Minute)
			if e.prepares != 2 || e.turns != 1 || e.backlog != 0 {
				t.Fatalf("prepares %d turns %d backlog %d: want a re-prepare and one answered turn", e.prepares, e.turns, e.backlog)
			}
		})
	}
}

func TestRuntimeExitedBetweenTurnsShowsDisconnectedUntilWoken(t *testing.T) {
	e := newSessionEnv(t)
	e.at(time.Second, func() { e.backlog = 1; e.poke() })
	e.at(time.Second*3/2, func() {
		e.env.SignalWorkflow(contract.SignalRuntimeExited, contract.RuntimeExitedSignal{Generation: 1, Reason: domain.RuntimeExitedIdle})
	})
	e.at(time.Second*7/4, func() {
		if st := e.state(); st.Phase != domain.PhaseDormant || st.Presence != domain.PresenceDisconnected {
			t.Errorf("after exit: %+v", st)
		}
		e.env.SignalWorkflow(contract.SignalRuntimeExited, contract.RuntimeExitedSignal{Generation: 7, Reason: domain.RuntimeExitedIdle})
		e.backlog = 1
		e.poke()
	})
	e.at(time.Second*9/5, func() {
		if st := e.state(); st.Phase != domain.PhaseLive || st.Presence != domain.PresenceLive || st.Generation != 2 {
			t.Errorf("after wake: %+v", st)
		}
	})
	e.run(time.Second * 2)
}

func TestRoomSessionContinuesAsNewCarryingItsState(t *testing.T) {
	old := maxTurnsPerRun
	maxTurnsPerRun = 2
	t.Cleanup(func() { maxTurnsPerRun = old })
	e := newSessionEnv(t)
	e.at(time.Second, func() { e.backlog = 1; e.poke() })
	e.at(time.Second*3/2, func() { e.backlog = 1; e.poke() })
	e.env.ExecuteWorkflow(RoomSession, contract.RoomSessionInput{RuntimeSession: e.id})
	var can *workflow.ContinueAsNewError
	if err := e.env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("want continue-as-new, got %v", err)
	}
	var next contract.RoomSessionInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if next.State == nil || next.State.Phase != domain.PhaseLive || next.State.Generation != 1 || next.State.Turns != 2 {
		t.Fatalf("carried state %+v", next.State)
	}
}

func TestReconcilePokesSessionsWithBacklogAndStartsAMissingOne(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.Sessions{})
	env.RegisterWorkflow(RoomSession)
	running, missing := uuid.New(), uuid.New()
	var sess *activities.Sessions
	agent, room := uuid.New(), uuid.New()
	env.OnActivity(sess.FindBacklog, mock.Anything).Return(activities.BacklogReport{
		Sessions: []uuid.UUID{running, missing}, StaleNodes: []string{"gone"},
		Rooms: map[uuid.UUID]activities.SessionRoom{missing: {Agent: agent, Room: room}}}, nil)
	env.OnSignalExternalWorkflow(mock.Anything, contract.RoomSessionID(running), "", contract.SignalInbound, mock.Anything).Return(nil)
	env.OnSignalExternalWorkflow(mock.Anything, contract.RoomSessionID(missing), "", contract.SignalInbound, mock.Anything).Return(errors.New("not found"))
	started := false
	env.OnWorkflow(RoomSession, mock.Anything, mock.Anything).Return(
		func(_ workflow.Context, in contract.RoomSessionInput) error {
			// The started workflow carries its agent and room, so its search attributes name them.
			started = in.RuntimeSession == missing && in.AgentID == agent && in.RoomID == room
			return nil
		})
	env.ExecuteWorkflow(Reconcile)
	var rep ReconcileReport
	if err := env.GetWorkflowResult(&rep); err != nil {
		t.Fatal(err)
	}
	if rep.Poked != 1 || len(rep.Started) != 1 || rep.Started[0] != missing || !started ||
		len(rep.StaleNodes) != 1 || rep.StaleNodes[0] != "gone" {
		t.Fatalf("report %+v, started %v", rep, started)
	}
}

// A stop whose handler is still interrupting the turn when continue-as-new is due, and a
// restart queued behind it: the run must serve the restart instead of waiting for every
// handler (the restart's handler waits for the loop).
func TestAnUpdateQueuedWhileContinueAsNewWaitsIsServed(t *testing.T) {
	old := maxTurnsPerRun
	maxTurnsPerRun = 1
	t.Cleanup(func() { maxTurnsPerRun = old })
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(10 * time.Second)
	env.RegisterActivity(&activities.Sessions{})
	env.RegisterActivity(&activities.Runtimes{})
	var sess *activities.Sessions
	var rt *activities.Runtimes
	backlog := 0
	env.OnActivity(sess.LoadSession, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.LoadSessionInput) (activities.LoadSessionResult, error) {
			return activities.LoadSessionResult{Backlog: backlog, Lazy: true, IdleSecs: 600, Node: "n1"}, nil
		})
	env.OnActivity(rt.PrepareRuntime, mock.Anything, mock.Anything).Return(activities.PrepareRuntimeResult{Generation: 1, IdlePolicy: domain.IdleAllow}, nil)
	env.OnActivity(rt.RunTurn, mock.Anything, mock.Anything).After(10*time.Second).Return(activities.RunTurnResult{Outcome: domain.TurnCancelled}, nil)
	env.OnActivity(rt.TeardownRuntime, mock.Anything, mock.Anything).Return(nil)
	env.OnActivity(rt.InterruptTurn, mock.Anything, mock.Anything).After(20 * time.Second).Return(nil)
	var stopDone, restartDone bool
	env.RegisterDelayedCallback(func() { backlog = 1; env.SignalWorkflow(contract.SignalInbound, nil) }, time.Second)
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(contract.UpdateStop, "s", &testsuite.TestUpdateCallback{OnReject: func(error) {}, OnAccept: func() {},
			OnComplete: func(interface{}, error) { stopDone = true }}, contract.StopRequest{Reason: string(domain.StopOperator)})
	}, 5*time.Second)
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(contract.UpdateRestart, "r", &testsuite.TestUpdateCallback{OnReject: func(error) {}, OnAccept: func() {},
			OnComplete: func(interface{}, error) { restartDone = true }}, contract.RestartRequest{OnlyIfBacklog: true})
	}, 15*time.Second)
	env.ExecuteWorkflow(RoomSession, contract.RoomSessionInput{RuntimeSession: uuid.New()})
	if !stopDone || !restartDone {
		t.Fatalf("stop done %v, restart done %v (workflow: %v)", stopDone, restartDone, env.GetWorkflowError())
	}
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("want continue-as-new after serving both, got %v", err)
	}
}

// A stop that arrives while the runtime is still being prepared is served before any turn:
// it does not wait out a turn that has not started (the messages stay queued).
func TestAStopDuringPrepareRunsNoTurn(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.Sessions{})
	env.RegisterActivity(&activities.Runtimes{})
	var sess *activities.Sessions
	var rt *activities.Runtimes
	env.OnActivity(sess.LoadSession, mock.Anything, mock.Anything).Return(
		activities.LoadSessionResult{Backlog: 1, Lazy: true, IdleSecs: 600, Node: "n1"}, nil)
	env.OnActivity(rt.PrepareRuntime, mock.Anything, mock.Anything).After(10*time.Second).Return(
		activities.PrepareRuntimeResult{Generation: 1, IdlePolicy: domain.IdleAllow}, nil)
	turns := 0
	env.OnActivity(rt.RunTurn, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.RunTurnInput) (activities.RunTurnResult, error) {
			turns++
			return activities.RunTurnResult{Outcome: domain.TurnComplete}, nil
		})
	var teardowns []domain.CheckpointReason
	env.OnActivity(rt.TeardownRuntime, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.TeardownRuntimeInput) error {
			teardowns = append(teardowns, in.Reason)
			return nil
		})
	env.OnActivity(rt.InterruptTurn, mock.Anything, mock.Anything).Return(nil)
	var stopped error = errors.New("not answered")
	env.RegisterDelayedCallback(func() {
		env.UpdateWorkflow(contract.UpdateStop, "s", &testsuite.TestUpdateCallback{OnReject: func(err error) { stopped = err }, OnAccept: func() {},
			OnComplete: func(_ interface{}, err error) { stopped = err }}, contract.StopRequest{Reason: string(domain.StopOperator)})
	}, 5*time.Second)
	env.RegisterDelayedCallback(func() { env.CancelWorkflow() }, time.Hour)
	env.ExecuteWorkflow(RoomSession, contract.RoomSessionInput{RuntimeSession: uuid.New()})
	if stopped != nil || turns != 0 || len(teardowns) != 1 {
		t.Fatalf("stop %v, %d turns, teardowns %v", stopped, turns, teardowns)
	}
}

func TestAWakeThatFindsEveryNodeFullTriesAgainOnABackingOffTimer(t *testing.T) {
	e := newSessionEnv(t)
	e.full = 3
	e.at(time.Second, func() {
		e.backlog = 1
		e.poke()
	})
	e.at(3*time.Second, func() {
		if st := e.state(); st.Phase != domain.PhaseDormant || !strings.Contains(st.LastError, "full") {
			t.Errorf("while the fleet is full: state %+v, want dormant with the reason", st)
		}
	})
	// No message and no Reconcile poke arrives: the session's own timer places it, after
	// waits of about 5, 10 and 20 s.
	e.at(time.Minute, func() {
		// The runtime may already be reaped again (idle reap is short here): what matters
		// is the answered turn and a cleared reason.
		if st := e.state(); st.Turns != 1 || e.turns != 1 || st.LastError != "" {
			t.Errorf("after the retries: state %+v, turns %d; want the turn answered", st, e.turns)
		}
	})
	e.run(10 * time.Minute)
	if e.loads != 5 || e.prepares != 1 {
		t.Fatalf("loads %d prepares %d; want the registration's load, three waits, one placement", e.loads, e.prepares)
	}
}

func TestPlacementRetriesBackOffUpToAMinuteSpreadBySession(t *testing.T) {
	lo, hi := uuid.UUID{}, uuid.UUID{15: 50}
	for _, c := range []struct {
		n      int
		lo, hi time.Duration
	}{
		{1, 5 * time.Second, 5*time.Second + 5*time.Second*50/255},
		{2, 10 * time.Second, 10*time.Second + 10*time.Second*50/255},
		{4, 40 * time.Second, 40*time.Second + 40*time.Second*50/255},
		{5, time.Minute, time.Minute + time.Minute*50/255},
		{50, time.Minute, time.Minute + time.Minute*50/255},
	} {
		if got := placeRetryAfter(c.n, lo); got != c.lo {
			t.Errorf("retry %d, lowest spread: %s, want %s", c.n, got, c.lo)
		}
		if got := placeRetryAfter(c.n, hi); got != c.hi {
			t.Errorf("retry %d, highest spread: %s, want %s", c.n, got, c.hi)
		}
	}
}
