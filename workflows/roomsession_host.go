package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// acquire takes this session's lease on its runtime host (allocating the host on first use);
// the host's sandbox is created or verified before it returns. The runtime then runs on the
// host's node.
func (r *roomSession) acquire(ctx workflow.Context, node string) bool {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: activities.SandboxPrepareTimeout + time.Minute,
		HeartbeatTimeout:    runtimeHeartbeat,
		RetryPolicy:         contract.Retry(temporal.RetryPolicy{MaximumAttempts: 3}),
	})
	var lease contract.HostLease
	err := workflow.ExecuteActivity(actx, r.hosts.AcquireHost, activities.AcquireHostInput{
		RuntimeSession: r.in.RuntimeSession, Node: node}).Get(ctx, &lease)
	if err != nil {
		r.s.LastError = "acquire runtime host: " + errorText(err)
		r.startErr = err
		workflow.GetLogger(ctx).Warn("runtime host not acquired", "runtime_session", r.in.RuntimeSession, "error", err)
		// The host may still be working on it: say this session does not want it, so a
		// late acquire does not count a lease nobody will release.
		rctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second,
			RetryPolicy: &temporal.RetryPolicy{MaximumInterval: 30 * time.Second, MaximumAttempts: 5}})
		_ = workflow.ExecuteActivity(rctx, r.hosts.ReleaseHostOf, activities.ReleaseHostOfInput{RuntimeSession: r.in.RuntimeSession}).Get(ctx, nil)
		return false
	}
	r.s.Host, r.s.Sandbox, r.s.Node, r.s.Leased = lease.Host, lease.SandboxName, lease.Node, true
	if lease.Node == "" || lease.SandboxName == "" {
		r.s.LastError = "acquire runtime host: the host named no node or sandbox"
		r.release(ctx)
		return false
	}
	return true
}

// permit takes (or, done, returns) this session's turn permit on its runtime host, so a
// checkpoint of the host runs with every member's turn quiesced. A permit that cannot be
// taken skips the turn: its messages stay queued.
func (r *roomSession) permit(ctx workflow.Context, done bool) bool {
	return r.permitErr(ctx, done) == nil
}

// replacingBackoff is how long a turn refused by a host recreation waits before asking again.
var replacingBackoff = 2 * time.Second

func (r *roomSession) permitErr(ctx workflow.Context, done bool) error {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Minute, // a checkpoint in progress holds the permit back
		HeartbeatTimeout:    runtimeHeartbeat,
		RetryPolicy:         contract.Retry(temporal.RetryPolicy{MaximumInterval: 30 * time.Second, MaximumAttempts: 5}),
	})
	err := workflow.ExecuteActivity(actx, r.hosts.TurnPermit, activities.TurnPermitInput{
		Host: r.s.Host, RuntimeSession: r.in.RuntimeSession, Done: done}).Get(ctx, nil)
	if err != nil && !contract.Is(err, domain.ErrTypeHostReplacing) {
		r.s.LastError = "turn permit: " + errorText(err)
		workflow.GetLogger(ctx).Warn("turn permit", "runtime_session", r.in.RuntimeSession, "done", done, "error", err)
	}
	return err
}

// release drops this session's host lease; the host parks its sandbox after the last one.
func (r *roomSession) release(ctx workflow.Context) { r.releaseFor(ctx, domain.CheckpointBeforeStop) }

// releaseFor releases with the reason the runtime stopped: when this was the host's last
// member, the host's checkpoint carries it (before_remove for a removed room).
func (r *roomSession) releaseFor(ctx workflow.Context, reason domain.CheckpointReason) {
	if !r.s.Leased {
		return
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
	})
	err := workflow.ExecuteActivity(actx, r.hosts.ReleaseHost, activities.ReleaseHostInput{
		Host: r.s.Host, RuntimeSession: r.in.RuntimeSession, Reason: reason}).Get(ctx, nil)
	if err != nil {
		r.s.LastError = "release runtime host: " + errorText(err)
		workflow.GetLogger(ctx).Warn("runtime host lease not released", "runtime_session", r.in.RuntimeSession, "error", err)
	}
	r.s.Leased = false
}
