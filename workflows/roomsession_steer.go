package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/activities"
)

// versionSteering gates steering mid-turn messages into the running turn: histories written
// before it waited for the turn and ran the messages as the next one.
const versionSteering = "steer-mid-turn"

// steers reports whether this history steers messages that arrive during a turn.
func (r *roomSession) steers(ctx workflow.Context) bool {
	return workflow.GetVersion(ctx, versionSteering, workflow.DefaultVersion, 1) >= 1
}

// steerWhile waits for the running turn, steering each poke's messages into it (a
// SteerTurn activity on the node) while the runtime accepts them. A runtime that cannot
// steer (ACP), or a turn that has already ended, leaves the poke for the next turn.
func (r *roomSession) steerWhile(ctx workflow.Context, turn workflow.Future) {
	actx := r.nodeCtx(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 2},
	})
	for {
		_ = workflow.Await(ctx, func() bool { return turn.IsReady() || r.s.Pokes > 0 })
		if turn.IsReady() {
			return
		}
		r.s.Pokes = 0
		var out activities.SteerTurnResult
		err := workflow.ExecuteActivity(actx, r.rt.SteerTurn, activities.SteerTurnInput{RuntimeSession: r.in.RuntimeSession,
			Generation: r.s.Generation}).Get(ctx, &out)
		if err != nil || out.NotSteered {
			// The messages wait for the next turn; pokes until then change nothing.
			r.s.Pokes++
			if err != nil {
				workflow.GetLogger(ctx).Warn("steer turn", "runtime_session", r.in.RuntimeSession, "error", err)
			}
			return
		}
	}
}
