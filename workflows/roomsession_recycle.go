package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// versionRecycle gates acting on the watchdog's recycle signal: no recorded history carries
// the signal, but the gate keeps the rule that every new command sequence has one.
const versionRecycle = "watchdog-recycle"

// takeRecycles moves recycle signals waiting in their channel onto the queue. The main loop
// calls it before choosing what to do, so a recycle reported just before a wedged turn's
// interruption ended it is served before another turn runs on that runtime.
func (r *roomSession) takeRecycles() {
	var sig contract.RecycleSignal
	for r.recycle.ReceiveAsync(&sig) {
		r.recycles = append(r.recycles, sig)
	}
}

// onRecycle serves the node watchdog's report that the live runtime crossed a bound: it stops
// the runtime (a before_stop checkpoint when sandboxed; host-native providers keep their own
// thread on disk) and starts it again at once on the same provider thread, so the queued
// messages (a wedged turn's among them) are answered once, by the new process. A runtime
// recycled domain.RecycleLoopCount times within domain.RecycleLoopWindow holds the session
// failed instead: restarting it again would only loop.
func (r *roomSession) onRecycle(ctx workflow.Context, sig contract.RecycleSignal) {
	rc := sig.Recycle
	if r.s.Phase != domain.PhaseLive || rc.Generation != r.s.Generation {
		return // about an instance already replaced or stopped
	}
	if workflow.GetVersion(ctx, versionRecycle, workflow.DefaultVersion, 1) < 1 {
		return
	}
	now := workflow.Now(ctx)
	recent := make([]time.Time, 0, len(r.s.RecycleTimes)+1)
	for _, t := range r.s.RecycleTimes {
		if now.Sub(t) < domain.RecycleLoopWindow {
			recent = append(recent, t)
		}
	}
	recent = append(recent, now)
	r.s.RecycleTimes, r.s.Recycles, r.s.LastRecycle = recent, r.s.Recycles+1, &rc
	loop := len(recent) >= domain.RecycleLoopCount
	workflow.GetLogger(ctx).Warn("watchdog recycles the runtime", "runtime_session", r.in.RuntimeSession,
		"generation", rc.Generation, "reason", rc.Reason, "measured", rc.Measured, "recycles", r.s.Recycles, "loop", loop)
	r.teardown(ctx, domain.CheckpointBeforeStop)
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
	})
	err := workflow.ExecuteActivity(actx, r.sess.RecordRecycle, activities.RecordRecycleInput{
		RuntimeSession: r.in.RuntimeSession, Recycle: rc, Count: r.s.Recycles, Held: loop}).Get(ctx, nil)
	if err != nil {
		workflow.GetLogger(ctx).Warn("recycle not recorded", "runtime_session", r.in.RuntimeSession, "error", err)
	}
	if loop {
		r.failStart(ctx, domain.FailureRecycleLoop, fmt.Sprintf(
			"the watchdog recycled the runtime %d times within %s; the last time: %s (%s). Raise the template's watchdog bound or find the cause, then restart the session",
			len(recent), domain.RecycleLoopWindow, rc.Reason, rc.Measured))
		return
	}
	// Start again now, on the bound thread, and answer whatever waits.
	r.s.WantLive = true
	r.s.Pokes++
}
