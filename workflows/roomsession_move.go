package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/internal/domain"
)

// versionRoomMove gates acting on SignalMove (a live runtime leaving its draining node).
const versionRoomMove = "room-move"

// leaveDrainingNode stops a live runtime between turns so that its next wake places it
// again: its node is draining and Reconcile found a node sharing its host store that can
// take it (the wake's placement decides again; at worst it comes back to the same node).
// from is the node Reconcile saw it on: a runtime started elsewhere since stays.
func (r *roomSession) leaveDrainingNode(ctx workflow.Context, from string) {
	if r.s.Phase != domain.PhaseLive || r.s.Node != from {
		return
	}
	workflow.GetLogger(ctx).Info("runtime leaves its draining node", "runtime_session", r.in.RuntimeSession, "node", r.s.Node)
	// Messages waiting wake it on the node placement now chooses. A teardown that failed
	// leaves the runtime possibly alive: it stays dormant until a message comes, whose wake
	// (its slot still held there) goes back to this node and replaces it.
	if r.teardown(ctx, domain.CheckpointBeforeStop) {
		r.s.Pokes++
	}
}
