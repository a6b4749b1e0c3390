package workers

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/procgroup"
	"github.com/jam-dev/jam/internal/provider"
)

// The provider watchdog: a node samples its live runtimes and reports one that crossed its
// template's bounds (resident memory of its process group, CPU while it has no turn, a turn
// without provider events). The session's workflow recycles it at its next turn boundary:
// stop, start again on the same provider thread. A wedged turn is interrupted first, so its
// messages stay queued for the runtime that follows.

// DefaultWatchdogInterval is how often the node samples its runtimes.
const DefaultWatchdogInterval = 5 * time.Second

// WatchdogConfig tunes the sampler; zero fields take the defaults.
type WatchdogConfig struct {
	// Interval between samples (DefaultWatchdogInterval).
	Interval time.Duration
	// IdleWindow is how long idle CPU use must stay over its ceiling (domain.WatchdogIdleWindow).
	IdleWindow time.Duration
	// Measure reads process groups' usage (procgroup.GroupUsage on /proc).
	Measure func(pgids []int) (map[int]procgroup.Usage, error)
}

func (c WatchdogConfig) withDefaults() WatchdogConfig {
	if c.Interval <= 0 {
		c.Interval = DefaultWatchdogInterval
	}
	if c.IdleWindow <= 0 {
		c.IdleWindow = domain.WatchdogIdleWindow
	}
	if c.Measure == nil {
		c.Measure = func(pgids []int) (map[int]procgroup.Usage, error) {
			return procgroup.GroupUsage(procgroup.Host, pgids)
		}
	}
	return c
}

// Crossing is a live runtime the watchdog found over a bound.
type Crossing struct {
	RuntimeSession uuid.UUID
	Recycle        domain.Recycle
}

// watchState is one runtime's watchdog bookkeeping, guarded by the registry's lock except
// lastEvent, which the runtime's event sink stamps on every provider event.
type watchState struct {
	limits domain.WatchdogLimits
	// measureGroup: memory and idle CPU are measured on the runtime's own process group
	// (off for a sandboxed runtime, whose provider runs in the microVM, and for one sharing
	// a process with other rooms).
	measureGroup bool
	lastEvent    atomic.Int64 // unix nanoseconds
	turnStart    time.Time
	// prevAt/prevCPU: the last idle sample; overSince: when idle CPU first went over.
	prevAt    time.Time
	prevCPU   time.Duration
	overSince time.Time
	crossed   bool
}

// eventSink wraps a runtime's event sink so every provider event proves the turn alive.
func (w *watchState) eventSink(next provider.Sink) provider.Sink {
	return func(ev provider.AgentEvent) {
		w.lastEvent.Store(time.Now().UnixNano())
		if next != nil {
			next(ev)
		}
	}
}

// Watch sets the watchdog bounds of the session's live runtime of that generation; zero
// limits watch nothing. measureGroup says whether its process group is its own to measure.
func (r *RuntimeRegistry) Watch(session uuid.UUID, generation int64, limits domain.WatchdogLimits, measureGroup bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.runtimes[session]
	if !ok || e.generation != generation || e.watch == nil {
		return
	}
	e.watch.limits, e.watch.measureGroup = limits, measureGroup
}

// RunWatchdog samples the live runtimes every interval until ctx ends, reporting each
// runtime that crossed a bound once (per generation) to onCross, which must not block long.
func (r *RuntimeRegistry) RunWatchdog(ctx context.Context, cfg WatchdogConfig, onCross func(Crossing)) {
	cfg = cfg.withDefaults()
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			r.sampleWatchdog(ctx, cfg, now, onCross)
		}
	}
}

// watched is one runtime a sample looks at.
type watched struct {
	session uuid.UUID
	e       *runtimeEntry
	groups  []int
}

// sampleWatchdog takes one sample and reports each runtime that crossed a bound in it.
func (r *RuntimeRegistry) sampleWatchdog(ctx context.Context, cfg WatchdogConfig, now time.Time, onCross func(Crossing)) {
	r.mu.Lock()
	var (
		list   []watched
		pgids  []int
		byPgid = map[uuid.UUID][]int{}
	)
	for g, s := range r.groups {
		byPgid[s] = append(byPgid[s], g)
	}
	for s, e := range r.runtimes {
		w := e.watch
		if w == nil || w.crossed || e.stopping || e.preparing || w.limits.Off() {
			continue
		}
		item := watched{session: s, e: e}
		if w.measureGroup {
			item.groups = byPgid[s]
			pgids = append(pgids, item.groups...)
		}
		list = append(list, item)
	}
	r.mu.Unlock()
	if len(list) == 0 {
		return
	}
	usage := map[int]procgroup.Usage{}
	if len(pgids) > 0 {
		var err error
		if usage, err = cfg.Measure(pgids); err != nil {
			r.log.Warn("watchdog: measuring provider process groups", "error", err)
			usage = map[int]procgroup.Usage{}
		}
	}
	for _, item := range list {
		var u procgroup.Usage
		for _, g := range item.groups {
			gu := usage[g]
			u.Processes += gu.Processes
			u.RSSBytes += gu.RSSBytes
			u.CPU += gu.CPU
		}
		r.mu.Lock()
		e := item.e
		reason, measured := judge(e, u, now, cfg.IdleWindow, len(item.groups) > 0)
		if reason != "" {
			e.watch.crossed = true
		}
		inTurn := e.turns > 0
		r.mu.Unlock()
		if reason == "" {
			continue
		}
		r.log.Warn("watchdog: runtime over a bound; recycling it", "runtime_session", item.session,
			"generation", e.generation, "reason", reason, "measured", measured)
		// Reported before a wedged turn is interrupted: the session's workflow then holds the
		// recycle before the turn's end, and recycles instead of running the next turn on
		// the wedged runtime (which, reported once, would wedge unwatched).
		onCross(Crossing{RuntimeSession: item.session, Recycle: domain.Recycle{
			Reason: reason, Measured: measured, Generation: e.generation, At: now.UTC()}})
		if reason == domain.RecycleWedged && inTurn {
			// The turn ends cancelled, settling nothing: its messages wait for the runtime
			// the recycle starts.
			if err := e.rt.Interrupt(ctx); err != nil {
				r.log.Warn("watchdog: interrupting a wedged turn", "runtime_session", item.session, "error", err)
			}
		}
	}
}

// judge decides whether one runtime crossed a bound in this sample (called with the
// registry's lock held): memory first (it grows until the machine suffers), then a wedged
// turn, then idle CPU sustained over the window.
func judge(e *runtimeEntry, u procgroup.Usage, now time.Time, window time.Duration, measured bool) (domain.RecycleReason, string) {
	w := e.watch
	lim := w.limits
	if measured && lim.MemoryBytes > 0 && u.RSSBytes > lim.MemoryBytes {
		return domain.RecycleMemory, fmt.Sprintf("resident memory %d MiB in %d process(es) over the %d MiB ceiling",
			u.RSSBytes>>20, u.Processes, lim.MemoryBytes>>20)
	}
	if e.turns > 0 {
		w.prevAt, w.overSince = time.Time{}, time.Time{} // idle CPU is judged between turns only
		if lim.Wedge > 0 {
			last := max(w.lastEvent.Load(), w.turnStart.UnixNano())
			if quiet := now.Sub(time.Unix(0, last)); quiet > lim.Wedge {
				return domain.RecycleWedged, fmt.Sprintf("no provider event for %s in a turn (bound %s)",
					quiet.Round(time.Second), lim.Wedge)
			}
		}
		return "", ""
	}
	if !measured || lim.IdleCPUPercent == 0 {
		return "", ""
	}
	prevAt, prevCPU := w.prevAt, w.prevCPU
	w.prevAt, w.prevCPU = now, u.CPU
	if prevAt.IsZero() || !now.After(prevAt) {
		return "", ""
	}
	percent := float64(u.CPU-prevCPU) / float64(now.Sub(prevAt)) * 100
	if percent <= float64(lim.IdleCPUPercent) {
		w.overSince = time.Time{}
		return "", ""
	}
	if w.overSince.IsZero() {
		w.overSince = prevAt
	}
	if over := now.Sub(w.overSince); over >= window {
		return domain.RecycleIdleCPU, fmt.Sprintf("%.0f%% CPU with no turn running for %s (ceiling %d%%)",
			percent, over.Round(time.Second), lim.IdleCPUPercent)
	}
	return "", ""
}
