package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
)

// Watcher is the part of the node's runtime registry that runs the provider watchdog
// (workers.RuntimeRegistry); a RuntimeTable without it watches nothing.
type Watcher interface {
	Watch(session uuid.UUID, generation int64, limits domain.WatchdogLimits, measureGroup bool)
}

// watchdogLimits are a runtime's effective bounds: the template's watchdog over the
// runtime.defaults.watchdog setting over domain.DefaultWatchdog.
func watchdogLimits(ctx context.Context, st *store.Store, c domain.TemplateConfig) (domain.Watchdog, error) {
	base := domain.DefaultWatchdog
	set, err := st.GetSetting(ctx, domain.SettingWatchdog)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return domain.Watchdog{}, err
	default:
		var w domain.Watchdog
		if err := json.Unmarshal(set.Value, &w); err != nil {
			return domain.Watchdog{}, fmt.Errorf("setting %s: %w", domain.SettingWatchdog, err)
		}
		base = w.Over(base)
	}
	if c.Watchdog == nil {
		return base, nil
	}
	return c.Watchdog.Over(base), nil
}

// watch hands a started runtime's bounds to the node's watchdog. Memory and idle CPU are
// measured on the provider's own process group: not for a sandboxed runtime (the host sees
// only the sandbox client; the microVM bounds its guest) nor one whose process serves a
// Shared host's other rooms too. A wedged turn is caught everywhere.
func (r *Runtimes) watch(ctx context.Context, hs domain.HostSession, gen int64, sandboxed, shared bool) {
	w, ok := r.Table.(Watcher)
	if !ok {
		return
	}
	limits, err := watchdogLimits(ctx, r.Store, hs.Config)
	if err != nil {
		// The runtime runs unwatched rather than not at all; the log says why.
		r.Log.Warn("watchdog bounds unreadable; the runtime runs unwatched", "runtime_session", hs.RuntimeSessionID, "error", err)
		return
	}
	w.Watch(hs.RuntimeSessionID, gen, limits.Limits(), !sandboxed && !shared)
}
