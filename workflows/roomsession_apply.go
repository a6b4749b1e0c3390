package workflows

import (
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

func (r *roomSession) registerApply(ctx workflow.Context) error {
	return workflow.SetUpdateHandlerWithOptions(ctx, contract.UpdateApplyConfig,
		func(ctx workflow.Context, req contract.ApplyConfigRequest) (contract.RoomSessionStatus, error) {
			return r.enqueue(ctx, &action{name: contract.UpdateApplyConfig, apply: req})
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req contract.ApplyConfigRequest) error {
			if req.Generation < 1 {
				return contract.Fail("generation must be at least 1", domain.ErrTypeValidation, nil)
			}
			return r.notRetired(contract.UpdateApplyConfig)
		}})
}

// applyConfig moves the session to configuration generation gen, at a turn boundary (the
// action waits for a running turn). Without a runtime the generation is effective at once.
// A live runtime is torn down (before_reset) and the candidate started; only when it runs is
// the generation committed — fenced, so a superseded save never becomes effective and a
// stale candidate gives the binding back to the effective configuration. A candidate that
// fails to start is replaced by the old configuration again and the failure is recorded
// with the old generation as the recovery target (with both errors if that fails too).
func (r *roomSession) applyConfig(ctx workflow.Context, gen int64) {
	jam := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         contract.Retry(temporal.RetryPolicy{MaximumInterval: 30 * time.Second, MaximumAttempts: 10}),
	})
	ref := activities.ConfigRef{RuntimeSession: r.in.RuntimeSession, Generation: gen}
	log := workflow.GetLogger(ctx)
	if r.s.Phase != domain.PhaseLive {
		if err := workflow.ExecuteActivity(jam, r.sess.CommitConfig, ref).Get(ctx, nil); err != nil {
			log.Info("configuration not committed", "runtime_session", r.in.RuntimeSession, "generation", gen, "error", err)
		}
		return
	}
	var applied bool
	if err := workflow.ExecuteActivity(jam, r.sess.MarkApplying, ref).Get(ctx, &applied); err != nil || applied {
		if err != nil {
			log.Info("configuration not applied", "runtime_session", r.in.RuntimeSession, "generation", gen, "error", err)
		}
		return
	}
	node, sandboxed := r.s.Node, r.s.Host != uuid.Nil
	r.teardown(ctx, domain.CheckpointBeforeReset)
	r.candidate = gen
	started := r.prepare(ctx, node, sandboxed)
	r.candidate = 0
	// Messages that waited while the runtime was replaced are served next.
	defer func() { r.s.Pokes++ }()
	var reason string
	if started {
		var out activities.CommitConfigResult
		err := workflow.ExecuteActivity(jam, r.sess.CommitConfig, ref).Get(ctx, &out)
		if err == nil {
			if out.IdleSecs > 0 {
				r.s.IdleSecs = out.IdleSecs // the new configuration's threshold holds for this runtime
			}
			return
		}
		// Superseded while it started (or the commit could not be written): the candidate
		// does not keep the binding.
		log.Info("candidate configuration not committed", "runtime_session", r.in.RuntimeSession, "generation", gen, "error", err)
		reason = "the candidate started but was not committed: " + errorText(err)
		r.teardown(ctx, domain.CheckpointBeforeReset)
	} else {
		reason = "the candidate did not start: " + r.s.LastError
	}
	if !r.prepare(ctx, node, sandboxed) {
		reason += fmt.Sprintf("; restoring the previous configuration failed too: %s", r.s.LastError)
	}
	ref.Reason = reason
	if err := workflow.ExecuteActivity(jam, r.sess.FailConfig, ref).Get(ctx, nil); err != nil {
		log.Warn("configuration failure not recorded", "runtime_session", r.in.RuntimeSession, "error", err)
	}
}
