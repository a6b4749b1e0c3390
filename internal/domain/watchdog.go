package domain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Watchdog bounds a live provider: a resident-memory ceiling for its whole process group, a
// CPU ceiling while it has no turn, and a wedge bound (no provider event for that long inside
// a turn). Crossing one recycles the runtime on its own thread. A zero field is off; a nil
// field takes the operator's default (SettingWatchdog), then DefaultWatchdog.
type Watchdog struct {
	// MemoryMB is the ceiling of the process group's summed resident memory, in MiB.
	MemoryMB *int `json:"memory_mb,omitempty"`
	// IdleCPUPercent is the ceiling of the group's CPU use (percent of one core) sustained
	// over WatchdogIdleWindow while no turn runs.
	IdleCPUPercent *int `json:"idle_cpu_percent,omitempty"`
	// WedgeSecs is how long a turn may go without a provider event before it is interrupted.
	WedgeSecs *int `json:"wedge_secs,omitempty"`
}

// Watchdog limits.
const (
	MaxWatchdogMemoryMB = 1 << 20 // 1 TiB
	MaxWatchdogCPU      = 6400    // 64 cores busy
	MaxWatchdogWedge    = 7 * 24 * 3600
	// WatchdogIdleWindow is how long idle CPU use must stay above its ceiling to count: a
	// provider settling after a turn (writing its state, a compaction) may burn a core briefly.
	WatchdogIdleWindow = time.Minute
	// RecycleLoopCount recycles within RecycleLoopWindow hold the session failed instead of
	// recycling it again: a provider that crosses that often is not helped by restarts.
	RecycleLoopCount  = 3
	RecycleLoopWindow = 30 * time.Minute
)

// DefaultWatchdog is the watchdog when neither template nor setting says otherwise: generous
// enough for a busy agent, tight enough to catch the multi-gigabyte leaks and the idle
// busy-loops users of every agent CLI report.
var DefaultWatchdog = Watchdog{MemoryMB: intPtr(4096), IdleCPUPercent: intPtr(90), WedgeSecs: intPtr(1800)}

func intPtr(n int) *int { return &n }

// Over fills every field w leaves unset from base.
func (w Watchdog) Over(base Watchdog) Watchdog {
	if w.MemoryMB == nil {
		w.MemoryMB = base.MemoryMB
	}
	if w.IdleCPUPercent == nil {
		w.IdleCPUPercent = base.IdleCPUPercent
	}
	if w.WedgeSecs == nil {
		w.WedgeSecs = base.WedgeSecs
	}
	return w
}

// Limits are the effective bounds (0: off).
func (w Watchdog) Limits() WatchdogLimits {
	get := func(p *int) int {
		if p == nil {
			return 0
		}
		return *p
	}
	return WatchdogLimits{MemoryBytes: int64(get(w.MemoryMB)) << 20, IdleCPUPercent: get(w.IdleCPUPercent),
		Wedge: time.Duration(get(w.WedgeSecs)) * time.Second}
}

// Validate reports every out-of-range field under prefix.
func (w Watchdog) Validate(prefix string, v *Validations) {
	check := func(field string, p *int, hi int) {
		if p != nil && (*p < 0 || *p > hi) {
			v.Add(prefix+field, fmt.Sprintf("must be between 0 (off) and %d", hi))
		}
	}
	check("memory_mb", w.MemoryMB, MaxWatchdogMemoryMB)
	check("idle_cpu_percent", w.IdleCPUPercent, MaxWatchdogCPU)
	check("wedge_secs", w.WedgeSecs, MaxWatchdogWedge)
}

// WatchdogLimits are a runtime's effective watchdog bounds; zero is off.
type WatchdogLimits struct {
	MemoryBytes    int64         `json:"memory_bytes,omitempty"`
	IdleCPUPercent int           `json:"idle_cpu_percent,omitempty"`
	Wedge          time.Duration `json:"wedge,omitempty"`
}

// Off reports whether no bound is set.
func (l WatchdogLimits) Off() bool {
	return l.MemoryBytes == 0 && l.IdleCPUPercent == 0 && l.Wedge == 0
}

// SettingWatchdog is the operator's default watchdog; a template's own fields override it.
const SettingWatchdog = "runtime.defaults.watchdog"

func validateWatchdogSetting(raw json.RawMessage) error {
	var w Watchdog
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return &ValidationError{Field: "value", Detail: `must be an object such as {"memory_mb": 4096, "idle_cpu_percent": 90, "wedge_secs": 1800}`}
	}
	var v Validations
	w.Validate("value.", &v)
	return v.Err()
}

// RecycleReason says which watchdog bound a runtime crossed.
type RecycleReason string

const (
	// RecycleMemory: the process group's resident memory passed its ceiling.
	RecycleMemory RecycleReason = "memory"
	// RecycleIdleCPU: the group kept burning CPU above its ceiling with no turn running.
	RecycleIdleCPU RecycleReason = "idle_cpu"
	// RecycleWedged: a turn went without a provider event for the wedge bound.
	RecycleWedged RecycleReason = "wedged"
)

var RecycleReasons = NewEnum("recycle_reason", RecycleMemory, RecycleIdleCPU, RecycleWedged)

func (v *RecycleReason) UnmarshalText(b []byte) error { return unmarshalEnum(RecycleReasons, b, v) }

// Recycle is one watchdog recycle of a runtime: what was crossed, what was measured.
type Recycle struct {
	Reason RecycleReason `json:"reason"`
	// Measured says what the watchdog saw, for people ("resident memory 812 MiB over the
	// 512 MiB ceiling").
	Measured   string    `json:"measured"`
	Generation int64     `json:"generation"`
	At         time.Time `json:"at"`
}
