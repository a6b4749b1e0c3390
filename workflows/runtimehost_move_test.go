package workflows

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// TestAHostWhoseNodeIsFencedFollowsItsMemberToANodeSharingItsStore: a member placed on
// another node than the host's moves the host there when the store allows it — the leases
// of the dead node's runtimes are dropped and the sandbox is made ready (fenced, nobody
// holding it) on the new node before the member runs; when the store refuses (the host's
// node is live), the member runs on the host's node as before.
func TestAHostWhoseNodeIsFencedFollowsItsMemberToANodeSharingItsStore(t *testing.T) {
	e := newHostEnv(t)
	var h *activities.Hosts
	fenced := map[string]bool{"n1": true} // the node the store lets the host leave
	node := "n1"
	var asked []string
	e.env.OnActivity(h.RehomeHost, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RehomeHostInput) (contract.LoadHostResult, error) {
			asked = append(asked, in.Node)
			if fenced[node] {
				node = in.Node
			}
			return contract.LoadHostResult{Node: node, Placement: domain.PlacementShared, State: domain.HostActive, SandboxName: "jam-0123456789abcdef"}, nil
		})
	a, b, c := uuid.New(), uuid.New(), uuid.New()
	var errs [3]error
	leases := make([]contract.HostLease, 3)
	acquire := func(i int, d time.Duration, req contract.LeaseRequest) {
		e.env.RegisterDelayedCallback(func() {
			e.env.UpdateWorkflow(contract.UpdateAcquire, uuid.NewString(), &testsuite.TestUpdateCallback{
				OnReject: func(err error) { errs[i] = err }, OnAccept: func() {},
				OnComplete: func(v interface{}, err error) { errs[i] = err; leases[i], _ = v.(contract.HostLease) }}, req)
		}, d)
	}
	acquire(0, time.Second, contract.LeaseRequest{RuntimeSession: a, Node: "n1"})
	acquire(1, 2*time.Second, contract.LeaseRequest{RuntimeSession: b, Node: "n2"})
	acquire(2, 3*time.Second, contract.LeaseRequest{RuntimeSession: c, Node: "n3"})
	var status contract.RuntimeHostStatus
	e.env.RegisterDelayedCallback(func() {
		v, err := e.env.QueryWorkflow(contract.QueryHost)
		if err == nil {
			err = v.Get(&status)
		}
		if err != nil {
			t.Errorf("query: %v", err)
		}
	}, 4*time.Second)
	e.run(time.Minute)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("acquire %d: %v", i, err)
		}
	}
	if leases[0].Node != "n1" || leases[1].Node != "n2" || leases[2].Node != "n2" {
		t.Fatalf("leases on %q %q %q, want n1 n2 n2", leases[0].Node, leases[1].Node, leases[2].Node)
	}
	// The first member names the host's own node: no move asked.
	if !slices.Equal(asked, []string{"n2", "n3"}) {
		t.Fatalf("moves asked for %v, want n2 then n3", asked)
	}
	want := []string{contract.NodeTaskQueue("n1"), contract.NodeTaskQueue("n2")}
	if !slices.Equal(e.ensuredOn, want) {
		t.Fatalf("sandbox made ready on %v, want %v", e.ensuredOn, want)
	}
	if !equalOps(e.ops, []string{"ensure+fence", "host:active", "ensure+fence", "host:active", "host:active"}) {
		t.Fatalf("ops %v", e.ops)
	}
	if status.Moves != 1 || !slices.Equal(status.Leases, []uuid.UUID{b, c}) {
		t.Fatalf("status %+v, want one move and the leases of b and c", status)
	}
}

// TestMembersPlacedOnDifferentSharersAllFollowTheOneMove: two members of a Shared host placed
// on different nodes at once both ask the store, which moves the host once; each runs where
// the host now is — neither gets a lease on the dead node.
func TestMembersPlacedOnDifferentSharersAllFollowTheOneMove(t *testing.T) {
	e := newHostEnv(t)
	var h *activities.Hosts
	// The member placed on n2 asked the store first: the host is on n2 for everyone after.
	e.env.OnActivity(h.RehomeHost, mock.Anything, mock.Anything).Return(contract.LoadHostResult{Node: "n2",
		Placement: domain.PlacementShared, State: domain.HostActive, SandboxName: "jam-0123456789abcdef"}, nil)
	a, b := uuid.New(), uuid.New()
	var errs [2]error
	leases := make([]contract.HostLease, 2)
	for i, req := range []contract.LeaseRequest{{RuntimeSession: b, Node: "n3"}, {RuntimeSession: a, Node: "n2"}} {
		e.env.RegisterDelayedCallback(func() {
			e.env.UpdateWorkflow(contract.UpdateAcquire, uuid.NewString(), &testsuite.TestUpdateCallback{
				OnReject: func(err error) { errs[i] = err }, OnAccept: func() {},
				OnComplete: func(v interface{}, err error) { errs[i] = err; leases[i], _ = v.(contract.HostLease) }}, req)
		}, time.Duration(i+1)*time.Second)
	}
	e.run(time.Minute)
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("acquires: %v", errs)
	}
	if leases[0].Node != "n2" || leases[1].Node != "n2" {
		t.Fatalf("leases on %q and %q, want both on n2 (where the host moved)", leases[0].Node, leases[1].Node)
	}
	if !slices.Equal(e.ensuredOn, []string{contract.NodeTaskQueue("n2")}) {
		t.Fatalf("sandbox made ready on %v, want once on n2", e.ensuredOn)
	}
}

// TestAParkedHostLeavesADrainingNodeButALiveOneStays: off a node that is not fenced (a
// draining one) the host moves only while parked — asked under its sandbox lock, so no member
// makes it ready there meanwhile; while a member holds it, members run on its node.
func TestAParkedHostLeavesADrainingNodeButALiveOneStays(t *testing.T) {
	e := newHostEnv(t)
	var h *activities.Hosts
	var asked []bool
	e.env.OnActivity(h.RehomeHost, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.RehomeHostInput) (contract.LoadHostResult, error) {
			asked = append(asked, in.Parked)
			node := "n1" // draining: only a parked host may leave
			if in.Parked {
				node = in.Node
			}
			return contract.LoadHostResult{Node: node, Placement: domain.PlacementShared, State: domain.HostParked,
				SandboxName: "jam-0123456789abcdef"}, nil
		})
	a, b := uuid.New(), uuid.New()
	var errs [4]error
	leases := make([]contract.HostLease, 4)
	steps := []struct {
		at   time.Duration
		name string
		req  contract.LeaseRequest
	}{
		{time.Second, contract.UpdateAcquire, contract.LeaseRequest{RuntimeSession: a, Node: "n1"}},
		{2 * time.Second, contract.UpdateAcquire, contract.LeaseRequest{RuntimeSession: b, Node: "n2"}}, // a holds it
		{3 * time.Second, contract.UpdateRelease, contract.LeaseRequest{RuntimeSession: a}},
		{4 * time.Second, contract.UpdateRelease, contract.LeaseRequest{RuntimeSession: b}},
	}
	for i, s := range steps {
		e.env.RegisterDelayedCallback(func() {
			e.env.UpdateWorkflow(s.name, uuid.NewString(), &testsuite.TestUpdateCallback{
				OnReject: func(err error) { errs[i] = err }, OnAccept: func() {},
				OnComplete: func(v interface{}, err error) { errs[i] = err; leases[i], _ = v.(contract.HostLease) }}, s.req)
		}, s.at)
	}
	var again error
	var lease contract.HostLease
	e.env.RegisterDelayedCallback(func() { // parked now
		e.env.UpdateWorkflow(contract.UpdateAcquire, uuid.NewString(), &testsuite.TestUpdateCallback{
			OnReject: func(err error) { again = err }, OnAccept: func() {},
			OnComplete: func(v interface{}, err error) { again = err; lease, _ = v.(contract.HostLease) }},
			contract.LeaseRequest{RuntimeSession: a, Node: "n2"})
	}, 10*time.Second)
	e.run(time.Minute)
	for i, err := range append(errs[:], again) {
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
	}
	if leases[1].Node != "n1" || lease.Node != "n2" {
		t.Fatalf("while held: lease on %q (want n1); once parked: on %q (want n2)", leases[1].Node, lease.Node)
	}
	if !slices.Equal(asked, []bool{false, false, true}) {
		t.Fatalf("asked the store %v, want: not parked (held), not parked then parked (after the park)", asked)
	}
	want := []string{contract.NodeTaskQueue("n1"), contract.NodeTaskQueue("n2")}
	if !slices.Equal(e.ensuredOn, want) {
		t.Fatalf("sandbox made ready on %v, want %v", e.ensuredOn, want)
	}
}
