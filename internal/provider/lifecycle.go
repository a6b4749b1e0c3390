package provider

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jam-dev/jam/internal/domain"
)

// Adapter is what an adapter supplies to the Lifecycle it embeds: its own protocol's start,
// handshake and release. Every other part of Prepare and Teardown is the Lifecycle's.
type Adapter struct {
	// Start spawns the provider's process, or attaches to a shared one. What it started must
	// be reachable by Release from then on, even when Start itself fails.
	Start func(ctx context.Context) error
	// Handshake binds the provider session on the started process.
	Handshake func(ctx context.Context) error
	// Release stops what Start started, or detaches from a shared process (the last runtime
	// out stops it). The Lifecycle calls it when Start or Handshake failed, and once at
	// Teardown; it does nothing when nothing was started. ctx bounds a polite goodbye.
	Release func(ctx context.Context)
	// Prepared says what Prepare established.
	Prepared func() Prepared
	// Liveness reports the process and its transport (zero before Start).
	Liveness func() Liveness
}

// LifecycleConfig is what differs between the adapters' lifecycles.
type LifecycleConfig struct {
	// Name names the adapter in errors and logs ("codex").
	Name string
	// Who names the provider in the readiness error ("the app-server").
	Who string
	// ReadyFallback bounds the start handshake when the spec names no readiness bound.
	ReadyFallback time.Duration
	// Capable is whether the runtime settles through Jam's disposition tools from the start.
	Capable bool
	// SettleTools, for an adapter that offers Jam's tools natively, builds the built-in
	// settlement tools staging into st, used when the spec wires no registry (adapter tests):
	// settlement needs them. The registry lives above this package, so it is passed in.
	SettleTools func(spec Spec, st DispositionStager) ToolCaller
	// IdleFallback is the idle policy when neither the spec nor the catalog names one.
	IdleFallback domain.IdlePolicy
	// NeedStateDir refuses a spec without a provider-state directory.
	NeedStateDir bool
}

// Lifecycle is the one Prepare/Teardown state machine of an adapter, which embeds it and
// supplies its Adapter: Prepare runs once under a readiness bound, reaps what a failed or
// cancelled one started and says why it stopped; Teardown cancels a Prepare in flight,
// interrupts the running turn, releases the process and is idempotent. It also keeps what
// every adapter keeps: the spec, logger, stamper, roster, stderr tail, tools, the exited
// channel and the running turn.
type Lifecycle struct {
	Spec    Spec
	Log     *slog.Logger
	Stamper *Stamper
	// Roster is what the runtime has been told of its room.
	Roster *RosterTracker
	// Stderr keeps the tail of the child's stderr, logged when Prepare fails.
	Stderr *TailBuffer
	// Tools are Jam's runtime tools: the spec's, else (for an adapter with SettleTools) the
	// built-in settlement tools.
	Tools ToolCaller

	cfg     LifecycleConfig
	adapter Adapter

	// prepMu serializes Prepare and Teardown; mu guards the fields below and is never held
	// across an Adapter call.
	prepMu   sync.Mutex
	mu       sync.Mutex
	prepared bool
	tornDown bool
	// stopping is set by Teardown before it waits for prepMu; prepCancel ends a Prepare in
	// flight so a teardown never waits out a hung handshake.
	stopping   bool
	prepCancel context.CancelCauseFunc
	turn       *TurnCore

	exited    chan struct{}
	closeOnce sync.Once
}

// NewLifecycle validates spec and builds the lifecycle an adapter embeds; Bind gives it the
// adapter before first use.
func NewLifecycle(spec Spec, cfg LifecycleConfig) (*Lifecycle, error) {
	if spec.Executable == "" {
		return nil, fmt.Errorf("%s runtime: no executable: %w", cfg.Name, ErrInvalidSpec)
	}
	if spec.Dir == "" {
		return nil, fmt.Errorf("%s runtime: no working directory: %w", cfg.Name, ErrInvalidSpec)
	}
	if cfg.NeedStateDir && spec.StateDir == "" {
		return nil, fmt.Errorf("%s runtime: no provider-state directory: %w", cfg.Name, ErrInvalidSpec)
	}
	log := spec.Log
	if log == nil {
		log = slog.Default()
	}
	if cfg.IdleFallback == "" {
		cfg.IdleFallback = domain.IdleAllow
	}
	l := &Lifecycle{
		Spec:    spec,
		Log:     log.With("runtime_session", spec.RuntimeSession, "generation", spec.Generation, "transport", spec.Transport),
		Stamper: spec.Stamper(cfg.Capable),
		Roster:  NewRosterTracker(spec.Roster),
		Stderr:  NewTailBuffer(16 << 10),
		Tools:   spec.Tools,
		cfg:     cfg,
		exited:  make(chan struct{}),
	}
	if l.Tools == nil && cfg.SettleTools != nil {
		l.Tools = cfg.SettleTools(spec, l)
	}
	return l, nil
}

// Bind gives the lifecycle its adapter.
func (l *Lifecycle) Bind(a Adapter) { l.adapter = a }

// Spawn starts the provider's child with the spec's executable, environment and directory
// and args, its stderr kept in the tail buffer.
func (l *Lifecycle) Spawn(ctx context.Context, args []string) (*Child, error) {
	spawner := l.Spec.Spawner
	if spawner == nil {
		spawner = DefaultSpawner
	}
	child, err := spawner.Spawn(ctx, Command{Path: l.Spec.Executable, Args: args, Env: l.Spec.Env, Dir: l.Spec.Dir, Stderr: l.Stderr})
	if err != nil {
		return nil, fmt.Errorf("spawn %s: %w", l.cfg.Name, err)
	}
	return child, nil
}

// errExitedPreparing is why a Prepare whose process exited stopped.
var errExitedPreparing = fmt.Errorf("%w during its start handshake", ErrRuntimeExited)

// errTornDown is why Teardown cancels a Prepare in flight.
var errTornDown = fmt.Errorf("%w: the runtime was torn down while it was being prepared", ErrNotPrepared)

// Prepare starts the provider and binds its session once (a repeated call reports the
// same), within the readiness bound whatever ctx allows. Anything it started is released
// when it fails; the error says why a cancelled one stopped.
func (l *Lifecycle) Prepare(ctx context.Context) (Prepared, error) {
	l.prepMu.Lock()
	defer l.prepMu.Unlock()
	l.mu.Lock()
	switch {
	case l.tornDown || l.stopping:
		l.mu.Unlock()
		return Prepared{}, fmt.Errorf("prepare: %w", ErrNotPrepared)
	case l.prepared:
		l.mu.Unlock()
		return l.adapter.Prepared(), nil
	}
	// The readiness bound holds whatever the caller's deadline: a provider that never
	// answers its handshake must not sit "starting" for the length of the activity.
	ctx, cancelReady := WithReadiness(ctx, l.Spec.ReadyTimeout, l.cfg.ReadyFallback, l.cfg.Who)
	defer cancelReady()
	ctx, cancelPrep := context.WithCancelCause(ctx)
	defer cancelPrep(nil)
	l.prepCancel = cancelPrep
	l.mu.Unlock()
	// A process that exits during its handshake ends it at once: its output may stay open
	// far longer (a grandchild holding it), and the handshake would wait out its bound.
	go func() {
		select {
		case <-l.exited:
			cancelPrep(errExitedPreparing)
		case <-ctx.Done():
		}
	}()
	defer func() {
		l.mu.Lock()
		l.prepCancel = nil
		l.mu.Unlock()
	}()

	err := l.adapter.Start(ctx)
	if err == nil {
		err = l.adapter.Handshake(ctx)
	}
	if err != nil {
		// Why it failed is read before the release, whose kill would read as an exit.
		err = fmt.Errorf("prepare %s runtime: %w", l.cfg.Name, prepareFailure(ctx, err))
		l.adapter.Release(ctx)
		if tail := l.Stderr.String(); tail != "" {
			l.Log.Warn(l.cfg.Name+" failed to prepare", "stderr_tail", tail)
		}
		return Prepared{}, err
	}
	l.mu.Lock()
	l.prepared = true
	l.mu.Unlock()
	return l.adapter.Prepared(), nil
}

// prepareFailure is a failed Prepare's error: the readiness bound when that is what ended
// it (what the handshake call said about its own cancellation adds nothing), else the
// failure with the reason ctx ended, when it did and the failure does not say so already.
// A refused exact resume stays just that: it is the classification that matters.
func prepareFailure(ctx context.Context, err error) error {
	if nr := NotReady(ctx); nr != nil {
		return nr
	}
	cause := context.Cause(ctx)
	if cause == nil || errors.Is(err, cause) || errors.Is(err, ErrExactResumeUnavailable) {
		return err
	}
	return errors.Join(cause, err)
}

// Teardown retires the instance (it can no longer emit), ends a Prepare in flight,
// interrupts a running turn of a live process, releases the process and marks the runtime
// exited. It is idempotent.
func (l *Lifecycle) Teardown(ctx context.Context, reason domain.CheckpointReason) error {
	l.Stamper.Retire()
	l.mu.Lock()
	l.stopping = true
	if l.prepCancel != nil {
		l.prepCancel(errTornDown)
	}
	l.mu.Unlock()
	l.prepMu.Lock()
	defer l.prepMu.Unlock()
	l.mu.Lock()
	if l.tornDown {
		l.mu.Unlock()
		return nil
	}
	l.tornDown = true
	t := l.turn
	l.mu.Unlock()
	// A turn of a process that already died (the registry tears a crashed runtime down)
	// failed: it ends on the lost transport as Failed, not as an interrupt's Cancelled.
	if t != nil && l.adapter.Liveness().ProcessAlive {
		t.Interrupt()
	}
	l.Log.Info(l.cfg.Name+" runtime teardown", "reason", reason)
	l.adapter.Release(ctx)
	// Released, the process is gone for this runtime, whether or not others still use it.
	l.MarkExited()
	return nil
}

// MarkExited closes Exited (once): the process is gone for this runtime.
func (l *Lifecycle) MarkExited() { l.closeOnce.Do(func() { close(l.exited) }) }

// Exited is closed when the provider process exited or the runtime was torn down.
func (l *Lifecycle) Exited() <-chan struct{} { return l.exited }

// Liveness reports the child and its transport.
func (l *Lifecycle) Liveness() Liveness { return l.adapter.Liveness() }

// IdlePolicy is the spec's, else the catalog row's.
func (l *Lifecycle) IdlePolicy() domain.IdlePolicy {
	if l.Spec.IdlePolicy != "" {
		return l.Spec.IdlePolicy
	}
	if row, ok := domain.LookupTransport(l.Spec.Transport); ok {
		return row.IdlePolicy
	}
	return l.cfg.IdleFallback
}

// ReadinessWarning has nothing to say unless the adapter does (it overrides this).
func (l *Lifecycle) ReadinessWarning() string { return "" }

// IsPrepared reports whether Prepare succeeded and Teardown has not begun.
func (l *Lifecycle) IsPrepared() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.prepared && !l.tornDown
}

// ResumeFailed classifies a failed resume of the bound provider session (what names the
// request and the session): the provider's refusal is evidence that exact resume is
// unavailable; running out of time is not.
func ResumeFailed(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrExactResumeUnavailable, what, err)
}
