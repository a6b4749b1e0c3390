package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/procgroup"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/provider/acp"
	"github.com/jam-dev/jam/internal/provider/claudecode"
	"github.com/jam-dev/jam/internal/provider/codex"
	"github.com/jam-dev/jam/internal/provider/copilot"
)

// RuntimeExit reports a runtime whose provider process died without being torn down.
type RuntimeExit struct {
	RuntimeSession uuid.UUID
	Generation     int64
	Reason         domain.RuntimeExitReason
}

// DefaultFactories maps each provider family to its adapter. OpenCode and Cursor are
// catalog rows on the ACP adapter.
func DefaultFactories() map[domain.Provider]provider.Factory {
	return map[domain.Provider]provider.Factory{
		domain.ProviderACP:      acp.New,
		domain.ProviderCodex:    codex.New,
		domain.ProviderClaude:   claudecode.New,
		domain.ProviderCopilot:  copilot.New,
		domain.ProviderOpenCode: acp.New,
		domain.ProviderCursor:   acp.New,
	}
}

// ErrRegistryClosed: the worker is shutting down and starts no runtime.
var ErrRegistryClosed = fmt.Errorf("runtime registry is shut down: %w", provider.ErrShuttingDown)

// ErrUnsupportedTransport: no adapter is registered for the transport's provider.
var ErrUnsupportedTransport = provider.ErrNoAdapter

// RuntimeRegistry is a worker process's table of live provider runtimes, one per runtime
// session. It spawns every child in its own process group and remembers the group until the
// child is reaped, so teardown and worker shutdown leave no orphans; with group records on,
// it also persists each group so a worker killed outright leaves its successor what to reap.
// It notices a child that dies on its own and reports it.
type RuntimeRegistry struct {
	log       *slog.Logger
	factories map[domain.Provider]provider.Factory
	onExit    func(RuntimeExit)
	records   *procgroup.Recorder

	mu       sync.Mutex
	runtimes map[uuid.UUID]*runtimeEntry
	groups   map[int]uuid.UUID // process group -> the session it runs for (uuid.Nil: none)
	closed   bool
}

type runtimeEntry struct {
	rt         provider.Runtime
	generation int64
	turns      int
	stopping   bool
	// exitedInTurn: the child was seen dead when a turn ended, which the watcher may only
	// notice after turns dropped back to zero.
	exitedInTurn bool
	// preparing: its start handshake is in flight.
	preparing bool
	// mayMove: its room may run on another node sharing the host store (Fence kills it).
	mayMove bool
	// cancelNext is a turn interrupted before it reached this node: it starts cancelled.
	cancelNext string
	// watch is its watchdog state (watchdog.go); nil for a runtime joined, not started.
	watch *watchState
}

// RegistryOption configures a RuntimeRegistry.
type RegistryOption func(*RuntimeRegistry)

// WithGroupRecords persists every process group the registry starts through rec, from right
// after the spawn until the group is reaped.
func WithGroupRecords(rec *procgroup.Recorder) RegistryOption {
	return func(r *RuntimeRegistry) { r.records = rec }
}

// NewRuntimeRegistry builds an empty registry. onExit (may be nil) hears about children that
// exit on their own; it must not block.
func NewRuntimeRegistry(log *slog.Logger, factories map[domain.Provider]provider.Factory, onExit func(RuntimeExit), opts ...RegistryOption) *RuntimeRegistry {
	if factories == nil {
		factories = DefaultFactories()
	}
	if onExit == nil {
		onExit = func(RuntimeExit) {}
	}
	r := &RuntimeRegistry{log: log, factories: factories, onExit: onExit,
		runtimes: map[uuid.UUID]*runtimeEntry{}, groups: map[int]uuid.UUID{}}
	for _, o := range opts {
		o(r)
	}
	return r
}

// Spawn implements provider.Spawner: the child leads its own process group, which the
// registry tracks until the child is reaped.
func (r *RuntimeRegistry) Spawn(ctx context.Context, c provider.Command) (*provider.Child, error) {
	return r.spawn(ctx, c, uuid.Nil)
}

// sessionSpawner is the Spawner one runtime gets, so its group's record names its session.
type sessionSpawner struct {
	r       *RuntimeRegistry
	session uuid.UUID
}

func (s sessionSpawner) Spawn(ctx context.Context, c provider.Command) (*provider.Child, error) {
	return s.r.spawn(ctx, c, s.session)
}

func (r *RuntimeRegistry) spawn(ctx context.Context, c provider.Command, session uuid.UUID) (*provider.Child, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrRegistryClosed
	}
	r.mu.Unlock()
	child, err := provider.Spawn(ctx, c)
	if err != nil {
		return nil, err
	}
	pgid := child.PID()
	// Recorded before the adapter speaks to the child, so from its first turn on a worker
	// killed outright leaves the next one a record to reap the group by. A group that
	// cannot be recorded is not run: it could outlive a crash unowned.
	var rec *procgroup.Record
	if r.records != nil {
		name := ""
		if session != uuid.Nil {
			name = session.String()
		}
		got, err := r.records.Add(pgid, name)
		switch {
		case err == nil:
			rec = &got
		case errors.Is(err, procgroup.ErrLeaderGone):
			// It exited at once; the exit sweep below kills whatever it left.
		default:
			child.Kill(0)
			return nil, fmt.Errorf("spawn %s: %w", c.Path, err)
		}
	}
	r.mu.Lock()
	r.groups[pgid] = session
	closed := r.closed
	r.mu.Unlock()
	child.OnExit(func() {
		// The leader is reaped; sweep what it left in its group before forgetting it.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		if rec != nil {
			if err := r.records.Remove(*rec); err != nil {
				r.log.Warn("remove process group record", "pgid", pgid, "error", err)
			}
		}
		r.mu.Lock()
		delete(r.groups, pgid)
		r.mu.Unlock()
	})
	if closed {
		child.Kill(0)
		return nil, ErrRegistryClosed
	}
	return child, nil
}

// Start builds and prepares the runtime of spec.RuntimeSession, or returns the one already
// running for the same generation. A runtime of an older generation is torn down first: one
// session never has two live instances.
func (r *RuntimeRegistry) Start(ctx context.Context, spec provider.Spec) (provider.Runtime, provider.Prepared, error) {
	row, ok := domain.LookupTransport(spec.Transport)
	if !ok || !row.Owned {
		return nil, provider.Prepared{}, fmt.Errorf("%w: %s", ErrUnsupportedTransport, spec.Transport)
	}
	factory, ok := r.factories[row.Provider]
	if !ok {
		return nil, provider.Prepared{}, fmt.Errorf("%w: %s", ErrUnsupportedTransport, spec.Transport)
	}
	// Building starts nothing; the runtime is dropped unused when a live one is shared.
	spec.Spawner = sessionSpawner{r: r, session: spec.RuntimeSession}
	watch := &watchState{}
	spec.Events = watch.eventSink(spec.Events)
	rt, err := factory(spec)
	if err != nil {
		return nil, provider.Prepared{}, fmt.Errorf("build runtime %s: %w", spec.RuntimeSession, err)
	}
	e := &runtimeEntry{rt: rt, generation: spec.Generation, preparing: true, mayMove: spec.MayMove, watch: watch}
	// The slot is claimed under the lock, so concurrent Starts of one session agree on one
	// runtime; an older generation (or one being stopped) is torn down first.
	for {
		r.mu.Lock()
		cur, ok := r.runtimes[spec.RuntimeSession]
		switch {
		case r.closed:
			r.mu.Unlock()
			return nil, provider.Prepared{}, ErrRegistryClosed
		case ok && !cur.stopping && cur.generation == spec.Generation:
			// Prepare is serialized and idempotent.
			r.mu.Unlock()
			p, err := cur.rt.Prepare(ctx)
			return cur.rt, p, err
		case ok && !cur.stopping && cur.generation > spec.Generation:
			r.mu.Unlock()
			return nil, provider.Prepared{}, fmt.Errorf("start runtime %s: generation %d is older than the live %d",
				spec.RuntimeSession, spec.Generation, cur.generation)
		case ok:
			r.mu.Unlock()
			if err := r.Teardown(ctx, spec.RuntimeSession, domain.CheckpointBeforeReset); err != nil {
				return nil, provider.Prepared{}, err
			}
			continue
		}
		break
	}
	r.runtimes[spec.RuntimeSession] = e
	r.mu.Unlock()
	p, err := rt.Prepare(ctx)
	r.mu.Lock()
	e.preparing = false
	r.mu.Unlock()
	if err != nil {
		_ = rt.Teardown(context.WithoutCancel(ctx), domain.CheckpointBeforeStop)
		r.forget(spec.RuntimeSession, e)
		return nil, provider.Prepared{}, err
	}
	go r.watch(spec.RuntimeSession, e)
	return rt, p, nil
}

// watch reports a child that exits while the registry still tracks it as live.
func (r *RuntimeRegistry) watch(session uuid.UUID, e *runtimeEntry) {
	<-e.rt.Exited()
	r.mu.Lock()
	current := r.runtimes[session] == e && !e.stopping
	reason := domain.RuntimeExitedIdle
	if e.turns > 0 || e.exitedInTurn {
		reason = domain.RuntimeExitedTurn
	}
	if current {
		delete(r.runtimes, session)
	}
	r.mu.Unlock()
	if !current {
		return
	}
	r.log.Warn("runtime process exited", "runtime_session", session, "generation", e.generation, "reason", reason)
	// Reap what is left of it (the transport, any grandchildren).
	_ = e.rt.Teardown(context.Background(), domain.CheckpointBeforeStop)
	r.onExit(RuntimeExit{RuntimeSession: session, Generation: e.generation, Reason: reason})
}

func (r *RuntimeRegistry) forget(session uuid.UUID, e *runtimeEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.runtimes[session] == e {
		delete(r.runtimes, session)
	}
}

// Get returns the live runtime of a session and its generation.
func (r *RuntimeRegistry) Get(session uuid.UUID) (provider.Runtime, int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.runtimes[session]
	if !ok || e.stopping {
		return nil, 0, false
	}
	return e.rt, e.generation, true
}

// ErrRuntimeNotLive: the session has no live runtime of that generation on this node (the
// worker restarted, or the runtime was replaced); the workflow must prepare again.
var ErrRuntimeNotLive = provider.ErrRuntimeNotLive

// RunTurn runs one turn on the session's live runtime of the given generation.
func (r *RuntimeRegistry) RunTurn(ctx context.Context, session uuid.UUID, generation int64, turn provider.Turn) (provider.TurnResult, error) {
	r.mu.Lock()
	e, ok := r.runtimes[session]
	if !ok || e.stopping || e.generation != generation {
		r.mu.Unlock()
		return provider.TurnResult{}, fmt.Errorf("run turn on %s generation %d: %w", session, generation, ErrRuntimeNotLive)
	}
	cancelled := turn.ID != "" && e.cancelNext == turn.ID
	e.cancelNext = ""
	if cancelled {
		// Its interrupt came first: the provider never sees it, its messages stay queued.
		r.mu.Unlock()
		return provider.TurnResult{Outcome: domain.TurnCancelled}, nil
	}
	e.turns++
	if e.watch != nil && e.turns == 1 {
		e.watch.turnStart = time.Now()
	}
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		select {
		case <-e.rt.Exited():
			e.exitedInTurn = true
		default:
		}
		e.turns--
		if e.watch != nil {
			// The turn's own CPU is not idle CPU: the idle measure starts again from here.
			e.watch.prevAt, e.watch.overSince = time.Time{}, time.Time{}
		}
		r.mu.Unlock()
	}()
	return e.rt.RunTurn(ctx, turn)
}

// Teardown stops a session's runtime and reaps its process group; a session with no live
// runtime is already torn down. A failed teardown keeps the runtime tracked so it is retried,
// never orphaned.
func (r *RuntimeRegistry) Teardown(ctx context.Context, session uuid.UUID, reason domain.CheckpointReason) error {
	r.mu.Lock()
	e, ok := r.runtimes[session]
	if !ok {
		r.mu.Unlock()
		return nil
	}
	e.stopping = true
	r.mu.Unlock()
	if err := e.rt.Teardown(ctx, reason); err != nil {
		r.mu.Lock()
		e.stopping = false
		r.mu.Unlock()
		return fmt.Errorf("teardown runtime %s: %w", session, err)
	}
	r.forget(session, e)
	return nil
}

// Interrupt ends the running turn of the session's live runtime of that generation; with no
// such runtime there is no turn to end.
func (r *RuntimeRegistry) Interrupt(ctx context.Context, session uuid.UUID, generation int64, turnID string) error {
	r.mu.Lock()
	e, ok := r.runtimes[session]
	if ok && e.generation == generation && e.turns == 0 && turnID != "" {
		// The turn's activity has not reached this node yet (the workflow schedules it, the
		// worker picks it up, reads its messages): the interrupt waits for it, or the
		// provider would run the whole turn.
		e.cancelNext = turnID
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()
	if !ok || e.generation != generation {
		return nil
	}
	if err := e.rt.Interrupt(ctx); err != nil {
		return fmt.Errorf("interrupt runtime %s: %w", session, err)
	}
	return nil
}

// Steer adds messages to the running turn of the session's live runtime of that generation;
// with no such runtime there is no turn to steer into.
func (r *RuntimeRegistry) Steer(ctx context.Context, session uuid.UUID, generation int64, msgs []provider.Message) error {
	r.mu.Lock()
	e, ok := r.runtimes[session]
	r.mu.Unlock()
	if !ok || e.stopping || e.generation != generation {
		return fmt.Errorf("steer %s generation %d: %w", session, generation, ErrRuntimeNotLive)
	}
	return e.rt.Steer(ctx, msgs)
}

// Len is the number of live runtimes.
func (r *RuntimeRegistry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.runtimes)
}

// Close refuses new runtimes and ends every start handshake in flight, so a stopping worker
// does not wait out a provider that never answers; running turns are left to finish.
func (r *RuntimeRegistry) Close(ctx context.Context) {
	r.mu.Lock()
	r.closed = true
	var preparing []uuid.UUID
	for s, e := range r.runtimes {
		if e.preparing {
			preparing = append(preparing, s)
		}
	}
	r.mu.Unlock()
	for _, s := range preparing {
		if err := r.Teardown(ctx, s, domain.CheckpointBeforeStop); err != nil {
			r.log.Warn("ending a start handshake at shutdown", "runtime_session", s, "error", err)
		}
	}
}

// Fence kills, at once, every runtime whose room may move (provider.Spec.MayMove) and keeps
// taking new ones: the node lost its store long enough that a node sharing its host store
// may soon run the same rooms on the same files, so there is no time for a graceful stop.
// It returns how many it killed.
func (r *RuntimeRegistry) Fence(ctx context.Context) int {
	r.mu.Lock()
	fenced := map[uuid.UUID]int64{}
	for s, e := range r.runtimes {
		if e.mayMove {
			fenced[s] = e.generation
			e.stopping = true // its exit is this fence's, not a crash
		}
	}
	var groups []int
	for g, s := range r.groups {
		if _, ok := fenced[s]; ok {
			groups = append(groups, g)
		}
	}
	r.mu.Unlock()
	for _, g := range groups {
		_ = syscall.Kill(-g, syscall.SIGKILL)
	}
	r.teardownEach(ctx, fenced, domain.RuntimeFenced)
	return len(fenced)
}

func (r *RuntimeRegistry) teardownAll(ctx context.Context, reason domain.RuntimeExitReason) int {
	r.mu.Lock()
	live := make(map[uuid.UUID]int64, len(r.runtimes))
	for s, e := range r.runtimes {
		live[s] = e.generation
	}
	r.mu.Unlock()
	r.teardownEach(ctx, live, reason)
	return len(live)
}

// teardownEach tears the sessions' runtimes down at once and tells each session why.
func (r *RuntimeRegistry) teardownEach(ctx context.Context, live map[uuid.UUID]int64, reason domain.RuntimeExitReason) {
	var wg sync.WaitGroup
	for s, gen := range live {
		wg.Go(func() {
			if err := r.Teardown(ctx, s, domain.CheckpointBeforeStop); err != nil {
				r.log.Warn("runtime teardown failed", "runtime_session", s, "reason", reason, "error", err)
			}
			// Its RoomSession must not go on believing it is live.
			r.onExit(RuntimeExit{RuntimeSession: s, Generation: gen, Reason: reason})
		})
	}
	wg.Wait()
}

// Shutdown tears every runtime down (BeforeStop), refuses new ones, and finally kills any
// process group still tracked, so a stopping worker leaves no child behind.
func (r *RuntimeRegistry) Shutdown(ctx context.Context) {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.teardownAll(ctx, domain.RuntimeStoppedWithWorker)
	r.mu.Lock()
	groups := make([]int, 0, len(r.groups))
	for g := range r.groups {
		groups = append(groups, g)
	}
	r.mu.Unlock()
	for _, g := range groups {
		_ = syscall.Kill(-g, syscall.SIGKILL)
	}
}
