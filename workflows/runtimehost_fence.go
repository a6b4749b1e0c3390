package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// versionParkFence gates fencing a host whose teardown checkpoint failed (issue 43):
// histories written before it parked the host and let the next member start over the
// unsaved provider state.
const versionParkFence = "park-checkpoint-fence"

// fenceUnsaved holds the host after the checkpoint of its last teardown failed: the provider
// state on the node is newer than every generation, so no member starts over it (and no
// host restart runs) until a checkpoint succeeds — retried every parkRetryAfter, or an
// operator's manual checkpoint — or an operator discards it (UpdateDiscardUnsaved).
func (r *runtimeHost) fenceUnsaved(ctx workflow.Context, reason domain.CheckpointReason, err error) {
	if workflow.GetVersion(ctx, versionParkFence, workflow.DefaultVersion, 1) < 1 {
		return
	}
	r.s.Unsaved = &contract.UnsavedState{Reason: reason, Error: errorText(err), Since: workflow.Now(ctx), Attempts: 1}
	workflow.GetLogger(ctx).Warn("the teardown checkpoint failed; the host is fenced until a checkpoint succeeds",
		"host", r.in.Host, "reason", reason, "error", err)
}

// retryUnsaved captures the unsaved provider state again while no member holds the host; a
// success lifts the fence (capture clears it).
func (r *runtimeHost) retryUnsaved(ctx workflow.Context) {
	if err := r.lockSandbox(ctx); err != nil {
		return
	}
	defer func() { r.busy = false }()
	if r.s.Unsaved == nil || len(r.s.Leases) > 0 {
		return
	}
	r.s.Unsaved.Attempts++
	if _, err := r.capture(ctx, r.s.Unsaved.Reason, true); err != nil && r.s.Unsaved != nil {
		r.s.Unsaved.Error = errorText(err)
	}
}

// fenced is the refusal of a start over unsaved provider state (nil when the host is not
// fenced).
func (r *runtimeHost) fenced(what string) error {
	if r.s.Unsaved == nil {
		return nil
	}
	return r.s.Unsaved.Refusal(r.in.Host, what, parkRetryAfter)
}

// discardUnsaved is the operator's explicit discard: the fence lifts without a checkpoint,
// and the next member resumes from the provider state on the node as it is.
func (r *runtimeHost) discardUnsaved(ctx workflow.Context, _ contract.DiscardUnsavedRequest) (contract.RuntimeHostStatus, error) {
	if r.s.Unsaved != nil {
		workflow.GetLogger(ctx).Warn("unsaved provider state discarded by an operator; the host is no longer fenced",
			"host", r.in.Host, "reason", r.s.Unsaved.Reason, "attempts", r.s.Unsaved.Attempts)
	}
	r.s.Unsaved = nil
	return r.status(), nil
}

// validDiscard admits a discard only with its confirmation, on a fenced host.
func (r *runtimeHost) validDiscard(_ workflow.Context, req contract.DiscardUnsavedRequest) error {
	switch {
	case !req.Confirm:
		return contract.Fail("confirm must be true: the provider state on the node is held by no checkpoint", domain.ErrTypeValidation, nil)
	case r.s.Unsaved == nil:
		return contract.Fail(fmt.Sprintf("runtime host %s is not fenced: nothing to discard", r.in.Host), domain.ErrTypeValidation, nil)
	}
	return nil
}
