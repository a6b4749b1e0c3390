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
// store allows it (store.RehomeHost: the host's node is fenced, node is live, may sandbox and
// reaches the same host store). Every runtime on the old node is gone with it, so the host
// keeps no lease and no permit, and its sandbox is made ready (created from the shared root)
// on the new node before the member starts. A park still waiting on the dead node is
// cancelled rather than waited for. When the host may not move, the member runs on the
// host's node as before.
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
	var out contract.LoadHostResult
	err := workflow.ExecuteActivity(r.jamCtx(ctx), r.hosts.RehomeHost, activities.RehomeHostInput{Host: r.in.Host, Node: node}).Get(ctx, &out)
	if err != nil {
		r.s.LastError = "move to node " + node + ": " + errorText(err)
		return err
	}
	// The record names where the host is now: node, or another node a member placed
	// elsewhere moved it to first (the store moves it once), or still from.
	if out.Node == from {
		return nil
	}
	if r.parkCancel != nil {
		r.parkCancel()
	}
	if err := r.lockSandbox(ctx); err != nil {
		return err
	}
	defer func() { r.busy = false }()
	if r.host.Node != from {
		return nil // another member's acquire adopted a move while this one waited
	}
	workflow.GetLogger(ctx).Info("runtime host moved to a node sharing its host store", "host", r.in.Host,
		"from", r.host.Node, "to", out.Node)
	r.host.Node = out.Node
	h := r.host
	r.s.Host = &h
	r.s.Leases, r.s.Permits = nil, nil
	r.s.Ready, r.s.ParkFailed, r.s.LastError = false, false, ""
	r.s.Moves++
	return nil
}
