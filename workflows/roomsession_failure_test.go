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

// Issue 17: a runtime that cannot start for good went dormant and woke on every poke (60
// wakes an hour from Reconcile alone). It now holds in the failed phase, recorded once;
// pokes do nothing; a restart, a template apply or a retry signal (a node gained the
// adapter) try again.
func TestAPermanentStartFailureHoldsTheSessionUntilSomethingChanges(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		class domain.FailureClass
		wake  func(e *sessionEnv) *updateResult
		// attempts is how many prepares the failure takes (the activity retries a
		// retryable one); 1 when zero.
		attempts int
	}{
		{"no adapter, restarted", contract.Fail("no adapter", domain.ErrTypeAdapterMissing, nil),
			domain.FailureAdapterMissing, func(e *sessionEnv) *updateResult { return e.update(contract.UpdateRestart, contract.RestartRequest{}) }, 0},
		{"executable refused, template applied", contract.Fail("not found", domain.ErrTypeExecutableRefused, nil),
			domain.FailureExecutableRefused, func(e *sessionEnv) *updateResult {
				return e.update(contract.UpdateApplyConfig, contract.ApplyConfigRequest{Generation: 2})
			}, 0},
		{"not ready, a node gained the adapter", contract.Fail("silent", domain.ErrTypeNotReady, nil),
			domain.FailureNotReady, func(e *sessionEnv) *updateResult {
				e.env.SignalWorkflow(contract.SignalRetry, contract.RetrySignal{Reason: "adapter"})
				return nil
			}, 0},
		// Issue 43: a missing key variable looped forever, silently.
		{"the key variable is unset, the node restarted", contract.Fail("STUB_KEY is not set", domain.ErrTypeCredentialMissing, nil),
			domain.FailureCredentialMissing, func(e *sessionEnv) *updateResult {
				e.env.SignalWorkflow(contract.SignalRetry, contract.RetrySignal{Reason: "node n1 restarted since the failure"})
				return nil
			}, 0},
		{"the provider exits at every start, restarted", contract.Fail("exited", domain.ErrTypeStartFailed, nil),
			domain.FailureStartFailed, func(e *sessionEnv) *updateResult { return e.update(contract.UpdateRestart, contract.RestartRequest{}) }, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSessionEnv(t)
			var sess *activities.Sessions
			failing := true
			var recorded []activities.RecordRuntimeFailureInput
			cleared := 0
			e.prepareErr = func(activities.PrepareRuntimeInput) error {
				if failing {
					return tc.err
				}
				return nil
			}
			e.env.OnActivity(sess.RecordRuntimeFailure, mock.Anything, mock.Anything).Return(
				func(_ context.Context, in activities.RecordRuntimeFailureInput) error {
					recorded = append(recorded, in)
					return nil
				})
			e.env.OnActivity(sess.ClearRuntimeFailure, mock.Anything, mock.Anything).Return(
				func(context.Context, activities.ClearRuntimeFailureInput) error { cleared++; return nil })
			e.env.OnActivity(sess.CommitConfig, mock.Anything, mock.Anything).Return(activities.CommitConfigResult{}, nil)
			e.backlog = 1
			var wake *updateResult
			e.at(time.Second, e.poke)
			e.at(5*time.Second, func() {
				st := e.state()
				if st.Phase != domain.PhaseFailed || st.Presence != domain.PresenceFailed || st.Failure == nil || st.Failure.Class != tc.class {
					t.Errorf("after the failure: %+v", st)
				}
				if e.prepares != max(tc.attempts, 1) || len(recorded) != 1 || recorded[0].Class != tc.class {
					t.Errorf("prepares %d, recorded %+v", e.prepares, recorded)
				}
				// Reconcile-style pokes: no load, no start.
				e.poke()
				e.poke()
			})
			e.at(10*time.Second, func() {
				if e.loads != 1 || e.prepares != max(tc.attempts, 1) {
					t.Errorf("pokes woke a failed session: %d loads, %d prepares", e.loads, e.prepares)
				}
				failing = false
				wake = tc.wake(e)
			})
			e.at(11*time.Second, func() {
				st := e.state()
				if st.Phase != domain.PhaseLive || st.Failure != nil || cleared != 1 || e.turns != 1 {
					t.Errorf("after the change: %+v, cleared %d, turns %d", st, cleared, e.turns)
				}
				if wake != nil {
					wake.completed(t, "the waking update")
				}
			})
			e.run(30 * time.Second)
		})
	}
}

// An apply's candidate that cannot start never fails the session: the old configuration
// comes back, as before.
func TestAFailingCandidateDoesNotHoldTheSessionFailed(t *testing.T) {
	e := newSessionEnv(t)
	var sess *activities.Sessions
	e.prepareErr = func(in activities.PrepareRuntimeInput) error {
		if in.ConfigGeneration > 0 {
			return contract.Fail("gone", domain.ErrTypeExecutableRefused, nil)
		}
		return nil
	}
	e.env.OnActivity(sess.MarkApplying, mock.Anything, mock.Anything).Return(false, nil)
	e.env.OnActivity(sess.FailConfig, mock.Anything, mock.Anything).Return(nil)
	e.backlog = 1
	e.at(time.Second, e.poke)
	var apply *updateResult
	e.at(1500*time.Millisecond, func() { apply = e.update(contract.UpdateApplyConfig, contract.ApplyConfigRequest{Generation: 2}) })
	e.at(1600*time.Millisecond, func() {
		apply.completed(t, "apply")
		if st := e.state(); st.Phase != domain.PhaseLive || st.Failure != nil || e.prepares != 3 {
			t.Errorf("after a failed candidate: %+v, %d prepares", st, e.prepares)
		}
	})
	e.run(20 * time.Second)
}
