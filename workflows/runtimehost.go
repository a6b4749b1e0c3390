package workflows

import (
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// Message names of the RuntimeHost workflow.
// parkRetryAfter is how long a failed final park (or a fenced host's checkpoint) waits
// before it is tried again.
var parkRetryAfter = contract.UnsavedRetry

type runtimeHost struct {
	in     contract.RuntimeHostInput
	s      contract.RuntimeHostState
	host   contract.LoadHostResult
	busy   bool // a sandbox operation runs
	loaded bool // the host record is read
	gone   bool // the host record was deleted and the sandbox is parked
	// seq orders acquires and releases within a run; releasedAt is the seq of each
	// session's latest release, so an acquire its caller gave up on (and released) while it
	// waited for the sandbox lock does not count a lease nobody holds.
	seq        int
	releasedAt map[uuid.UUID]int
	// ckpts are checkpoints waiting for the loop (manual, or after a turn when due).
	ckpts       []*ckptRequest
	controlling bool
	// replacing: a recreation for a template edit waits for running turns to end and refuses
	// new ones (members keep their messages and try again) until its members are stopped.
	replacing bool
	// parkCancel cancels the park in progress (nil when none): a host moving off a dead node
	// does not wait for a park there to time out.
	parkCancel func()
	hosts      *activities.Hosts
	sbx        *activities.Sandbox
	ckpt       *activities.Checkpoints
}

// RuntimeHost is the entity workflow of one sandboxed runtime host: the members' lease, the
// sandbox's create-or-reuse with ownership proof before any provider starts, parking when the
// last member leaves, fencing of an orphan sandbox, host-scope controls, and turn permits for
// the checkpoint coordinator. See docs/architecture.md §4 (RuntimeHost).
func RuntimeHost(ctx workflow.Context, in contract.RuntimeHostInput) error {
	r := &runtimeHost{in: in}
	if in.State != nil {
		r.s = *in.State
	}
	// Handlers first: the update that started this run (UpdateWithStart) is delivered with
	// the first workflow task. They wait for the host record before touching the sandbox.
	if err := r.register(ctx); err != nil {
		return err
	}
	publishStage(ctx, contract.TypeRuntimeHost, in.SearchTags(), func() string { return string(r.stage()) }, r.details)
	// The host record is read once per workflow and carried through continue-as-new: a run
	// must not lose its leases because the record is gone (agent deleted) or the store is
	// briefly unreachable, so the read retries until it answers.
	if r.s.Host != nil {
		r.host = *r.s.Host
	} else {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: 30 * time.Second,
			RetryPolicy:         contract.Retry(temporal.RetryPolicy{MaximumInterval: time.Minute}),
		})
		if err := workflow.ExecuteActivity(actx, r.hosts.LoadHost, activities.LoadHostInput{Host: in.Host}).Get(ctx, &r.host); err != nil {
			return err
		}
		h := r.host
		r.s.Host = &h
	}
	r.loaded = true
	for {
		parkable := func() bool {
			return len(r.s.Leases) == 0 && (r.s.Ready || r.s.ParkFailed) && !r.busy && !r.controlling
		}
		due := func() bool { return len(r.ckpts) > 0 && !r.busy && !r.controlling }
		suggested := func() bool { return workflow.GetInfo(ctx).GetContinueAsNewSuggested() }
		switch {
		case r.s.ParkFailed:
			if ok, _ := workflow.AwaitWithTimeout(ctx, parkRetryAfter, func() bool { return due() || suggested() }); !ok && ctx.Err() == nil && !parkable() {
				continue
			}
		case r.s.Unsaved != nil && len(r.s.Leases) == 0:
			// Fenced: the teardown checkpoint is tried again while nothing else is to do.
			unfenced := func() bool { return r.s.Unsaved == nil || len(r.s.Leases) > 0 }
			ok, _ := workflow.AwaitWithTimeout(ctx, parkRetryAfter, func() bool { return parkable() || due() || suggested() || unfenced() })
			if !ok && ctx.Err() == nil {
				r.retryUnsaved(ctx)
				continue
			}
			if ctx.Err() == nil && !parkable() && !due() && !suggested() {
				continue // the fence lifted: wait as an unfenced host does
			}
		default:
			_ = workflow.Await(ctx, func() bool { return parkable() || due() || suggested() })
		}
		if err := ctx.Err(); err != nil {
			return err // cancelled by an operator
		}
		if due() {
			r.runCheckpoints(ctx)
			continue
		}
		if parkable() {
			if r.park(ctx); r.gone && len(r.s.Leases) == 0 {
				// Nothing is left to serve: answer waiting checkpoint requests, then end.
				for _, req := range r.ckpts {
					req.done, req.err = true, contract.Fail("the runtime host is gone", domain.ErrTypeHostScope, nil)
				}
				r.ckpts = nil
				_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) })
				return nil
			}
			continue
		}
		// A handler may wait for the loop (a requested checkpoint): serve it rather than wait
		// for every handler to finish.
		_ = workflow.Await(ctx, func() bool {
			return (workflow.AllHandlersFinished(ctx) && !r.busy && !r.controlling) || len(r.ckpts) > 0
		})
		if len(r.ckpts) > 0 {
			continue
		}
		s := r.s
		return workflow.NewContinueAsNewError(ctx, RuntimeHost, contract.RuntimeHostInput{Host: in.Host, State: &s})
	}
}

func (r *runtimeHost) register(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, contract.QueryHost, func() (contract.RuntimeHostStatus, error) {
		return r.status(), nil
	}); err != nil {
		return err
	}
	validSession := func(_ workflow.Context, req contract.LeaseRequest) error {
		if req.RuntimeSession == uuid.Nil {
			return contract.Fail("runtime_session is required", domain.ErrTypeValidation, nil)
		}
		return nil
	}
	handlers := []struct {
		name string
		fn   any
		v    any
	}{
		{contract.UpdateAcquire, r.acquire, func(ctx workflow.Context, req contract.LeaseRequest) error {
			if err := validSession(ctx, req); err != nil {
				return err
			}
			if r.controlling && !slices.Contains(r.s.Leases, req.RuntimeSession) {
				return contract.Fail("a host control is running; the room wakes after it", domain.ErrTypeHostBusy, nil)
			}
			return r.fenced("the room cannot start")
		}},
		{contract.UpdateRelease, r.release, validSession},
		{contract.UpdatePermit, r.permit, validSession},
		{contract.UpdateUnpermit, r.unpermit, validSession},
		{contract.UpdateControl, r.control, func(_ workflow.Context, req contract.ControlRequest) error {
			if _, err := domain.HostActions.Parse(req.Action); err != nil {
				return contract.Fail(fmt.Sprintf("action %q: want one of %v", req.Action, domain.HostActions.Strings()), domain.ErrTypeValidation, nil)
			}
			if r.controlling {
				return contract.Fail("another host control is running", domain.ErrTypeHostBusy, nil)
			}
			if req.Action != string(domain.HostStop) {
				return r.fenced("the host cannot " + req.Action)
			}
			return nil
		}},
		{contract.UpdateCheckpoint, r.checkpointNow, nil},
		{contract.UpdateSettle, r.settle, nil},
		{contract.UpdateDiscardUnsaved, r.discardUnsaved, r.validDiscard},
		{contract.UpdateQuiesce, r.quiesce, nil},
		{contract.UpdateResume, r.resume, nil},
	}
	for _, h := range handlers {
		if err := workflow.SetUpdateHandlerWithOptions(ctx, h.name, h.fn, workflow.UpdateHandlerOptions{Validator: h.v}); err != nil {
			return err
		}
	}
	return nil
}

func (r *runtimeHost) nodeCtx(ctx workflow.Context, timeout time.Duration, attempts int32) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              contract.NodeTaskQueue(r.host.Node),
		ScheduleToStartTimeout: nodeScheduleToStart,
		StartToCloseTimeout:    timeout,
		HeartbeatTimeout:       runtimeHeartbeat,
		RetryPolicy:            contract.Retry(temporal.RetryPolicy{MaximumAttempts: attempts, MaximumInterval: 30 * time.Second}),
	})
}

func (r *runtimeHost) jamCtx(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         contract.Retry(temporal.RetryPolicy{MaximumInterval: 30 * time.Second, MaximumAttempts: 10}),
	})
}

// sandboxInput names the sandbox by the owner this run loaded.
func (r *runtimeHost) sandboxInput() activities.HostSandboxInput {
	return activities.HostSandboxInput{Host: r.in.Host, AgentID: r.host.AgentID, Name: r.host.SandboxName}
}

// lockSandbox serializes sandbox operations (create, verify, park, destroy), once the host
// record is read.
func (r *runtimeHost) lockSandbox(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return r.loaded && !r.busy }); err != nil {
		return err
	}
	r.busy = true
	return nil
}

// acquire makes the sandbox ready for a member and counts its lease. The first member after
// the host was parked (or after a crash) finds no lease: a sandbox still running then is an
// orphan, fenced (verified, stopped) before anything starts in it.
func (r *runtimeHost) acquire(ctx workflow.Context, req contract.LeaseRequest) (contract.HostLease, error) {
	r.seq++
	started := r.seq
	if err := r.follow(ctx, req.Node); err != nil {
		return contract.HostLease{}, err
	}
	if err := r.lockSandbox(ctx); err != nil {
		return contract.HostLease{}, err
	}
	defer func() { r.busy = false }()
	if r.releasedAt[req.RuntimeSession] > started {
		return contract.HostLease{}, contract.Fail("the session released the host while this acquire waited", domain.ErrTypeHostBusy, nil)
	}
	lease := contract.HostLease{Host: r.in.Host, Node: r.host.Node, SandboxName: r.host.SandboxName}
	if r.controlling && !slices.Contains(r.s.Leases, req.RuntimeSession) {
		return lease, contract.Fail("a host control is running; the room wakes after it", domain.ErrTypeHostBusy, nil)
	}
	// A park that failed its checkpoint while this acquire waited for the lock.
	if err := r.fenced("the room cannot start"); err != nil && len(r.s.Leases) == 0 {
		return lease, err
	}
	// A parked host, or one whose final park failed (the node may have crashed with
	// providers still running in the guest), is verified — and fenced when nobody holds it —
	// before anything starts in it.
	if !r.s.Ready || r.s.ParkFailed {
		var out activities.EnsureSandboxResult
		err := workflow.ExecuteActivity(r.nodeCtx(ctx, activities.SandboxPrepareTimeout, 3), r.sbx.EnsureSandbox,
			activities.EnsureSandboxInput{Host: r.in.Host, Session: req.RuntimeSession, Fence: len(r.s.Leases) == 0}).Get(ctx, &out)
		if err != nil {
			r.s.LastError = "ensure sandbox: " + errorText(err)
			return lease, err
		}
		r.s.Ready, r.s.ParkFailed, r.s.LastError = true, false, ""
		lease.Created, lease.Fenced = out.Created, out.Fenced
		if out.Created {
			r.s.Created++
		}
	}
	if r.releasedAt[req.RuntimeSession] > started {
		return lease, contract.Fail("the session released the host while this acquire waited", domain.ErrTypeHostBusy, nil)
	}
	// The lease counts only once it is durable: a failed acquire leaves no lease behind that
	// would keep the sandbox from parking.
	err := workflow.ExecuteActivity(r.jamCtx(ctx), r.hosts.MarkMember, activities.MarkMemberInput{Host: r.in.Host,
		RuntimeSession: req.RuntimeSession, Membership: domain.MembershipActive, HostState: domain.HostActive}).Get(ctx, nil)
	if err != nil {
		r.s.LastError = "acquire: " + errorText(err)
		return lease, err
	}
	if !slices.Contains(r.s.Leases, req.RuntimeSession) {
		r.s.Leases = append(r.s.Leases, req.RuntimeSession)
	}
	if r.s.LastCheckpointAt.IsZero() {
		r.s.LastCheckpointAt = workflow.Now(ctx) // the after-turn clock starts with the first member
	}
	return lease, nil
}

// release drops a member's lease and records it dormant; the main loop parks the sandbox
// when the last lease is gone.
func (r *runtimeHost) release(ctx workflow.Context, req contract.LeaseRequest) error {
	r.seq++
	if r.releasedAt == nil {
		r.releasedAt = map[uuid.UUID]int{}
	}
	r.releasedAt[req.RuntimeSession] = r.seq
	r.s.Leases = slices.DeleteFunc(r.s.Leases, func(id uuid.UUID) bool { return id == req.RuntimeSession })
	r.s.Permits = slices.DeleteFunc(r.s.Permits, func(id uuid.UUID) bool { return id == req.RuntimeSession })
	if len(r.s.Leases) == 0 && domain.CheckpointReasons.Has(req.Reason) {
		r.s.ParkReason = req.Reason // the last member's reason names the checkpoint before the park
	}
	return workflow.ExecuteActivity(r.jamCtx(ctx), r.hosts.MarkMember, activities.MarkMemberInput{Host: r.in.Host,
		RuntimeSession: req.RuntimeSession, Membership: domain.MembershipDormant}).Get(ctx, nil)
}

// park stops the sandbox once no member holds it. A failure keeps the host retryable.
func (r *runtimeHost) park(ctx workflow.Context) {
	if err := r.lockSandbox(ctx); err != nil {
		return
	}
	defer func() { r.busy = false }()
	if len(r.s.Leases) > 0 {
		return // a member arrived while the lock was taken
	}
	reason := domain.CheckpointBeforeStop
	if r.s.ParkReason != "" {
		reason = r.s.ParkReason
	}
	// Cancelling creates no command unless follow cancels (a host moving off its dead node).
	pctx, cancel := workflow.WithCancel(ctx)
	r.parkCancel = cancel
	// Cancelled at the end, its activities are done: that creates no command either.
	defer func() { r.parkCancel = nil; cancel() }()
	// Every member is gone: the state is quiesced. A failed capture fences the host.
	if _, err := r.capture(pctx, reason, false); err != nil && pctx.Err() == nil {
		r.fenceUnsaved(ctx, reason, err)
	}
	r.s.ParkReason = ""
	err := workflow.ExecuteActivity(r.nodeCtx(pctx, sandboxLifecycleTimeout, 3), r.sbx.ParkSandbox,
		r.sandboxInput()).Get(pctx, nil)
	if err != nil {
		r.s.ParkFailed, r.s.LastError = true, "park sandbox: "+errorText(err)
		workflow.GetLogger(ctx).Warn("sandbox park failed; retrying", "host", r.in.Host, "error", err)
		return
	}
	r.s.Ready, r.s.ParkFailed, r.s.LastError = false, false, ""
	var out activities.MarkMemberResult
	_ = workflow.ExecuteActivity(r.jamCtx(ctx), r.hosts.MarkMember, activities.MarkMemberInput{Host: r.in.Host,
		HostState: domain.HostParked}).Get(ctx, &out)
	// A host whose record is gone (its agent was deleted) has nothing left to serve once its
	// sandbox is parked; its sandbox and files are cleanup's.
	r.gone = out.HostGone
}

// sandboxLifecycleTimeout bounds one park or destroy (sbx lifecycle commands: 300 s each,
// with a guest nonce read before them).
var sandboxLifecycleTimeout = 11 * time.Minute

// control runs a host-scope Stop, Restart or ResetSandbox. Its scope is the durable
// membership; every member is stopped (and recorded dormant) before the sandbox is parked or
// destroyed once; Restart and Reset then bring back only the members that were live. A
// failure stops the control with the members already stopped persisted as such.
func (r *runtimeHost) control(ctx workflow.Context, req contract.ControlRequest) (res contract.ControlResult, err error) {
	action, _ := domain.HostActions.Parse(req.Action)
	res = contract.ControlResult{Action: action, Members: []contract.ControlMember{}}
	if req.Replacement != nil {
		// A replacement that fails part-way gives the live members back their runtimes (on
		// the configuration they had) instead of leaving them stopped.
		defer func() {
			if err == nil {
				return
			}
			for _, m := range res.Members {
				if m.WasLive {
					_ = workflow.ExecuteActivity(r.jamCtx(ctx), r.hosts.RestartMember, activities.StopMemberInput{
						RuntimeSession: m.RuntimeSession}).Get(ctx, nil)
				}
			}
		}()
	}
	r.controlling = true
	defer func() { r.controlling = false }()
	if req.Replacement != nil {
		// A template apply reaches a room at its turn boundary: running turns finish, new ones
		// are refused until every member is stopped.
		r.replacing = true
		defer func() { r.replacing = false }()
		if _, err := workflow.AwaitWithTimeout(ctx, replaceTurnWait, func() bool { return len(r.s.Permits) == 0 }); err != nil {
			return res, err
		}
	}
	var scope []activities.ScopeMember
	if err := workflow.ExecuteActivity(r.jamCtx(ctx), r.hosts.HostScope,
		activities.HostScopeInput{Host: r.in.Host, Action: action, DiscardChanges: req.DiscardChanges}).Get(ctx, &scope); err != nil {
		return res, err
	}
	memberCtx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute, HeartbeatTimeout: runtimeHeartbeat,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	for _, m := range scope {
		var wasLive bool
		if err := workflow.ExecuteActivity(memberCtx, r.hosts.StopMember, activities.StopMemberInput{
			RuntimeSession: m.RuntimeSession, Reason: action.StopReason()}).Get(ctx, &wasLive); err != nil {
			return res, fmt.Errorf("stop member %s: %w", m.RuntimeSession, err)
		}
		// Stopped members released their leases; a dormant one is recorded dormant too.
		r.s.Leases = slices.DeleteFunc(r.s.Leases, func(id uuid.UUID) bool { return id == m.RuntimeSession })
		if err := workflow.ExecuteActivity(r.jamCtx(ctx), r.hosts.MarkMember, activities.MarkMemberInput{Host: r.in.Host,
			RuntimeSession: m.RuntimeSession, Membership: domain.MembershipDormant}).Get(ctx, nil); err != nil {
			return res, err
		}
		res.Members = append(res.Members, contract.ControlMember{RuntimeSession: m.RuntimeSession, RoomID: m.RoomID, Alias: m.Alias, WasLive: wasLive})
	}
	if err := r.lockSandbox(ctx); err != nil {
		return res, err
	}
	reason := domain.CheckpointBeforeStop
	if action == domain.HostResetSandbox {
		reason = domain.CheckpointBeforeReset
	}
	// Every member is stopped: the state is quiesced. A failed capture fences the host.
	if _, err := r.capture(ctx, reason, false); err != nil && ctx.Err() == nil {
		r.fenceUnsaved(ctx, reason, err)
	}
	if action == domain.HostResetSandbox {
		var out activities.RemoveSandboxResult
		err = workflow.ExecuteActivity(r.nodeCtx(ctx, sandboxLifecycleTimeout, 3), r.sbx.RemoveSandbox,
			r.sandboxInput()).Get(ctx, &out)
		res.SandboxDestroyed = out.Removed
	} else {
		err = workflow.ExecuteActivity(r.nodeCtx(ctx, sandboxLifecycleTimeout, 3), r.sbx.ParkSandbox,
			r.sandboxInput()).Get(ctx, nil)
	}
	r.busy = false
	if err != nil {
		r.s.LastError = string(action) + ": " + errorText(err)
		return res, err
	}
	r.s.Ready, r.s.ParkFailed = false, false
	if err := workflow.ExecuteActivity(r.jamCtx(ctx), r.hosts.MarkMember, activities.MarkMemberInput{Host: r.in.Host,
		HostState: domain.HostParked}).Get(ctx, nil); err != nil {
		return res, err
	}
	if req.Replacement != nil && action == domain.HostResetSandbox {
		rep := *req.Replacement
		rep.Host = r.in.Host
		if err := workflow.ExecuteActivity(r.jamCtx(ctx), r.hosts.CommitHostReplacement, rep).Get(ctx, nil); err != nil {
			// Superseded by a newer save: the members come back on the configuration they had.
			r.s.LastError = "replacement: " + errorText(err)
		} else {
			res.Replaced = true
		}
	}
	r.controlling = false
	if action == domain.HostStop {
		return res, nil
	}
	// No member restarts over provider state its teardown could not checkpoint.
	if err := r.fenced("the host cannot " + string(action)); err != nil {
		return res, err
	}
	for i, m := range res.Members {
		if !m.WasLive {
			continue
		}
		if err := workflow.ExecuteActivity(r.jamCtx(ctx), r.hosts.RestartMember, activities.StopMemberInput{
			RuntimeSession: m.RuntimeSession}).Get(ctx, nil); err != nil {
			r.s.LastError = fmt.Sprintf("restart member %s: %s", m.RuntimeSession, errorText(err))
			continue
		}
		res.Members[i].Restarted = true
	}
	return res, nil
}

// checkpointTimeout bounds one capture (20 GiB at most, mostly hard links after the first).
var checkpointTimeout = 30 * time.Minute

// capture publishes a generation of the (quiesced) provider state; force captures even when
// no turn ran since the last one (an operator's manual checkpoint).
func (r *runtimeHost) capture(ctx workflow.Context, reason domain.CheckpointReason, force bool) (contract.CaptureCheckpointResult, error) {
	if !r.s.Dirty && !force {
		return contract.CaptureCheckpointResult{Skipped: true}, nil
	}
	var id uuid.UUID
	if err := workflow.SideEffect(ctx, func(workflow.Context) any { return uuid.New() }).Get(&id); err != nil {
		return contract.CaptureCheckpointResult{}, err
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:              contract.NodeTaskQueue(r.host.Node),
		ScheduleToStartTimeout: nodeScheduleToStart,
		StartToCloseTimeout:    checkpointTimeout,
		HeartbeatTimeout:       runtimeHeartbeat,
		RetryPolicy:            contract.Retry(temporal.RetryPolicy{MaximumAttempts: 3}),
	})
	var out contract.CaptureCheckpointResult
	err := workflow.ExecuteActivity(actx, r.ckpt.CaptureCheckpoint, activities.CaptureCheckpointInput{
		Host: r.in.Host, ID: id, Reason: reason}).Get(ctx, &out)
	if err != nil {
		r.s.LastError = "checkpoint: " + errorText(err)
		workflow.GetLogger(ctx).Warn("checkpoint failed", "host", r.in.Host, "reason", reason, "error", err)
		return out, err
	}
	r.s.Dirty, r.s.LastCheckpointAt, r.s.Unsaved = false, workflow.Now(ctx), nil
	if !out.Skipped {
		r.s.Checkpoints++
	}
	return out, nil
}

// afterTurnEvery is how often a host with turns running is checkpointed (after a turn).
var afterTurnEvery = 10 * time.Minute

// ckptRequest is a checkpoint waiting for the loop.
type ckptRequest struct {
	reason domain.CheckpointReason
	force  bool
	done   bool
	result contract.CaptureCheckpointResult
	err    error
}

// runCheckpoints captures every requested checkpoint with the host quiesced: new turns wait
// (so a stream of turns cannot starve the checkpoint) and running ones finish first.
func (r *runtimeHost) runCheckpoints(ctx workflow.Context) {
	// Drain turns before taking the sandbox lock, so acquires, releases and parks are not
	// held behind a long turn.
	r.s.Quiesced = true
	defer func() { r.s.Quiesced = false }()
	_ = workflow.Await(ctx, func() bool { return len(r.s.Permits) == 0 })
	if err := r.lockSandbox(ctx); err != nil {
		return
	}
	defer func() { r.busy = false }()
	for len(r.ckpts) > 0 {
		req := r.ckpts[0]
		r.ckpts = r.ckpts[1:]
		req.result, req.err = r.capture(ctx, req.reason, req.force)
		req.done = true
	}
}

// checkpointNow is the manual checkpoint update: it waits for the loop to capture.
func (r *runtimeHost) checkpointNow(ctx workflow.Context) (contract.CaptureCheckpointResult, error) {
	return r.requestCheckpoint(ctx, &ckptRequest{reason: domain.CheckpointManual, force: true})
}

// settle is UpdateSettle: a checkpoint only when a turn ran since the newest generation,
// served by the loop after any park in progress (whose capture then leaves nothing to take).
// A new update: no recorded history carries it, so its commands need no version gate.
func (r *runtimeHost) settle(ctx workflow.Context) (contract.CaptureCheckpointResult, error) {
	return r.requestCheckpoint(ctx, &ckptRequest{reason: domain.CheckpointBeforeStop})
}

// requestCheckpoint hands req to the loop and waits for its capture.
func (r *runtimeHost) requestCheckpoint(ctx workflow.Context, req *ckptRequest) (contract.CaptureCheckpointResult, error) {
	r.ckpts = append(r.ckpts, req)
	if err := workflow.Await(ctx, func() bool { return req.done }); err != nil {
		return contract.CaptureCheckpointResult{}, err
	}
	return req.result, req.err
}

// replaceTurnWait bounds how long a recreation waits for running turns before it stops the
// members anyway (a turn still running then is interrupted; its messages stay queued).
var replaceTurnWait = 30 * time.Minute

// permit lets a member's turn run unless a checkpoint holds the host quiesced.
func (r *runtimeHost) permit(ctx workflow.Context, req contract.LeaseRequest) error {
	if r.replacing {
		return contract.Fail("the host is being recreated for a template change; the turn waits", domain.ErrTypeHostReplacing, nil)
	}
	if err := workflow.Await(ctx, func() bool { return !r.s.Quiesced }); err != nil {
		return err
	}
	// Only a member holding a lease runs turns: a permit that waited past its session's
	// release would otherwise stay out forever and hold every later checkpoint.
	if !slices.Contains(r.s.Leases, req.RuntimeSession) {
		return contract.Fail("the session holds no lease on this host", domain.ErrTypeHostBusy, nil)
	}
	// One turn per session at a time: a retried permit of the same turn adds nothing.
	if !slices.Contains(r.s.Permits, req.RuntimeSession) {
		r.s.Permits = append(r.s.Permits, req.RuntimeSession)
	}
	r.s.Dirty = true
	return nil
}

// unpermit ends the member's turn; when a checkpoint is due (turns ran and the newest
// generation is older than afterTurnEvery) one is requested with reason after_turn.
func (r *runtimeHost) unpermit(ctx workflow.Context, req contract.LeaseRequest) error {
	r.s.Permits = slices.DeleteFunc(r.s.Permits, func(id uuid.UUID) bool { return id == req.RuntimeSession })
	if r.s.Dirty && len(r.ckpts) == 0 && workflow.Now(ctx).Sub(r.s.LastCheckpointAt) >= afterTurnEvery {
		r.ckpts = append(r.ckpts, &ckptRequest{reason: domain.CheckpointAfterTurn})
	}
	return nil
}

// quiesce holds new turns back and returns once no turn of any member runs: a checkpoint is
// then captured with every sibling quiesced.
func (r *runtimeHost) quiesce(ctx workflow.Context) error {
	if err := workflow.Await(ctx, func() bool { return !r.s.Quiesced }); err != nil {
		return err
	}
	r.s.Quiesced = true
	return workflow.Await(ctx, func() bool { return len(r.s.Permits) == 0 })
}

func (r *runtimeHost) resume(_ workflow.Context) error {
	r.s.Quiesced = false
	return nil
}

// stage is where the host is now, for the Web UI and JamStage.
func (r *runtimeHost) stage() domain.WorkflowStage {
	switch {
	case !r.loaded:
		return domain.StageLoading
	case r.controlling:
		return domain.StageControlling
	case r.s.Quiesced:
		return domain.StageCheckpointing
	case r.busy:
		return domain.StageSandboxBusy
	case r.s.ParkFailed:
		return domain.StageParkFailed
	case r.s.Unsaved != nil && len(r.s.Leases) == 0:
		return domain.StageFenced
	case len(r.s.Leases) > 0 && r.s.Ready:
		return domain.StageServing
	case len(r.s.Leases) > 0:
		return domain.StagePreparing
	}
	return domain.StageParked
}

// details is what the Web UI shows the host doing now.
func (r *runtimeHost) details() string {
	d := fmt.Sprintf("%s · %d member(s), %d turn(s) running · %d checkpoint(s)", r.stage(), len(r.s.Leases), len(r.s.Permits), r.s.Checkpoints)
	if r.host.SandboxName != "" {
		d += fmt.Sprintf(" · sandbox %s on node %s", r.host.SandboxName, r.host.Node)
	}
	if u := r.s.Unsaved; u != nil {
		d += fmt.Sprintf(" · fenced: the %s checkpoint failed %d time(s) (%s)", u.Reason, u.Attempts, u.Error)
	} else if r.s.LastError != "" {
		d += " · last error: " + r.s.LastError
	}
	return domain.Truncate(d, 1000)
}

// status is what QueryHost answers.
func (r *runtimeHost) status() contract.RuntimeHostStatus {
	return contract.RuntimeHostStatus{Leases: r.s.Leases, Ready: r.s.Ready, ParkFailed: r.s.ParkFailed,
		Controlling: r.controlling, Permits: len(r.s.Permits), Quiesced: r.s.Quiesced, LastError: r.s.LastError,
		Checkpoints: r.s.Checkpoints, Moves: r.s.Moves, Unsaved: r.s.Unsaved}
}
