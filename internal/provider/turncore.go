package provider

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/jam-dev/jam/internal/domain"
)

// TurnCore is the part of a running turn every adapter keeps: its settlement, its context
// (cancelled by an interrupt) and whether it was interrupted. An adapter's own turn state
// embeds it.
type TurnCore struct {
	ID     string
	Settle *Settlement
	// Ctx ends when the turn is interrupted or its caller's context ends.
	Ctx         context.Context
	cancel      context.CancelFunc
	interrupted atomic.Bool
}

// Interrupt ends the turn as Cancelled: its context is cancelled.
func (t *TurnCore) Interrupt() {
	t.interrupted.Store(true)
	if t.cancel != nil {
		t.cancel()
	}
}

// Interrupted reports whether Interrupt (or Teardown) ended the turn.
func (t *TurnCore) Interrupted() bool { return t.interrupted.Load() }

// BeginTurn opens the runtime's one turn: it refuses when the runtime is not prepared
// (ErrNotPrepared), a turn runs (ErrTurnInProgress) or the process is gone
// (ErrRuntimeExited), and numbers the turn's events from now on. The caller ends it with
// EndTurn.
func (l *Lifecycle) BeginTurn(ctx context.Context, turn Turn, opts SettlementOptions) (*TurnCore, error) {
	// Asked before l.mu is taken: the adapter takes its own lock to answer.
	alive := l.adapter.Liveness().ProcessAlive
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case !l.prepared || l.tornDown:
		return nil, fmt.Errorf("run turn %s: %w", turn.ID, ErrNotPrepared)
	case l.turn != nil:
		return nil, fmt.Errorf("run turn %s: %w", turn.ID, ErrTurnInProgress)
	case !alive:
		return nil, fmt.Errorf("run turn %s: %w", turn.ID, ErrRuntimeExited)
	}
	tctx, cancel := context.WithCancel(ctx)
	t := &TurnCore{ID: turn.ID, Settle: NewSettlement(turn.Messages, opts), Ctx: tctx, cancel: cancel}
	l.turn = t
	l.Stamper.BeginTurn(turn.ID, turn.Source())
	return t, nil
}

// EndTurn closes t: its events are no longer attributed to it and the next turn may begin.
func (l *Lifecycle) EndTurn(t *TurnCore) {
	l.Stamper.EndTurn()
	l.mu.Lock()
	if l.turn == t {
		l.turn = nil
	}
	l.mu.Unlock()
	t.cancel()
}

// OpenTurn begins a turn (BeginTurn) with the adapter's own state for it, made from its core
// by state and kept in *slot (under mu) until end, which the caller defers, closes it.
func OpenTurn[T any](l *Lifecycle, ctx context.Context, turn Turn, opts SettlementOptions, mu sync.Locker, slot *T,
	state func(*TurnCore) T) (ts T, end func(), err error) {
	core, err := l.BeginTurn(ctx, turn, opts)
	if err != nil {
		return ts, nil, err
	}
	ts = state(core)
	mu.Lock()
	*slot = ts
	mu.Unlock()
	return ts, func() {
		l.EndTurn(core)
		var none T
		mu.Lock()
		*slot = none
		mu.Unlock()
	}, nil
}

// CloseTurn reports the turn's usage (nil: none reported) and closes its settlement.
func (l *Lifecycle) CloseTurn(t *TurnCore, usage *Usage, outcome domain.TurnOutcome, err error) TurnResult {
	if usage != nil {
		l.Stamper.Emit(AgentEvent{Kind: domain.AgentUsage, Usage: usage})
	}
	return CloseTurn(l.Stamper, t.Settle, outcome, err)
}

// CurrentTurn is the running turn, or nil.
func (l *Lifecycle) CurrentTurn() *TurnCore {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.turn
}

// Interrupt ends the running turn as Cancelled; it is a no-op between turns.
func (l *Lifecycle) Interrupt(context.Context) error {
	if t := l.CurrentTurn(); t != nil {
		t.Interrupt()
	}
	return nil
}

// StageDisposition stages a settlement tool call in the running turn (ErrNoTurn between
// turns).
func (l *Lifecycle) StageDisposition(d Disposition) error {
	var s *Settlement
	if t := l.CurrentTurn(); t != nil {
		s = t.Settle
	}
	return StageInTurn(s, d, l.EmitDisposition)
}

// EmitDisposition reports a staged disposition.
func (l *Lifecycle) EmitDisposition(d Disposition) {
	l.Stamper.Emit(AgentEvent{Kind: domain.AgentDispositionStaged, Disposition: &d})
}

// FreshMessages are the messages of msgs the turn does not hold yet (a steer skips those).
func (t *TurnCore) FreshMessages(msgs []Message) []Message {
	active := map[string]bool{}
	for _, m := range t.Settle.Active() {
		active[m.ID.String()] = true
	}
	var fresh []Message
	for _, m := range msgs {
		if !active[m.ID.String()] {
			fresh = append(fresh, m)
		}
	}
	return fresh
}

// SteeredStatus reports n messages steered into the running turn.
func (l *Lifecycle) SteeredStatus(n int) {
	l.Stamper.Emit(AgentEvent{Kind: domain.AgentStatus, Text: fmt.Sprintf("%d message(s) steered into the turn", n)})
}

// ToolContext is the context of a tool call the provider makes: the running turn's, else
// (outside a turn, where settlement tools refuse it) one that lives as long as the runtime.
// The caller cancels it when done.
func (l *Lifecycle) ToolContext() (context.Context, context.CancelFunc) {
	if t := l.CurrentTurn(); t != nil {
		return t.Ctx, func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-l.exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
