package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
)

// versionHostRehome gates a runtime host moving to the node placement chose for a member
// (issue 26): only acquires that name another node than the host's take the branch, so
// histories from before it (whose requests name no node) replay unchanged.
const versionHostRehome = "host-rehome"

// follow moves the host to node, the node placement chose for an acquiring member, when the
// store allows it (store.RehomeHost; node is live, may sandbox and reaches the same host
// store):
//   - off a fenced node: every runtime there is gone with it, so the host keeps no lease and
//     no permit, a park still waiting on the dead node is cancelled rather than waited for,
//     and the sandbox is made ready (from the shared root) on the new node before the
//     member starts;
//   - off a draining node only while parked (no member, sandbox stopped), decided under the
//     sandbox lock so no member makes it ready there meanwhile.
//
// When the host may not move, the member runs on the host's node as before.
func (r *runtimeHost) follow(ctx workflow.Context, node string) error {
	if node == "" {
		return nil
	}
	if err := workflow.Await(ctx, func() bool { return r.loaded }); err != nil {
		return err
	}
	if node == r.host.Node || workflow.GetVersion(ctx, versionHostRehome, workflow.DefaultVersion, 1) < 1 {
		return nil
	}
	from := r.host.Node
	out, err := r.rehome(ctx, node, false)
	if err != nil {
		return err
	}
	if out.Node == from {
		return r.followParked(ctx, node, from)
	}
	// The record left from (to node, or to where another member placed elsewhere moved it
	// first: the store moves it once).
	if r.parkCancel != nil && r.host.Node == from {
		r.parkCancel() // a park on the dead node; not one on a node another acquire adopted
	}
	if err := r.lockSandbox(ctx); err != nil {
		return err
	}
	defer func() { r.busy = false }()
	if r.host.Node != from {
		return nil // another member's acquire adopted a move while this one waited
	}
	r.adopt(ctx, out)
	return nil
}

// followParked moves a parked host off its live node when the store allows it (a draining
// node), under the sandbox lock.
func (r *runtimeHost) followParked(ctx workflow.Context, node, from string) error {
	if err := r.lockSandbox(ctx); err != nil {
		return err
	}
	defer func() { r.busy = false }()
	if r.host.Node != from || len(r.s.Leases) > 0 || r.s.Ready || r.s.ParkFailed || r.controlling {
		return nil
	}
	// Not ready need not mean stopped (an ensure that failed part-way): stop it, proven ours,
	// before its root is served from another node. A stopped or absent sandbox is parked.
	if err := workflow.ExecuteActivity(r.nodeCtx(ctx, sandboxLifecycleTimeout, 3), r.sbx.ParkSandbox,
		r.sandboxInput()).Get(ctx, nil); err != nil {
		r.s.LastError = "park sandbox before moving: " + errorText(err)
		return nil // the member runs on the host's node as before
	}
	out, err := r.rehome(ctx, node, true)
	if err != nil || out.Node == from {
		return err
	}
	r.adopt(ctx, out)
	return nil
}

func (r *runtimeHost) rehome(ctx workflow.Context, node string, parked bool) (contract.LoadHostResult, error) {
	var out contract.LoadHostResult
	err := workflow.ExecuteActivity(r.jamCtx(ctx), r.hosts.RehomeHost,
		activities.RehomeHostInput{Host: r.in.Host, Node: node, Parked: parked}).Get(ctx, &out)
	if err != nil {
		r.s.LastError = "move to node " + node + ": " + errorText(err)
	}
	return out, err
}

// adopt makes the host the one the store moved, holding the sandbox lock: nothing of the old
// node is held any more, and the sandbox is made ready on the new node at the next acquire.
func (r *runtimeHost) adopt(ctx workflow.Context, out contract.LoadHostResult) {
	workflow.GetLogger(ctx).Info("runtime host moved to a node sharing its host store", "host", r.in.Host,
		"from", r.host.Node, "to", out.Node)
	r.host.Node = out.Node
	h := r.host
	r.s.Host = &h
	r.s.Leases, r.s.Permits = nil, nil
	r.s.Ready, r.s.ParkFailed, r.s.LastError = false, false, ""
	r.s.Moves++
}
