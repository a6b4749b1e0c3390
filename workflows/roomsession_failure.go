package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// versionPermanentFailures gates holding a session in the failed phase: histories written
// before it woke the session again on every poke.
const versionPermanentFailures = "permanent-start-failures"

// permanentStartErrors are the start failures retrying cannot fix, by activity error type.
var permanentStartErrors = map[domain.ErrorType]domain.FailureClass{
	domain.ErrTypeAdapterMissing:       domain.FailureAdapterMissing,
	domain.ErrTypeExecutableRefused:    domain.FailureExecutableRefused,
	domain.ErrTypeExactResume:          domain.FailureExactResumeUnavailable,
	domain.ErrTypeNotReady:             domain.FailureNotReady,
	domain.ErrTypeEnvRefused:           domain.FailureEnvRefused,
	domain.ErrTypeValidation:           domain.FailureInvalidConfiguration,
	domain.ErrTypeUnsupportedTransport: domain.FailureInvalidConfiguration,
	domain.ErrTypeSandboxUnavailable:   domain.FailureSandbox,
	domain.ErrTypeCredentialMissing:    domain.FailureCredentialMissing,
	domain.ErrTypeOwnershipMismatch:    domain.FailureSandbox,
	domain.ErrTypeIncompatibleHost:     domain.FailureSandbox,
	domain.ErrTypeWorkspaceCorrupt:     domain.FailureSandbox,
	// New with template repositories and the network journal: no recorded history carries
	// these types, so holding the session on them changes no replayed command sequence.
	domain.ErrTypeRepoCommandFailed: domain.FailureRepository,
	// A sandbox's network refused by organisation governance: an administrator's change,
	// then a restart or template save, lets it start.
	domain.ErrTypeNetworkDenied: domain.FailureSandbox,
	// Retried by the activity first (issue 43): a provider that exits or refuses its
	// handshake on every attempt holds the session instead of being woken by every poke.
	// No recorded history carries the type.
	domain.ErrTypeStartFailed: domain.FailureStartFailed,
}

// permanentClass is the failure class of a start error retrying cannot fix.
func permanentClass(err error) (domain.FailureClass, bool) {
	cls, _, ok := contract.Classify(err)
	if !ok {
		return "", false
	}
	c, ok := permanentStartErrors[cls.Type]
	return c, ok
}

// holdsFailures reports whether this history holds sessions in the failed phase.
func (r *roomSession) holdsFailures(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, versionPermanentFailures, workflow.DefaultVersion, 1) >= 1
}

// failStart holds the session in the failed phase when a start failed for a reason
// retrying cannot fix: no poke wakes it (Reconcile no longer lists it), the reason is
// recorded for the API and told to the room once. It reports whether it did. An apply's
// candidate never fails the session: the old configuration is started again instead.
func (r *roomSession) failStart(ctx workflow.Context, class domain.FailureClass, reason string) bool {
	if r.candidate != 0 || !r.holdsFailures(ctx) {
		return false
	}
	r.s.Phase, r.s.LastError = domain.PhaseFailed, reason
	r.s.Failure = &domain.RuntimeFailure{Class: class, Reason: domain.Truncate(reason, 1000), At: workflow.Now(ctx)}
	workflow.GetLogger(ctx).Warn("runtime cannot start; the session holds until something changes",
		"runtime_session", r.in.RuntimeSession, "class", class, "reason", reason)
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
	})
	err := workflow.ExecuteActivity(actx, r.sess.RecordRuntimeFailure, activities.RecordRuntimeFailureInput{
		RuntimeSession: r.in.RuntimeSession, Class: class, Reason: r.s.Failure.Reason, At: r.s.Failure.At}).Get(ctx, nil)
	if err != nil {
		workflow.GetLogger(ctx).Warn("runtime failure not recorded", "runtime_session", r.in.RuntimeSession, "error", err)
	}
	return true
}

// failIfPermanent holds the session failed when its last start failed for good, with the
// failing activity's own message as the reason people read.
func (r *roomSession) failIfPermanent(ctx workflow.Context) {
	var app *temporal.ApplicationError
	if class, ok := permanentClass(r.startErr); ok && errors.As(r.startErr, &app) {
		r.failStart(ctx, class, app.Message())
	}
}

// retryStart ends a held failure because something changed: the session is dormant again
// and tries to start at once (its messages are still queued).
func (r *roomSession) retryStart(ctx workflow.Context, why string) {
	if r.s.Phase != domain.PhaseFailed {
		return
	}
	workflow.GetLogger(ctx).Info("retrying a failed runtime", "runtime_session", r.in.RuntimeSession, "because", why)
	r.s.Phase, r.s.Failure, r.s.Crashes = domain.PhaseDormant, nil, 0
	// Something changed (a restart, a template save, a re-add): a watchdog loop's count
	// starts over with it.
	r.s.RecycleTimes = nil
	r.s.Pokes++
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
	})
	err := workflow.ExecuteActivity(actx, r.sess.ClearRuntimeFailure, activities.ClearRuntimeFailureInput{
		RuntimeSession: r.in.RuntimeSession}).Get(ctx, nil)
	if err != nil {
		workflow.GetLogger(ctx).Warn("runtime failure not cleared", "runtime_session", r.in.RuntimeSession, "error", err)
	}
}
