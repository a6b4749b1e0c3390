package workflows

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

func recycleOf(gen int64, reason domain.RecycleReason) contract.RecycleSignal {
	return contract.RecycleSignal{Recycle: domain.Recycle{Reason: reason, Measured: "measured", Generation: gen}}
}

// A recycle reported during a turn waits for the turn's end, then stops the runtime and starts
// it again at once (the same session: its bound thread); a stale report (an older generation)
// does nothing; each recycle is recorded once with its count; the third within the loop
// window holds the session failed (recycle_loop) instead of starting it again, until a
// restart starts the count over.
func TestWatchdogRecyclesAtTheTurnBoundaryAndHoldsALoopFailed(t *testing.T) {
	e := newSessionEnv(t, func(e *sessionEnv) { e.turnTakes = 10 * time.Second })
	e.policy = domain.IdleKeepAlive
	var sess *activities.Sessions
	var recorded []activities.RecordRecycleInput
	var failures []activities.RecordRuntimeFailureInput
	e.env.OnActivity(sess.RecordRecycle, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RecordRecycleInput) error {
			recorded = append(recorded, in)
			return nil
		})
	e.env.OnActivity(sess.RecordRuntimeFailure, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RecordRuntimeFailureInput) error {
			failures = append(failures, in)
			return nil
		})
	e.env.OnActivity(sess.ClearRuntimeFailure, mock.Anything, mock.Anything).Return(nil)
	signal := func(s contract.RecycleSignal) { e.env.SignalWorkflow(contract.SignalRecycle, s) }

	e.at(time.Second, func() { e.backlog = 1; e.poke() })
	e.at(5*time.Second, func() {
		if st := e.state(); !st.InTurn || st.Generation != 1 {
			t.Errorf("before the recycle: %+v", st)
		}
		signal(recycleOf(1, domain.RecycleMemory))
	})
	e.at(8*time.Second, func() {
		if len(e.teardowns) != 0 {
			t.Errorf("the recycle cut the turn: teardowns %v", e.teardowns)
		}
	})
	e.at(time.Minute, func() {
		st := e.state()
		// The restart's wake runs a turn over what waits: nothing here (an empty turn is a
		// no-op in RunTurn), a wedged turn's messages in production.
		if st.Phase != domain.PhaseLive || st.Generation != 2 || e.turns != 2 || st.Recycles != 1 ||
			st.LastRecycle == nil || st.LastRecycle.Reason != domain.RecycleMemory {
			t.Errorf("after the first recycle: %+v, turns %d", st, e.turns)
		}
		if len(e.teardowns) != 1 || e.teardowns[0] != domain.CheckpointBeforeStop || len(recorded) != 1 || recorded[0].Count != 1 || recorded[0].Held {
			t.Errorf("teardowns %v, recorded %+v", e.teardowns, recorded)
		}
		signal(recycleOf(1, domain.RecycleIdleCPU)) // about the instance already replaced
	})
	e.at(2*time.Minute, func() {
		if st := e.state(); st.Generation != 2 || st.Recycles != 1 {
			t.Errorf("a stale report recycled: %+v", st)
		}
		signal(recycleOf(2, domain.RecycleIdleCPU))
	})
	e.at(3*time.Minute, func() { signal(recycleOf(3, domain.RecycleWedged)) })
	e.at(4*time.Minute, func() {
		st := e.state()
		if st.Phase != domain.PhaseFailed || st.Failure == nil || st.Failure.Class != domain.FailureRecycleLoop || st.Recycles != 3 {
			t.Errorf("after the third recycle in 30 minutes: %+v", st)
		}
		if len(recorded) != 3 || !recorded[2].Held || len(failures) != 1 || failures[0].Class != domain.FailureRecycleLoop {
			t.Errorf("recorded %+v, failures %+v", recorded, failures)
		}
		if e.prepares != 3 {
			t.Errorf("a looping runtime was started again: %d prepares", e.prepares)
		}
		e.update(contract.UpdateRestart, contract.RestartRequest{})
	})
	e.at(5*time.Minute, func() {
		if st := e.state(); st.Phase != domain.PhaseLive || st.Generation != 4 {
			t.Errorf("after the restart: %+v", st)
		}
		signal(recycleOf(4, domain.RecycleMemory)) // a restart started the loop count over
	})
	e.at(6*time.Minute, func() {
		if st := e.state(); st.Phase != domain.PhaseLive || st.Generation != 5 || st.Recycles != 4 {
			t.Errorf("a recycle after the restart: %+v", st)
		}
	})
	e.run(time.Hour)
}

// Recycles further apart than the loop window never hold the session.
func TestWatchdogRecyclesSpreadOverTimeDoNotCountAsALoop(t *testing.T) {
	e := newSessionEnv(t)
	e.policy = domain.IdleKeepAlive
	var sess *activities.Sessions
	e.env.OnActivity(sess.RecordRecycle, mock.Anything, mock.Anything).Return(nil)
	e.at(time.Second, func() { e.backlog = 1; e.poke() })
	for i := range 4 {
		e.at(time.Minute+time.Duration(i)*20*time.Minute, func() {
			e.env.SignalWorkflow(contract.SignalRecycle, recycleOf(int64(i+1), domain.RecycleMemory))
		})
	}
	e.at(90*time.Minute, func() {
		if st := e.state(); st.Phase != domain.PhaseLive || st.Recycles != 4 || st.Generation != 5 {
			t.Errorf("after four recycles 20 minutes apart: %+v", st)
		}
	})
	e.run(2 * time.Hour)
}
