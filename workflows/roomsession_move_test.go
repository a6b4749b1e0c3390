package workflows

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// A keep-alive runtime on a draining node, told it can move, finishes the turn it is running,
// then stops; the next message wakes it again (placement chooses the node). A move request
// to a dormant session does nothing.
func TestAMoveStopsALiveRuntimeAtItsTurnBoundaryAndTheNextMessageWakesItAgain(t *testing.T) {
	e := newSessionEnv(t, func(e *sessionEnv) { e.turnTakes = 10 * time.Second })
	e.policy = domain.IdleKeepAlive
	move := contract.MoveSignal{Node: "n1"}
	e.at(time.Second/2, func() { e.env.SignalWorkflow(contract.SignalMove, move) }) // dormant: nothing to move
	e.at(time.Second, func() { e.backlog = 1; e.poke() })
	e.at(5*time.Second, func() {
		if st := e.state(); !st.InTurn {
			t.Errorf("before the move: %+v", st)
		}
		e.env.SignalWorkflow(contract.SignalMove, contract.MoveSignal{Node: "elsewhere"}) // seen on another node: stays
		e.env.SignalWorkflow(contract.SignalMove, move)
	})
	e.at(8*time.Second, func() {
		if len(e.teardowns) != 0 || e.turns != 0 {
			t.Errorf("the move cut the turn: teardowns %v, turns %d", e.teardowns, e.turns)
		}
	})
	e.at(time.Minute, func() {
		if st := e.state(); st.Phase != domain.PhaseDormant || e.turns != 1 || len(e.teardowns) != 1 || e.teardowns[0] != domain.CheckpointBeforeStop {
			t.Errorf("after the turn: %+v, turns %d, teardowns %v", st, e.turns, e.teardowns)
		}
		e.backlog = 1
		e.poke()
	})
	e.at(2*time.Minute, func() {
		if st := e.state(); st.Phase != domain.PhaseLive || st.Generation != 2 {
			t.Errorf("after the next message: %+v", st)
		}
	})
	e.run(time.Hour)
	if e.prepares != 2 || e.turns != 2 {
		t.Fatalf("prepares %d turns %d", e.prepares, e.turns)
	}
}

func TestReconcileTellsSessionsOnDrainingNodesToMove(t *testing.T) {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.RegisterActivity(&activities.Sessions{})
	moving, gone := uuid.New(), uuid.New()
	var sess *activities.Sessions
	env.OnActivity(sess.FindBacklog, mock.Anything).Return(activities.BacklogReport{Move: []activities.MoveOff{
		{RuntimeSession: moving, Node: "n1"}, {RuntimeSession: gone, Node: "n1"}}}, nil)
	env.OnSignalExternalWorkflow(mock.Anything, contract.RoomSessionID(moving), "", contract.SignalMove, contract.MoveSignal{Node: "n1"}).Return(nil).Once()
	env.OnSignalExternalWorkflow(mock.Anything, contract.RoomSessionID(gone), "", contract.SignalMove, mock.Anything).Return(errors.New("not found")).Once()
	env.ExecuteWorkflow(Reconcile)
	var rep ReconcileReport
	if err := env.GetWorkflowResult(&rep); err != nil {
		t.Fatal(err)
	}
	if rep.Moved != 1 {
		t.Fatalf("report %+v", rep)
	}
	env.AssertExpectations(t)
}
