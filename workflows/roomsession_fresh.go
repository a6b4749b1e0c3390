package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// registerStartFresh serves an operator's start-fresh of a session held failed because its
// provider thread cannot be resumed exactly (its exact-resume contract): bound to the
// evidence they confirmed, the thread is unbound (the room is told) and the session starts
// again, on a new thread. A new update: no recorded history sends it, so its commands need no
// version gate.
func (r *roomSession) registerStartFresh(ctx workflow.Context) error {
	return workflow.SetUpdateHandlerWithOptions(ctx, contract.UpdateStartFresh,
		func(ctx workflow.Context, req contract.StartFreshRequest) (contract.RoomSessionStatus, error) {
			return r.enqueue(ctx, &action{name: contract.UpdateStartFresh, fresh: req})
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req contract.StartFreshRequest) error {
			if err := r.notRetired(contract.UpdateStartFresh); err != nil {
				return err
			}
			if req.EvidenceChecksum == "" {
				return contract.Fail("evidence_checksum is required", domain.ErrTypeValidation, nil)
			}
			if r.s.Phase != domain.PhaseFailed || r.s.Failure == nil || r.s.Failure.Class != domain.FailureExactResumeUnavailable {
				return contract.Fail("the session does not fail for want of an exact resume", domain.ErrTypeNotResettable, nil)
			}
			return nil
		}})
}

// startFresh runs an accepted start-fresh at the loop.
func (r *roomSession) startFresh(ctx workflow.Context, req contract.StartFreshRequest) error {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         contract.Retry(temporal.RetryPolicy{MaximumInterval: 30 * time.Second, MaximumAttempts: 10}),
	})
	err := workflow.ExecuteActivity(actx, r.sess.StartFresh, activities.StartFreshInput{
		RuntimeSession: r.in.RuntimeSession, EvidenceChecksum: req.EvidenceChecksum}).Get(ctx, nil)
	if err != nil {
		return err
	}
	r.s.ProviderSessionID = ""
	r.retryStart(ctx, "an operator started the session fresh")
	return nil
}
