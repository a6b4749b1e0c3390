package workflows

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// hostEnv is a RuntimeHost under the test suite with its activities mocked; it records the
// sandbox operations in order.
type hostEnv struct {
	t       *testing.T
	env     *testsuite.TestWorkflowEnvironment
	host    uuid.UUID
	ops     []string
	members []activities.ScopeMember
	live    map[uuid.UUID]bool
	// parkFails fails the next n parks; captureFails the next n checkpoint captures.
	parkFails, captureFails int
	// hostGone: the host's record was deleted (its agent was).
	hostGone bool
	// archived: recording a member active fails (the host was archived meanwhile).
	archived bool
	// stops are the simulated times members were stopped.
	stops []time.Time
	// ensuredOn are the task queues the sandbox was made ready on.
	ensuredOn []string
}

func newHostEnv(t *testing.T) *hostEnv {
	var suite testsuite.WorkflowTestSuite
	e := &hostEnv{t: t, env: suite.NewTestWorkflowEnvironment(), host: uuid.New(), live: map[uuid.UUID]bool{}}
	e.env.RegisterActivity(&activities.Hosts{})
	e.env.RegisterActivity(&activities.Sandbox{})
	e.env.RegisterActivity(&activities.Checkpoints{})
	var h *activities.Hosts
	var sb *activities.Sandbox
	var ck *activities.Checkpoints
	e.env.OnActivity(ck.CaptureCheckpoint, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CaptureCheckpointInput) (contract.CaptureCheckpointResult, error) {
			if e.captureFails > 0 {
				e.captureFails--
				e.ops = append(e.ops, "checkpoint-failed")
				return contract.CaptureCheckpointResult{}, errCapture
			}
			e.ops = append(e.ops, "checkpoint:"+string(in.Reason))
			return contract.CaptureCheckpointResult{ID: in.ID}, nil
		})
	e.env.OnActivity(h.LoadHost, mock.Anything, mock.Anything).Return(contract.LoadHostResult{Node: "n1",
		Placement: domain.PlacementShared, State: domain.HostProvisioning, SandboxName: "jam-0123456789abcdef"}, nil)
	e.env.OnActivity(h.MarkMember, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.MarkMemberInput) (activities.MarkMemberResult, error) {
			if e.archived && in.Membership == domain.MembershipActive {
				return activities.MarkMemberResult{}, contract.Fail("archived", domain.ErrTypeHostScope, nil)
			}
			if in.HostState != "" {
				e.ops = append(e.ops, "host:"+string(in.HostState))
			}
			return activities.MarkMemberResult{HostGone: e.hostGone && in.HostState != ""}, nil
		})
	e.env.OnActivity(sb.EnsureSandbox, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.EnsureSandboxInput) (activities.EnsureSandboxResult, error) {
			e.ensuredOn = append(e.ensuredOn, activity.GetInfo(ctx).TaskQueue)
			op := "ensure"
			if in.Fence {
				op = "ensure+fence"
			}
			e.ops = append(e.ops, op)
			return activities.EnsureSandboxResult{Name: "jam-0123456789abcdef", Created: true}, nil
		})
	e.env.OnActivity(sb.ParkSandbox, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.HostSandboxInput) error {
			if e.parkFails > 0 {
				e.parkFails--
				e.ops = append(e.ops, "park-failed")
				return errPark
			}
			e.ops = append(e.ops, "park")
			return nil
		})
	e.env.OnActivity(sb.RemoveSandbox, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.HostSandboxInput) (activities.RemoveSandboxResult, error) {
			e.ops = append(e.ops, "remove")
			return activities.RemoveSandboxResult{Removed: true}, nil
		})
	e.env.OnActivity(h.HostScope, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.HostScopeInput) ([]activities.ScopeMember, error) {
			return e.members, nil
		})
	e.env.OnActivity(h.StopMember, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.StopMemberInput) (bool, error) {
			e.stops = append(e.stops, e.env.Now())
			e.ops = append(e.ops, "stop:"+string(in.Reason))
			was := e.live[in.RuntimeSession]
			e.live[in.RuntimeSession] = false
			return was, nil
		})
	e.env.OnActivity(h.RestartMember, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.StopMemberInput) error {
			e.ops = append(e.ops, "restart")
			return nil
		})
	return e
}

var (
	errPark    = temporalErr("sbx stop: daemon down")
	errCapture = temporalErr("mkdir checkpoints: not a directory")
)

type temporalErr string

func (e temporalErr) Error() string { return string(e) }

// update sends an update at simulated time d and records its outcome.
func (e *hostEnv) update(d time.Duration, name string, arg any, out *error) {
	e.env.RegisterDelayedCallback(func() {
		e.env.UpdateWorkflow(name, uuid.NewString(), &testsuite.TestUpdateCallback{
			OnReject:   func(err error) { *out = err },
			OnAccept:   func() {},
			OnComplete: func(_ interface{}, err error) { *out = err },
		}, arg)
	}, d)
}

func (e *hostEnv) run(until time.Duration) {
	e.env.RegisterDelayedCallback(func() { e.env.CancelWorkflow() }, until)
	e.env.ExecuteWorkflow(RuntimeHost, contract.RuntimeHostInput{Host: e.host})
	if err := e.env.GetWorkflowError(); err == nil || !temporal.IsCanceledError(err) {
		e.t.Fatalf("the workflow ended with %v, want cancelled", err)
	}
}

func TestTheLastReleaseParksTheSandboxAndTheFirstAcquireFencesIt(t *testing.T) {
	e := newHostEnv(t)
	a, b := uuid.New(), uuid.New()
	var errs [4]error
	var lease contract.HostLease
	e.env.RegisterDelayedCallback(func() {
		e.env.UpdateWorkflow(contract.UpdateAcquire, "first", &testsuite.TestUpdateCallback{OnReject: func(err error) { errs[0] = err },
			OnAccept: func() {}, OnComplete: func(v interface{}, err error) { errs[0] = err; lease, _ = v.(contract.HostLease) }},
			contract.LeaseRequest{RuntimeSession: a})
	}, 0)
	e.update(2*time.Second, contract.UpdateAcquire, contract.LeaseRequest{RuntimeSession: b}, &errs[1])
	var turn [2]error
	e.update(2500*time.Millisecond, contract.UpdatePermit, contract.LeaseRequest{RuntimeSession: a}, &turn[0])
	e.update(2700*time.Millisecond, contract.UpdateUnpermit, contract.LeaseRequest{RuntimeSession: a}, &turn[1])
	e.update(3*time.Second, contract.UpdateRelease, contract.LeaseRequest{RuntimeSession: a}, &errs[2])
	e.update(4*time.Second, contract.UpdateRelease, contract.LeaseRequest{RuntimeSession: b}, &errs[3])
	e.run(time.Minute)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
	}
	if lease.Node != "n1" || lease.SandboxName != "jam-0123456789abcdef" || lease.Host != e.host || !lease.Created {
		t.Fatalf("lease %+v", lease)
	}
	// One verified create for both members (fenced: nobody held it), one park after the last.
	want := []string{"ensure+fence", "host:active", "host:active", "checkpoint:before_stop", "park", "host:parked"}
	if !equalOps(e.ops, want) {
		t.Fatalf("ops %v, want %v", e.ops, want)
	}
}

func TestAFailedFinalParkStaysRetryable(t *testing.T) {
	e := newHostEnv(t)
	e.parkFails = 3 // every attempt of the first park
	a := uuid.New()
	var errs [2]error
	e.update(time.Second, contract.UpdateAcquire, contract.LeaseRequest{RuntimeSession: a}, &errs[0])
	e.update(2*time.Second, contract.UpdateRelease, contract.LeaseRequest{RuntimeSession: a}, &errs[1])
	e.run(10 * time.Minute)
	want := []string{"ensure+fence", "host:active", "park-failed", "park-failed", "park-failed", "park", "host:parked"}
	if !equalOps(e.ops, want) {
		t.Fatalf("ops %v, want %v", e.ops, want)
	}
}

func TestHostResetQuiescesEveryMemberThenDestroysOnceAndRestartsOnlyTheLive(t *testing.T) {
	e := newHostEnv(t)
	a, b := uuid.New(), uuid.New()
	e.members = []activities.ScopeMember{{RuntimeSession: a}, {RuntimeSession: b}}
	e.live[a] = true
	var errs [3]error
	e.update(time.Second, contract.UpdateAcquire, contract.LeaseRequest{RuntimeSession: a}, &errs[0])
	var turn error
	e.update(1500*time.Millisecond, contract.UpdatePermit, contract.LeaseRequest{RuntimeSession: a}, &turn)
	e.update(2*time.Second, contract.UpdateControl, contract.ControlRequest{Action: string(domain.HostResetSandbox)}, &errs[1])
	e.update(3*time.Second, contract.UpdateControl, contract.ControlRequest{Action: "explode"}, &errs[2])
	e.run(time.Minute)
	if errs[0] != nil || errs[1] != nil || !contract.Is(errs[2], domain.ErrTypeValidation) {
		t.Fatalf("updates %v", errs)
	}
	want := []string{"ensure+fence", "host:active", "stop:host_reset", "stop:host_reset", "checkpoint:before_reset", "remove", "host:parked", "restart"}
	if !equalOps(e.ops, want) {
		t.Fatalf("ops %v, want %v", e.ops, want)
	}
}

func TestAQuiesceWaitsForRunningTurnsAndHoldsNewOnesBack(t *testing.T) {
	e := newHostEnv(t)
	a := uuid.New()
	var order []string
	var errs [4]error
	var acq error
	e.update(500*time.Millisecond, contract.UpdateAcquire, contract.LeaseRequest{RuntimeSession: a}, &acq)
	e.update(time.Second, contract.UpdatePermit, contract.LeaseRequest{RuntimeSession: a}, &errs[0])
	e.env.RegisterDelayedCallback(func() {
		e.env.UpdateWorkflow(contract.UpdateQuiesce, "q", &testsuite.TestUpdateCallback{OnReject: func(error) {}, OnAccept: func() {},
			OnComplete: func(interface{}, error) { order = append(order, "quiesced") }})
	}, 2*time.Second)
	e.env.RegisterDelayedCallback(func() {
		e.env.UpdateWorkflow(contract.UpdatePermit, "p2", &testsuite.TestUpdateCallback{OnReject: func(error) {}, OnAccept: func() {},
			OnComplete: func(interface{}, error) { order = append(order, "second turn") }}, contract.LeaseRequest{RuntimeSession: a})
	}, 3*time.Second)
	e.env.RegisterDelayedCallback(func() {
		order = append(order, "first turn ends")
		e.env.UpdateWorkflow(contract.UpdateUnpermit, "u1", &testsuite.TestUpdateCallback{OnReject: func(error) {}, OnAccept: func() {},
			OnComplete: func(interface{}, error) {}}, contract.LeaseRequest{RuntimeSession: a})
	}, 4*time.Second)
	e.update(5*time.Second, contract.UpdateResume, nil, &errs[1])
	e.run(time.Minute)
	want := []string{"first turn ends", "quiesced", "second turn"}
	if !equalOps(order, want) {
		t.Fatalf("order %v, want %v", order, want)
	}
}

// A host whose agent was deleted still parks its sandbox (by the owner it loaded) when its
// last member leaves, and then its workflow ends.
func TestAHostWhoseRecordIsGoneParksThenEnds(t *testing.T) {
	e := newHostEnv(t)
	a := uuid.New()
	var errs [2]error
	e.update(time.Second, contract.UpdateAcquire, contract.LeaseRequest{RuntimeSession: a}, &errs[0])
	e.env.RegisterDelayedCallback(func() { e.hostGone = true }, 2*time.Second)
	e.update(3*time.Second, contract.UpdateRelease, contract.LeaseRequest{RuntimeSession: a}, &errs[1])
	e.env.ExecuteWorkflow(RuntimeHost, contract.RuntimeHostInput{Host: e.host})
	if !e.env.IsWorkflowCompleted() || e.env.GetWorkflowError() != nil {
		t.Fatalf("completed %v, error %v", e.env.IsWorkflowCompleted(), e.env.GetWorkflowError())
	}
	if want := []string{"ensure+fence", "host:active", "park", "host:parked"}; !equalOps(e.ops, want) {
		t.Fatalf("ops %v, want %v", e.ops, want)
	}
}

// The final park failed (the node may have died with providers in the guest): the next
// acquire verifies and fences the sandbox instead of trusting it, and the park debt is paid.
func TestAnAcquireAfterAFailedParkFencesTheSandbox(t *testing.T) {
	e := newHostEnv(t)
	e.parkFails = 3
	a, b := uuid.New(), uuid.New()
	var errs [3]error
	e.update(time.Second, contract.UpdateAcquire, contract.LeaseRequest{RuntimeSession: a}, &errs[0])
	e.update(2*time.Second, contract.UpdateRelease, contract.LeaseRequest{RuntimeSession: a}, &errs[1])
	e.update(30*time.Second, contract.UpdateAcquire, contract.LeaseRequest{RuntimeSession: b}, &errs[2])
	e.run(10 * time.Minute)
	want := []string{"ensure+fence", "host:active", "park-failed", "park-failed", "park-failed",
		"ensure+fence", "host:active"}
	if !equalOps(e.ops, want) || errs != [3]error{} {
		t.Fatalf("ops %v (want %v), errs %v", e.ops, want, errs)
	}
}

// An acquire whose membership cannot be recorded fails without leaving a lease that would
// keep the sandbox from ever parking.
func TestAFailedAcquireLeavesNoLease(t *testing.T) {
	e := newHostEnv(t)
	e.archived = true
	var err error
	e.update(time.Second, contract.UpdateAcquire, contract.LeaseRequest{RuntimeSession: uuid.New()}, &err)
	var leases int
	e.env.RegisterDelayedCallback(func() {
		v, _ := e.env.QueryWorkflow(contract.QueryHost)
		var st contract.RuntimeHostStatus
		_ = v.Get(&st)
		leases = len(st.Leases)
	}, time.Minute)
	e.run(10 * time.Minute)
	if !contract.Is(err, domain.ErrTypeHostScope) || leases != 0 {
		t.Fatalf("acquire %v, %d leases", err, leases)
	}
	if want := []string{"ensure+fence", "park", "host:parked"}; !equalOps(e.ops, want) {
		t.Fatalf("ops %v, want %v", e.ops, want)
	}
}

// A permit that waited past its session's release is refused: it would otherwise stay out
// forever and hold every later checkpoint (and, through them, acquires and parks).
func TestAPermitForASessionWithoutALeaseIsRefused(t *testing.T) {
	e := newHostEnv(t)
	a := uuid.New()
	var permitErr, ckptErr error
	ckptDone := false
	e.update(time.Second, contract.UpdatePermit, contract.LeaseRequest{RuntimeSession: a}, &permitErr)
	e.env.RegisterDelayedCallback(func() {
		e.env.UpdateWorkflow(contract.UpdateCheckpoint, "manual", &testsuite.TestUpdateCallback{OnReject: func(err error) { ckptErr = err },
			OnAccept: func() {}, OnComplete: func(_ interface{}, err error) { ckptErr, ckptDone = err, true }})
	}, 2*time.Second)
	e.run(time.Hour)
	if !contract.Is(permitErr, domain.ErrTypeHostBusy) || !ckptDone || ckptErr != nil {
		t.Fatalf("permit %v; checkpoint done %v, %v", permitErr, ckptDone, ckptErr)
	}
}

func equalOps(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A manual checkpoint waits for the running turn, holds the next one back (a stream of turns
// cannot starve it), captures, then lets turns run again.
func TestAManualCheckpointRunsWithEveryTurnQuiesced(t *testing.T) {
	e := newHostEnv(t)
	a, b := uuid.New(), uuid.New()
	var errs [3]error
	e.update(time.Second, contract.UpdateAcquire, contract.LeaseRequest{RuntimeSession: a}, &errs[0])
	e.update(2*time.Second, contract.UpdatePermit, contract.LeaseRequest{RuntimeSession: a}, &errs[1])
	var ckptErr error
	e.env.RegisterDelayedCallback(func() {
		e.env.UpdateWorkflow(contract.UpdateCheckpoint, "manual", &testsuite.TestUpdateCallback{OnReject: func(err error) { ckptErr = err },
			OnAccept: func() {}, OnComplete: func(_ interface{}, err error) { ckptErr = err }})
	}, 3*time.Second)
	e.env.RegisterDelayedCallback(func() {
		e.env.UpdateWorkflow(contract.UpdatePermit, "second", &testsuite.TestUpdateCallback{OnReject: func(error) {}, OnAccept: func() {},
			OnComplete: func(interface{}, error) { e.ops = append(e.ops, "second turn") }}, contract.LeaseRequest{RuntimeSession: b})
	}, 4*time.Second)
	e.env.RegisterDelayedCallback(func() {
		e.ops = append(e.ops, "first turn ends")
		e.env.UpdateWorkflow(contract.UpdateUnpermit, "end", &testsuite.TestUpdateCallback{OnReject: func(error) {}, OnAccept: func() {},
			OnComplete: func(interface{}, error) {}}, contract.LeaseRequest{RuntimeSession: a})
	}, 5*time.Second)
	e.run(time.Minute)
	end, ck, second := slices.Index(e.ops, "first turn ends"), slices.Index(e.ops, "checkpoint:manual"), slices.Index(e.ops, "second turn")
	if ckptErr != nil || end < 0 || ck < end || second < ck {
		t.Fatalf("ops %v, checkpoint %v", e.ops, ckptErr)
	}
}

// After a turn, once the newest generation is older than the interval, the host checkpoints
// with reason after_turn.
func TestATurnTriggersAnAfterTurnCheckpointWhenDue(t *testing.T) {
	old := afterTurnEvery
	afterTurnEvery = time.Minute
	t.Cleanup(func() { afterTurnEvery = old })
	e := newHostEnv(t)
	a := uuid.New()
	var errs [5]error
	e.update(time.Second, contract.UpdateAcquire, contract.LeaseRequest{RuntimeSession: a}, &errs[0])
	e.update(2*time.Second, contract.UpdatePermit, contract.LeaseRequest{RuntimeSession: a}, &errs[1])
	e.update(10*time.Second, contract.UpdateUnpermit, contract.LeaseRequest{RuntimeSession: a}, &errs[2]) // not due yet
	e.update(80*time.Second, contract.UpdatePermit, contract.LeaseRequest{RuntimeSession: a}, &errs[3])
	e.update(90*time.Second, contract.UpdateUnpermit, contract.LeaseRequest{RuntimeSession: a}, &errs[4]) // due
	e.run(10 * time.Minute)
	n := 0
	for _, op := range e.ops {
		if op == "checkpoint:after_turn" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("ops %v: want one after_turn checkpoint", e.ops)
	}
}

// The last member leaving because its room was removed names the checkpoint before_remove.
func TestTheLastReleaseNamesTheCheckpointByItsReason(t *testing.T) {
	e := newHostEnv(t)
	a := uuid.New()
	var errs [4]error
	e.update(time.Second, contract.UpdateAcquire, contract.LeaseRequest{RuntimeSession: a}, &errs[0])
	e.update(2*time.Second, contract.UpdatePermit, contract.LeaseRequest{RuntimeSession: a}, &errs[1])
	e.update(3*time.Second, contract.UpdateUnpermit, contract.LeaseRequest{RuntimeSession: a}, &errs[2])
	e.update(4*time.Second, contract.UpdateRelease, contract.LeaseRequest{RuntimeSession: a, Reason: domain.CheckpointBeforeRemove}, &errs[3])
	e.run(time.Minute)
	if want := []string{"ensure+fence", "host:active", "checkpoint:before_remove", "park", "host:parked"}; !equalOps(e.ops, want) {
		t.Fatalf("ops %v, want %v", e.ops, want)
	}
}

// A recreation for a template edit reaches members at their turn boundary: it waits for the
// running turn to end before stopping anyone, refuses new turns meanwhile (host_replacing),
// commits the replacement after the sandbox is gone and brings back the live member.
func TestAReplacementWaitsForRunningTurnsAndRefusesNewOnes(t *testing.T) {
	e := newHostEnv(t)
	var h *activities.Hosts
	e.env.OnActivity(h.CommitHostReplacement, mock.Anything, mock.Anything).Return(
		func(context.Context, contract.CommitHostReplacementInput) error {
			e.ops = append(e.ops, "replace")
			return nil
		})
	a, b := uuid.New(), uuid.New()
	e.members = []activities.ScopeMember{{RuntimeSession: a}, {RuntimeSession: b}}
	e.live[a] = true
	start := e.env.Now()
	var errs [6]error
	e.update(time.Second, contract.UpdateAcquire, contract.LeaseRequest{RuntimeSession: a}, &errs[0])
	e.update(1200*time.Millisecond, contract.UpdateAcquire, contract.LeaseRequest{RuntimeSession: b}, &errs[1])
	e.update(1500*time.Millisecond, contract.UpdatePermit, contract.LeaseRequest{RuntimeSession: a}, &errs[2])
	e.update(2*time.Second, contract.UpdateControl, contract.ControlRequest{Action: string(domain.HostResetSandbox),
		Replacement: &contract.CommitHostReplacementInput{Template: uuid.New(), Generation: 2, Fingerprint: "new"}}, &errs[3])
	e.update(3*time.Second, contract.UpdatePermit, contract.LeaseRequest{RuntimeSession: b}, &errs[4])
	e.update(10*time.Second, contract.UpdateUnpermit, contract.LeaseRequest{RuntimeSession: a}, &errs[5])
	e.run(time.Minute)
	if errs[0] != nil || errs[1] != nil || errs[2] != nil || errs[3] != nil || errs[5] != nil {
		t.Fatalf("updates %v", errs)
	}
	if !contract.Is(errs[4], domain.ErrTypeHostReplacing) {
		t.Fatalf("a turn during the recreation: %v", errs[4])
	}
	if len(e.stops) == 0 || e.stops[0].Sub(start) < 10*time.Second {
		t.Fatalf("members stopped at %v (start %v), before the running turn ended at 10s", e.stops, start)
	}
	want := []string{"stop:host_reset", "stop:host_reset", "checkpoint:before_reset", "remove", "host:parked", "replace", "restart"}
	if len(e.ops) < len(want) || !equalOps(e.ops[len(e.ops)-len(want):], want) {
		t.Fatalf("ops %v, want them to end with %v", e.ops, want)
	}
}

// Issue 43: a failed final checkpoint parked the host anyway, and the next member started
// over provider state no generation held. The host is fenced instead: acquires and a restart
// are refused with the reason, the checkpoint is retried every parkRetryAfter, and its
// success lifts the fence.
func TestAFailedTeardownCheckpointFencesTheHostUntilACheckpointSucceeds(t *testing.T) {
	e := newHostEnv(t)
	e.captureFails = 6 // the park's three attempts, and the first retry's three
	a, b, c := uuid.New(), uuid.New(), uuid.New()
	e.members = []activities.ScopeMember{{RuntimeSession: a}}
	var errs [4]error
	var fencedAcquire, fencedRestart, stage error
	e.update(time.Second, contract.UpdateAcquire, contract.LeaseRequest{RuntimeSession: a}, &errs[0])
	e.update(1500*time.Millisecond, contract.UpdatePermit, contract.LeaseRequest{RuntimeSession: a}, &errs[1])
	e.update(1700*time.Millisecond, contract.UpdateUnpermit, contract.LeaseRequest{RuntimeSession: a}, &errs[2])
	e.update(2*time.Second, contract.UpdateRelease, contract.LeaseRequest{RuntimeSession: a}, &errs[3])
	e.update(30*time.Second, contract.UpdateAcquire, contract.LeaseRequest{RuntimeSession: b}, &fencedAcquire)
	e.update(31*time.Second, contract.UpdateControl, contract.ControlRequest{Action: string(domain.HostRestart)}, &fencedRestart)
	e.env.RegisterDelayedCallback(func() {
		v, err := e.env.QueryWorkflow(contract.QueryHost)
		var st contract.RuntimeHostStatus
		if err == nil {
			err = v.Get(&st)
		}
		if err != nil || st.Unsaved == nil || st.Unsaved.Reason != domain.CheckpointBeforeStop || st.Unsaved.Attempts != 1 {
			stage = fmt.Errorf("status while fenced: %+v %v", st.Unsaved, err)
		}
	}, 32*time.Second)
	var later error
	e.update(3*parkRetryAfter, contract.UpdateAcquire, contract.LeaseRequest{RuntimeSession: c}, &later)
	e.run(4 * parkRetryAfter)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
	}
	if stage != nil {
		t.Fatal(stage)
	}
	for name, err := range map[string]error{"acquire": fencedAcquire, "restart": fencedRestart} {
		if !contract.Is(err, domain.ErrTypeHostFenced) || !strings.Contains(err.Error(), "before_stop checkpoint") {
			t.Fatalf("%s while fenced: %v, want host_fenced with the reason", name, err)
		}
	}
	if later != nil {
		t.Fatalf("an acquire once the checkpoint succeeded: %v", later)
	}
	// The park still stops the sandbox (its state is on the node's disk); the retries
	// capture until one succeeds, and only then does a member start again.
	want := []string{"ensure+fence", "host:active", "checkpoint-failed", "checkpoint-failed", "checkpoint-failed", "park", "host:parked",
		"checkpoint-failed", "checkpoint-failed", "checkpoint-failed", "checkpoint:before_stop", "ensure+fence", "host:active"}
	if !equalOps(e.ops, want) {
		t.Fatalf("ops %v, want %v", e.ops, want)
	}
}

// An operator may lift the fence without a checkpoint, explicitly.
func TestAnOperatorDiscardsAFencedHostsUnsavedState(t *testing.T) {
	e := newHostEnv(t)
	e.captureFails = 1000
	a, b := uuid.New(), uuid.New()
	var errs [4]error
	var unconfirmed, discarded, after error
	e.update(time.Second, contract.UpdateAcquire, contract.LeaseRequest{RuntimeSession: a}, &errs[0])
	e.update(1500*time.Millisecond, contract.UpdatePermit, contract.LeaseRequest{RuntimeSession: a}, &errs[1])
	e.update(1700*time.Millisecond, contract.UpdateUnpermit, contract.LeaseRequest{RuntimeSession: a}, &errs[2])
	e.update(2*time.Second, contract.UpdateRelease, contract.LeaseRequest{RuntimeSession: a}, &errs[3])
	e.update(30*time.Second, contract.UpdateDiscardUnsaved, contract.DiscardUnsavedRequest{}, &unconfirmed)
	e.update(31*time.Second, contract.UpdateDiscardUnsaved, contract.DiscardUnsavedRequest{Confirm: true}, &discarded)
	e.update(32*time.Second, contract.UpdateAcquire, contract.LeaseRequest{RuntimeSession: b}, &after)
	e.run(2 * time.Minute)
	if !contract.Is(unconfirmed, domain.ErrTypeValidation) || discarded != nil || after != nil {
		t.Fatalf("unconfirmed %v, discarded %v, acquire after %v", unconfirmed, discarded, after)
	}
}

// A settle (an archive after its member's stop) completes only once the state as of then is
// checkpointed: coming with the last release it adds no second capture to the park's, and
// with a turn since the newest generation it captures one.
func TestASettleReturnsOnceTheStateIsCheckpointed(t *testing.T) {
	for _, c := range []struct {
		name    string
		release bool
		want    []string
	}{
		{"with the last release", true, []string{"ensure+fence", "host:active", "checkpoint:before_stop", "park", "host:parked"}},
		{"with the member still in", false, []string{"ensure+fence", "host:active", "checkpoint:before_stop"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newHostEnv(t)
			a := uuid.New()
			var errs [4]error
			e.update(time.Second, contract.UpdateAcquire, contract.LeaseRequest{RuntimeSession: a}, &errs[0])
			e.update(2*time.Second, contract.UpdatePermit, contract.LeaseRequest{RuntimeSession: a}, &errs[1])
			e.update(3*time.Second, contract.UpdateUnpermit, contract.LeaseRequest{RuntimeSession: a}, &errs[2])
			if c.release {
				e.update(4*time.Second, contract.UpdateRelease, contract.LeaseRequest{RuntimeSession: a}, &errs[3])
			}
			settledAfter, settleErr := -1, error(nil)
			e.env.RegisterDelayedCallback(func() {
				e.env.UpdateWorkflow(contract.UpdateSettle, uuid.NewString(), &testsuite.TestUpdateCallback{
					OnReject: func(err error) { settleErr = err }, OnAccept: func() {},
					OnComplete: func(_ interface{}, err error) { settleErr, settledAfter = err, len(e.ops) },
				})
			}, 4*time.Second)
			e.run(time.Minute)
			for i, err := range errs {
				if err != nil {
					t.Fatalf("update %d: %v", i, err)
				}
			}
			if !equalOps(e.ops, c.want) {
				t.Fatalf("ops %v, want %v", e.ops, c.want)
			}
			if settleErr != nil || settledAfter < 3 {
				t.Fatalf("settle: %v after %d ops, want after the checkpoint", settleErr, settledAfter)
			}
		})
	}
}
