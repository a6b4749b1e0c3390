package workflows

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// Activity bounds of a room session (docs/architecture.md §5, "Bounds").
var (
	// runtimeHeartbeat is how long a node activity may go without a heartbeat before the
	// worker is considered dead (it beats every 5 s).
	runtimeHeartbeat = 15 * time.Second
	// nodeScheduleToStart bounds how long a node activity waits for its node's worker: a
	// live worker polls its queue all the time, so a longer wait means it died, and the
	// session should learn that (and place again) before the node is even marked stale.
	nodeScheduleToStart = 20 * time.Second
	// silentNodeTeardown bounds the teardown asked of a node whose worker did not take the
	// session's turn within nodeScheduleToStart: waiting as long again would only delay the
	// next wake, which may place the room on another node once this one is stale. A worker
	// that comes back reaps what it left; one that lost its store fences itself.
	silentNodeTeardown = 2 * time.Second
	// maxCrashRetries is how many times in a row a crashed turn is retried without a new poke.
	maxCrashRetries = 3
	// maxTurnsPerRun continues the workflow as new after this many turns even if Temporal
	// has not suggested it yet, bounding history.
	maxTurnsPerRun int64 = 500
)

// action is an update waiting for the main loop.
type action struct {
	name     string
	stop     domain.SessionStopReason
	restart  contract.RestartRequest
	remove   contract.RemoveRequest
	apply    contract.ApplyConfigRequest
	fresh    contract.StartFreshRequest
	done     bool
	result   contract.RoomSessionStatus
	err      error
	finished bool // the workflow ends after this action
}

type roomSession struct {
	in      contract.RoomSessionInput
	s       contract.RoomSessionState
	actions []*action
	exits   []contract.RuntimeExitedSignal
	retries []contract.RetrySignal
	// moves are SignalMove requests not yet acted on.
	moves []contract.MoveSignal
	// recycles are the node watchdog's SignalRecycle reports not yet acted on.
	recycles []contract.RecycleSignal
	// runTurns counts this run's turns, for continue-as-new.
	runTurns int64
	// turnStarted is when the running turn began (for the Web UI's details).
	turnStarted                  time.Time
	inbound, exited, retry, move workflow.ReceiveChannel
	recycle                      workflow.ReceiveChannel
	sess                         *activities.Sessions
	hosts                        *activities.Hosts
	rt                           *activities.Runtimes
	// candidate is the configuration generation the next prepare starts (0: the effective
	// one); set only while an apply runs.
	candidate int64
	// startErr is why the last start failed (nil when it did not).
	startErr error
}

// RoomSession is the entity workflow of one room's runtime session: it registers the room
// dormant, wakes a runtime on its node when messages wait, runs turns, reaps it when idle,
// and serves stop, restart and remove. See docs/architecture.md §4.
func RoomSession(ctx workflow.Context, in contract.RoomSessionInput) error {
	r := &roomSession{in: in}
	if in.State != nil {
		r.s = *in.State
	} else {
		// The first run loads the session at once: non-lazy binds live, backlog wakes.
		r.s = contract.RoomSessionState{Phase: domain.PhaseDormant, Pokes: 1, Lazy: true, IdleSecs: domain.DefaultIdleSecs}
	}
	if err := r.register(ctx); err != nil {
		return err
	}
	publishStage(ctx, contract.TypeRoomSession, in.SearchTags(), func() string { return string(r.s.Phase) }, r.details)
	for {
		r.takeRecycles()
		if len(r.actions) > 0 {
			a := r.actions[0]
			r.actions = r.actions[1:]
			r.do(ctx, a)
			if a.finished {
				r.drainFinal(ctx)
				return nil
			}
			continue
		}
		if len(r.exits) > 0 {
			e := r.exits[0]
			r.exits = r.exits[1:]
			r.onExit(ctx, e)
			continue
		}
		if len(r.retries) > 0 {
			rs := r.retries[0]
			r.retries = r.retries[1:]
			r.retryStart(ctx, rs.Reason)
			continue
		}
		if len(r.moves) > 0 {
			m := r.moves[0]
			r.moves = r.moves[1:]
			r.leaveDrainingNode(ctx, m.Node)
			continue
		}
		if len(r.recycles) > 0 {
			rc := r.recycles[0]
			r.recycles = r.recycles[1:]
			r.onRecycle(ctx, rc)
			continue
		}
		if r.s.Phase == domain.PhaseRetired {
			if r.s.Pokes > 0 {
				r.s.Pokes = 0
				r.revive(ctx)
				continue
			}
		} else if r.s.Pokes > 0 {
			r.s.Pokes = 0
			r.serve(ctx)
			continue
		}
		if r.runTurns >= maxTurnsPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			if err := r.continueAsNew(ctx); err != nil {
				return err
			}
			continue // work arrived while handlers finished: serve it first
		}
		r.wait(ctx)
	}
}

func (r *roomSession) ready() bool {
	return len(r.actions) > 0 || len(r.exits) > 0 || len(r.retries) > 0 || len(r.moves) > 0 || len(r.recycles) > 0 || r.s.Pokes > 0
}

// wait blocks until there is something to do; a live, reapable runtime is torn down when
// its idle threshold passes first.
func (r *roomSession) wait(ctx workflow.Context) {
	if r.s.Phase == domain.PhaseDormant && r.s.PlaceWaits > 0 && !r.s.Held &&
		workflow.GetVersion(ctx, versionPlaceRetry, workflow.DefaultVersion, 1) >= 1 {
		r.waitToPlace(ctx)
		return
	}
	if r.s.Phase != domain.PhaseLive || !r.s.Lazy || r.s.IdlePolicy == domain.IdleKeepAlive {
		_ = workflow.Await(ctx, r.ready)
		return
	}
	idle := time.Duration(r.s.IdleSecs) * time.Second
	left := r.s.LastActivity.Add(idle).Sub(workflow.Now(ctx))
	if left > 0 {
		opts := workflow.AwaitOptions{Timeout: left, TimerOptions: workflow.TimerOptions{
			Summary: fmt.Sprintf("idle reap after %s without activity", idle)}}
		if ok, _ := workflow.AwaitWithOptions(ctx, opts, r.ready); ok {
			return
		}
	}
	workflow.GetLogger(ctx).Info("idle runtime reaped", "runtime_session", r.in.RuntimeSession, "idle", idle)
	r.teardown(ctx, domain.CheckpointBeforeStop)
}

func (r *roomSession) register(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, contract.QueryState, func() (contract.RoomSessionStatus, error) {
		return r.status(), nil
	}); err != nil {
		return err
	}
	r.inbound = workflow.GetSignalChannel(ctx, contract.SignalInbound)
	r.exited = workflow.GetSignalChannel(ctx, contract.SignalRuntimeExited)
	r.retry = workflow.GetSignalChannel(ctx, contract.SignalRetry)
	r.move = workflow.GetSignalChannel(ctx, contract.SignalMove)
	r.recycle = workflow.GetSignalChannel(ctx, contract.SignalRecycle)
	workflow.Go(ctx, func(ctx workflow.Context) {
		sel := workflow.NewSelector(ctx)
		sel.AddReceive(r.inbound, func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(ctx, nil)
			r.s.Pokes++
		})
		sel.AddReceive(r.exited, func(c workflow.ReceiveChannel, _ bool) {
			var e contract.RuntimeExitedSignal
			c.Receive(ctx, &e)
			r.exits = append(r.exits, e)
		})
		sel.AddReceive(r.retry, func(c workflow.ReceiveChannel, _ bool) {
			var rs contract.RetrySignal
			c.Receive(ctx, &rs)
			r.retries = append(r.retries, rs)
		})
		sel.AddReceive(r.recycle, func(c workflow.ReceiveChannel, _ bool) {
			var rc contract.RecycleSignal
			c.Receive(ctx, &rc)
			r.recycles = append(r.recycles, rc)
		})
		sel.AddReceive(r.move, func(c workflow.ReceiveChannel, _ bool) {
			var m contract.MoveSignal
			c.Receive(ctx, &m)
			// Gated: a worker of the code before moves ignored the signal, and its recorded
			// history must replay the same.
			if workflow.GetVersion(ctx, versionRoomMove, workflow.DefaultVersion, 1) >= 1 {
				r.moves = append(r.moves, m)
			}
		})
		for {
			sel.Select(ctx)
		}
	})
	if err := workflow.SetUpdateHandlerWithOptions(ctx, contract.UpdateStop,
		func(ctx workflow.Context, req contract.StopRequest) (contract.RoomSessionStatus, error) {
			reason, _ := domain.SessionStopReasons.Parse(req.Reason)
			return r.enqueue(ctx, &action{name: contract.UpdateStop, stop: reason})
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req contract.StopRequest) error {
			if _, err := domain.SessionStopReasons.Parse(req.Reason); err != nil {
				return contract.Fail(fmt.Sprintf("reason %q: want one of %v", req.Reason, domain.SessionStopReasons.Strings()), domain.ErrTypeValidation, nil)
			}
			return r.notRetired(contract.UpdateStop)
		}}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, contract.UpdateRestart,
		func(ctx workflow.Context, req contract.RestartRequest) (contract.RoomSessionStatus, error) {
			return r.enqueue(ctx, &action{name: contract.UpdateRestart, restart: req})
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req contract.RestartRequest) error {
			return r.notRetired(contract.UpdateRestart)
		}}); err != nil {
		return err
	}
	if err := r.registerApply(ctx); err != nil {
		return err
	}
	if err := r.registerStartFresh(ctx); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, contract.UpdateRemove,
		func(ctx workflow.Context, req contract.RemoveRequest) (contract.RoomSessionStatus, error) {
			return r.enqueue(ctx, &action{name: contract.UpdateRemove, remove: req, finished: req.Final})
		},
		workflow.UpdateHandlerOptions{Validator: func(ctx workflow.Context, req contract.RemoveRequest) error {
			if r.s.Phase == domain.PhaseRetired && !req.Final {
				return contract.Fail("the session is already removed", domain.ErrTypeRetired, nil)
			}
			return nil
		}})
}

func (r *roomSession) notRetired(what string) error {
	if r.s.Phase == domain.PhaseRetired {
		return contract.Fail(fmt.Sprintf("cannot %s: the session's room binding was removed", what), domain.ErrTypeRetired, nil)
	}
	return nil
}

// enqueue hands an update to the main loop and waits for it to be done. A turn in flight is
// interrupted first, so a stop never waits for a long turn (its messages stay queued).
func (r *roomSession) enqueue(ctx workflow.Context, a *action) (contract.RoomSessionStatus, error) {
	r.actions = append(r.actions, a)
	// A configuration apply waits for the turn boundary; everything else interrupts.
	if r.s.InTurn && a.name != contract.UpdateApplyConfig {
		r.interrupt(ctx)
	}
	if err := workflow.Await(ctx, func() bool { return a.done }); err != nil {
		return contract.RoomSessionStatus{}, err
	}
	return a.result, a.err
}

func (r *roomSession) do(ctx workflow.Context, a *action) {
	defer func() { a.done, a.result = true, r.status() }()
	switch a.name {
	case contract.UpdateStop:
		r.teardown(ctx, domain.CheckpointBeforeStop)
		// An operator's stop holds this one room down; an agent stop is held by the agent's
		// persisted run intent instead, which every wake reads.
		r.s.Held = a.stop == domain.StopOperator
	case contract.UpdateRestart:
		r.retryStart(ctx, "restart")
		r.s.Held = false
		r.teardown(ctx, domain.CheckpointBeforeStop)
		r.s.Crashes, r.s.LastError = 0, ""
		// An operator's restart starts the watchdog's loop count over.
		r.s.RecycleTimes = nil
		r.s.WantLive = !a.restart.OnlyIfBacklog
		r.s.Pokes++
	case contract.UpdateRemove:
		r.teardown(ctx, domain.CheckpointBeforeRemove)
		r.s.Phase, r.s.Held, r.s.WantLive, r.s.Pokes = domain.PhaseRetired, false, false, 0
	case contract.UpdateApplyConfig:
		r.applyConfig(ctx, a.apply.Generation)
		// A new configuration is a change: a session that could not start tries it.
		r.retryStart(ctx, "configuration applied")
	case contract.UpdateStartFresh:
		a.err = r.startFresh(ctx, a.fresh)
	}
}

// exited handles the node's report that the child died on its own.
func (r *roomSession) onExit(ctx workflow.Context, e contract.RuntimeExitedSignal) {
	if r.s.Phase != domain.PhaseLive || e.Generation != r.s.Generation {
		return // a stale report about an instance already replaced or stopped
	}
	workflow.GetLogger(ctx).Warn("runtime exited", "runtime_session", r.in.RuntimeSession, "generation", e.Generation, "reason", e.Reason)
	r.s.Phase, r.s.PID, r.s.Warning = domain.PhaseDormant, 0, ""
	r.s.Crashed = e.Reason != domain.RuntimeStoppedWithWorker
	if r.s.Crashed {
		r.s.LastError = fmt.Sprintf("runtime exited: %s", e.Reason)
	}
	r.release(ctx)
}

// revive handles a poke to a retired session: an authoritative re-add reactivated the same
// runtime session, so it returns to dormant (and wakes if messages wait).
func (r *roomSession) revive(ctx workflow.Context) {
	load, ok := r.load(ctx)
	if !ok || load.Gone || load.Removed {
		return
	}
	if r.s.Failure != nil {
		// Removed while failed: the re-added room tries again, with its record cleared.
		r.s.Phase = domain.PhaseFailed
		r.retryStart(ctx, "re-added to the room")
		return
	}
	r.s.Phase = domain.PhaseDormant
	r.s.Pokes++
}

// serve answers a poke: it wakes a dormant runtime when messages wait (or when the lifecycle
// is not lazy), then runs one turn over the room's backlog.
func (r *roomSession) serve(ctx workflow.Context) {
	if r.s.Held || r.s.Phase == domain.PhaseFailed {
		return // only a change (restart, template, adapter) wakes a failed session
	}
	if r.s.Phase != domain.PhaseLive {
		load, ok := r.load(ctx)
		if !ok {
			return
		}
		if load.Gone || load.Removed {
			r.s.Phase = domain.PhaseRetired
			return
		}
		r.s.Lazy, r.s.IdleSecs = load.Lazy, load.IdleSecs
		if load.AgentStopped || (load.Backlog == 0 && load.Lazy && !r.s.WantLive) {
			r.s.PlaceWaits = 0
			return
		}
		if load.Node == "" {
			if load.NoAdapter && r.failStart(ctx, domain.FailureAdapterMissing,
				fmt.Sprintf("no live node has a runtime adapter for transport %s", load.Transport)) {
				return
			}
			// Full nodes, a draining fleet or a stale node holding the room's state: the
			// messages stay queued and the reason shows on the session until a poke places it.
			r.s.LastError = load.Waiting
			if r.s.LastError == "" {
				r.s.LastError = "no live node to run the runtime on"
			}
			r.s.PlaceWaits++
			return
		}
		r.s.PlaceWaits = 0
		if !r.prepare(ctx, load.Node, load.Sandboxed) {
			return
		}
	}
	r.turn(ctx)
}

// versionPlaceRetry gates the timer of a wake that found no node: histories written before
// it waited for the next poke (a message, the Reconcile schedule) instead.
const versionPlaceRetry = "place-retry"

// placeRetryFirst and placeRetryMax bound the wait before a wake that found no node tries
// again: soon after a slot frees or a node returns, and at most as long as the Reconcile
// schedule's default interval, however long the fleet stays full.
const (
	placeRetryFirst = 5 * time.Second
	placeRetryMax   = time.Minute
)

// placeRetryAfter is the wait before the n-th retry (n ≥ 1): doubling from placeRetryFirst
// up to placeRetryMax, plus up to a fifth more, spread by the session's id so the sessions
// a full fleet queued do not all come back in the same second.
func placeRetryAfter(n int, session uuid.UUID) time.Duration {
	d := placeRetryFirst
	for i := 1; i < n && d < placeRetryMax; i++ {
		d *= 2
	}
	d = min(d, placeRetryMax)
	return d + d*time.Duration(session[15]%51)/255
}

// waitToPlace waits for something to do or, first, for the time to try placing the wake again.
func (r *roomSession) waitToPlace(ctx workflow.Context) {
	d := placeRetryAfter(r.s.PlaceWaits, r.in.RuntimeSession)
	opts := workflow.AwaitOptions{Timeout: d, TimerOptions: workflow.TimerOptions{
		Summary: fmt.Sprintf("place the wake again in %s: %s", d.Round(time.Second), r.s.LastError)}}
	if ok, _ := workflow.AwaitWithOptions(ctx, opts, r.ready); !ok {
		r.s.Pokes++
	}
}

// versionLocalLoad gates reading the session as a local activity: histories written before
// it scheduled LoadSession as an activity of its own.
const versionLocalLoad = "load-session-local"

func (r *roomSession) load(ctx workflow.Context) (activities.LoadSessionResult, bool) {
	var out activities.LoadSessionResult
	in := activities.LoadSessionInput{RuntimeSession: r.in.RuntimeSession, PreviousNode: r.s.Node, WantLive: r.s.WantLive}
	var fut workflow.Future
	if workflow.GetVersion(ctx, versionLocalLoad, workflow.DefaultVersion, 1) >= 1 {
		// A few store reads: run inside the workflow task instead of a round trip through
		// the server's activity queue and a second workflow task (about 20 ms of every
		// wake and every dormant registration).
		lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout: 10 * time.Second,
			RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
		})
		fut = workflow.ExecuteLocalActivity(lctx, r.sess.LoadSession, in)
	} else {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			StartToCloseTimeout: 30 * time.Second,
			RetryPolicy:         &temporal.RetryPolicy{MaximumInterval: 30 * time.Second, MaximumAttempts: 10},
		})
		fut = workflow.ExecuteActivity(actx, r.sess.LoadSession, in)
	}
	err := fut.Get(ctx, &out)
	if err != nil {
		r.s.LastError = "load session: " + errorText(err)
		return out, false
	}
	return out, true
}

func (r *roomSession) nodeCtx(ctx workflow.Context, opts workflow.ActivityOptions) workflow.Context {
	opts.TaskQueue = contract.NodeTaskQueue(r.s.Node)
	if opts.ScheduleToStartTimeout == 0 {
		opts.ScheduleToStartTimeout = nodeScheduleToStart
	}
	return workflow.WithActivityOptions(ctx, opts)
}

func (r *roomSession) prepare(ctx workflow.Context, node string, sandboxed bool) bool {
	r.s.Phase, r.s.Node, r.s.WantLive = domain.PhaseStarting, node, false
	r.startErr = nil
	if sandboxed && !r.acquire(ctx, node) {
		r.s.Phase = domain.PhaseDormant
		r.failIfPermanent(ctx)
		return false
	}
	actx := r.nodeCtx(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 10 * time.Minute,
		HeartbeatTimeout:    runtimeHeartbeat,
		RetryPolicy:         contract.Retry(temporal.RetryPolicy{MaximumAttempts: 3}),
	})
	var out activities.PrepareRuntimeResult
	in := activities.PrepareRuntimeInput{RuntimeSession: r.in.RuntimeSession, ConfigGeneration: r.candidate}
	if sandboxed {
		in.Host, in.Sandbox = r.s.Host, r.s.Sandbox
		// Starting a provider writes its state (a new session, a restore): like a turn, it
		// holds a permit, so no checkpoint captures the state half-written.
		if !r.permit(ctx, false) {
			r.release(ctx)
			r.s.Phase = domain.PhaseDormant
			return false
		}
	}
	actx = workflow.WithActivityOptions(actx, withSummary(workflow.GetActivityOptions(actx),
		fmt.Sprintf("start the runtime on node %s", node)))
	err := workflow.ExecuteActivity(actx, r.rt.PrepareRuntime, in).Get(ctx, &out)
	if sandboxed {
		r.permit(ctx, true)
	}
	if err != nil {
		r.release(ctx)
		r.s.Phase, r.s.LastError = domain.PhaseDormant, fmt.Sprintf("prepare runtime on node %s: %s", node, errorText(err))
		r.startErr = err
		workflow.GetLogger(ctx).Warn("runtime did not start", "runtime_session", r.in.RuntimeSession, "error", err)
		r.failIfPermanent(ctx)
		return false
	}
	r.s.Phase, r.s.Generation, r.s.PID = domain.PhaseLive, out.Generation, out.PID
	r.s.ProviderSessionID, r.s.IdlePolicy, r.s.Crashed = out.ProviderSessionID, out.IdlePolicy, false
	r.s.Warning = out.Warning
	r.s.LastActivity, r.s.LastError = workflow.Now(ctx), ""
	return true
}

// turn runs one RunTurn over the backlog. Failed or cancelled turns settle nothing; a runtime
// that died (or whose worker did) sends the session dormant, and the still-queued messages
// wake it again a bounded number of times.
func (r *roomSession) turn(ctx workflow.Context) {
	actx := r.nodeCtx(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 24 * time.Hour,
		HeartbeatTimeout:    runtimeHeartbeat,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
	})
	if len(r.actions) > 0 {
		return // a stop, restart or remove came in while the runtime was prepared: it goes first
	}
	if r.s.Leased {
		if err := r.permitErr(ctx, false); err != nil {
			if contract.Is(err, domain.ErrTypeHostReplacing) {
				// The host is being recreated for a template edit: this room's stop comes
				// next; the messages wait for the runtime that follows.
				_ = workflow.Sleep(ctx, replacingBackoff)
				r.s.Pokes++
				return
			}
			// The host no longer answers for this lease (its workflow ended or lost it): the
			// runtime cannot be trusted to run there. Tear down and wake again, boundedly.
			r.teardown(ctx, domain.CheckpointBeforeStop)
			r.s.Crashes++
			if r.s.Crashes <= maxCrashRetries {
				r.s.Pokes++
			}
			return
		}
		if len(r.actions) > 0 {
			r.permit(ctx, true)
			return
		}
	}
	r.s.Turns++
	r.runTurns++
	r.s.InTurn, r.turnStarted = true, workflow.Now(ctx)
	var out activities.RunTurnResult
	// The Web UI's label of the activity (user metadata: not part of the command replay checks).
	actx = workflow.WithActivityOptions(actx, withSummary(workflow.GetActivityOptions(actx),
		fmt.Sprintf("turn %d on node %s", r.s.Turns, r.s.Node)))
	fut := workflow.ExecuteActivity(actx, r.rt.RunTurn, activities.RunTurnInput{RuntimeSession: r.in.RuntimeSession,
		Generation: r.s.Generation, TurnID: r.turnID()})
	if r.steers(ctx) {
		r.steerWhile(ctx, fut)
	}
	err := fut.Get(ctx, &out)
	r.s.InTurn = false
	if r.s.Leased {
		r.permit(ctx, true)
	}
	r.s.LastActivity = workflow.Now(ctx)
	if err == nil {
		r.s.Crashes, r.s.Warning = 0, out.Warning
		if out.Outcome != domain.TurnComplete && out.Error != "" {
			r.s.LastError = "turn " + string(out.Outcome) + ": " + out.Error
		}
		return
	}
	var app *temporal.ApplicationError
	var timeout *temporal.TimeoutError
	switch {
	case errors.As(err, &app) && domain.ErrTypeRuntimeNotLive.Matches(app.Type()), errors.As(err, &timeout):
		// The runtime or its worker is gone. Make sure nothing is left on the node (a
		// restarted worker has nothing; a hung one is reaped), then wake again.
		r.s.LastError = "runtime lost during a turn: " + errorText(err)
		wait := nodeScheduleToStart
		if errors.As(err, &timeout) && timeout.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START {
			// Only the activity's timeout changes: the command sequence stays as recorded.
			wait = silentNodeTeardown
		}
		r.teardownWithin(ctx, domain.CheckpointBeforeStop, wait)
		r.s.Crashed = true
		r.s.Crashes++
		if r.s.Crashes <= maxCrashRetries {
			r.s.Pokes++
		}
	default:
		r.s.LastError = "turn: " + errorText(err)
	}
}

// turnID names the session's current (or last) turn, as RunTurn and InterruptTurn get it.
func (r *roomSession) turnID() string { return fmt.Sprintf("g%d-t%d", r.s.Generation, r.s.Turns) }

// interrupt ends the running turn (from an update handler) so the action can proceed.
func (r *roomSession) interrupt(ctx workflow.Context) {
	actx := r.nodeCtx(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 15 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
	err := workflow.ExecuteActivity(actx, r.rt.InterruptTurn, activities.InterruptTurnInput{
		RuntimeSession: r.in.RuntimeSession, Generation: r.s.Generation, TurnID: r.turnID()}).Get(ctx, nil)
	if err != nil {
		workflow.GetLogger(ctx).Warn("interrupt turn", "runtime_session", r.in.RuntimeSession, "error", err)
	}
}

// teardown stops a live runtime with reason and leaves the session dormant. A teardown that
// keeps failing is retried for a bounded time; after that the session is still dormant and
// wakeable (the node's registry keeps tracking the child it could not stop).
func (r *roomSession) teardown(ctx workflow.Context, reason domain.CheckpointReason) bool {
	return r.teardownWithin(ctx, reason, nodeScheduleToStart)
}

// teardownWithin is teardown whose node activity waits at most pickup for the node's worker.
// It reports whether the node confirmed the runtime gone (or there was none).
func (r *roomSession) teardownWithin(ctx workflow.Context, reason domain.CheckpointReason, pickup time.Duration) bool {
	if r.s.Phase != domain.PhaseLive && r.s.Phase != domain.PhaseStarting && !r.s.Crashed {
		r.releaseFor(ctx, reason)
		return true
	}
	if r.s.Node == "" || r.s.Generation == 0 {
		r.s.Phase = domain.PhaseDormant
		r.releaseFor(ctx, reason)
		return true
	}
	r.s.Phase = domain.PhaseStopping
	actx := r.nodeCtx(ctx, workflow.ActivityOptions{
		ScheduleToStartTimeout: pickup,
		StartToCloseTimeout:    60 * time.Second,
		ScheduleToCloseTimeout: 5 * time.Minute,
		RetryPolicy:            &temporal.RetryPolicy{MaximumInterval: 30 * time.Second},
	})
	err := workflow.ExecuteActivity(actx, r.rt.TeardownRuntime, activities.TeardownRuntimeInput{
		RuntimeSession: r.in.RuntimeSession, Generation: r.s.Generation, Reason: reason}).Get(ctx, nil)
	if err != nil {
		// The node may still run the child: the host lease stays, so the host neither
		// checkpoints nor parks under it. The next wake tears down again, then releases.
		r.s.LastError = "teardown: " + errorText(err)
		workflow.GetLogger(ctx).Warn("runtime teardown did not finish", "runtime_session", r.in.RuntimeSession, "error", err)
	} else {
		r.releaseFor(ctx, reason)
	}
	r.s.Phase, r.s.PID, r.s.InTurn, r.s.Warning = domain.PhaseDormant, 0, false, ""
	return err == nil
}

func (r *roomSession) status() contract.RoomSessionStatus {
	st := contract.RoomSessionStatus{Phase: r.s.Phase, Presence: r.presence(), Node: r.s.Node, Generation: r.s.Generation,
		PID: r.s.PID, InTurn: r.s.InTurn, Held: r.s.Held, Turns: r.s.Turns, LastActivity: r.s.LastActivity,
		IdleSecs: r.s.IdleSecs, LastError: r.s.LastError, Leased: r.s.Leased, Failure: r.s.Failure, Warning: r.s.Warning,
		Recycles: r.s.Recycles, LastRecycle: r.s.LastRecycle}
	if r.s.Host != uuid.Nil {
		h := r.s.Host
		st.Host, st.Sandbox = &h, r.s.Sandbox
	}
	return st
}

func (r *roomSession) presence() domain.Presence {
	switch {
	case r.s.Phase == domain.PhaseLive && r.s.Warning != "":
		return domain.PresenceDegraded
	case r.s.Phase == domain.PhaseLive || r.s.Phase == domain.PhaseStopping:
		return domain.PresenceLive
	case r.s.Phase == domain.PhaseFailed:
		return domain.PresenceFailed
	case r.s.Crashed:
		return domain.PresenceDisconnected
	default:
		return domain.PresenceDormant
	}
}

// continueAsNew starts a fresh run with the same state once no update is in flight, folding
// any signal not yet received into that state so no poke is lost. It returns nil, and does
// not continue, when an action or exit arrived meanwhile: the loop serves it first.
func (r *roomSession) continueAsNew(ctx workflow.Context) error {
	// A handler may be waiting for the main loop (its action queued behind the one that made
	// the others finish): waiting for every handler alone would wait forever.
	_ = workflow.Await(ctx, func() bool {
		return workflow.AllHandlersFinished(ctx) || len(r.actions) > 0 || len(r.exits) > 0 || len(r.retries) > 0 || len(r.moves) > 0 ||
			len(r.recycles) > 0
	})
	// A move not yet acted on is served first too; one still unread in its channel is
	// dropped with this run (Reconcile sends it again while the runtime is where it was).
	r.takeRecycles()
	if len(r.actions) > 0 || len(r.exits) > 0 || len(r.retries) > 0 || len(r.moves) > 0 || len(r.recycles) > 0 {
		return nil
	}
	for r.inbound.ReceiveAsync(nil) {
		r.s.Pokes++
	}
	var e contract.RuntimeExitedSignal
	for r.exited.ReceiveAsync(&e) {
		r.onExit(ctx, e) // goes dormant and releases the host lease, as the loop would
	}
	var rs contract.RetrySignal
	for r.retry.ReceiveAsync(&rs) {
		r.retryStart(ctx, rs.Reason)
	}
	s := r.s
	in := r.in
	in.State = &s
	return workflow.NewContinueAsNewError(ctx, RoomSession, in)
}

// drainFinal lets the handlers of a finished workflow complete: an action queued after the
// final one is answered with the final status instead of waiting on a loop that has ended.
func (r *roomSession) drainFinal(ctx workflow.Context) {
	for {
		_ = workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) || len(r.actions) > 0 })
		if len(r.actions) == 0 {
			return
		}
		for _, a := range r.actions {
			a.done, a.result = true, r.status()
			if a.name == contract.UpdateApplyConfig {
				// Never run: the caller must not count it as applied.
				a.err = contract.Fail("the session was removed before the apply ran", domain.ErrTypeRetired, nil)
			}
		}
		r.actions = nil
	}
}

// errorText is a short description of an activity failure for the session's status.
func errorText(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return domain.Truncate(app.Error(), 500)
	}
	// An activity timeout says what happened to the node, not Temporal's event ids.
	var timeout *temporal.TimeoutError
	if errors.As(err, &timeout) {
		switch timeout.TimeoutType() {
		case enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START:
			return "no worker took the task in time: the node's worker is down or overloaded"
		case enumspb.TIMEOUT_TYPE_HEARTBEAT:
			return "the node's worker stopped reporting on the task: it died or hung"
		default:
			return "the task did not finish in time"
		}
	}
	return domain.Truncate(err.Error(), 500)
}

// details is what the Web UI shows the session doing now.
func (r *roomSession) details() string {
	var d string
	switch r.s.Phase {
	case domain.PhaseLive:
		d = fmt.Sprintf("live on node %s, generation %d", r.s.Node, r.s.Generation)
		if r.s.Warning != "" {
			d += " · degraded: " + r.s.Warning
		}
		if r.s.InTurn {
			d += fmt.Sprintf(" · turn %d running since %s", r.s.Turns, r.turnStarted.UTC().Format("15:04:05 UTC"))
		} else if !r.s.LastActivity.IsZero() {
			d += fmt.Sprintf(" · %d turn(s) · idle since %s", r.s.Turns, r.s.LastActivity.UTC().Format("15:04:05 UTC"))
		}
	case domain.PhaseStarting:
		d = "starting a runtime on node " + r.s.Node
	case domain.PhaseFailed:
		d = "failed to start"
		if r.s.Failure != nil {
			d += fmt.Sprintf(" (%s): %s", r.s.Failure.Class, r.s.Failure.Reason)
		}
	case domain.PhaseRetired:
		d = "removed from its room; a re-add revives it"
	default:
		d = fmt.Sprintf("%s · %d turn(s)", r.s.Phase, r.s.Turns)
		if r.s.Held {
			d += " · held by an operator's stop until restart"
		}
	}
	if r.s.LastRecycle != nil {
		d += fmt.Sprintf(" · recycled %d time(s) by the watchdog, last for %s", r.s.Recycles, r.s.LastRecycle.Reason)
	}
	if r.s.LastError != "" && r.s.Phase != domain.PhaseFailed {
		d += " · last error: " + r.s.LastError
	}
	return domain.Truncate(d, 1000)
}
