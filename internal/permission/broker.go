// Package permission is Jam's runtime permission broker: a provider's request to run a tool
// is answered by the agent's durable always-rule for the tool key, or recorded as a pending
// request that an operator (POST /v1/permissions/{id}/decision) or a human in the room
// ("approve <id>", "deny <id>") decides, until its deadline denies it.
package permission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/store"
)

// EnvTimeout overrides the runtime.permission.timeout_secs setting: seconds a request waits
// for a decision before it is denied, 0 for no deadline.
const EnvTimeout = "JAM_RUNTIME_PERMISSION_TIMEOUT_SECS"

// TimeoutOverride is the operator's JAM_RUNTIME_PERMISSION_TIMEOUT_SECS, parsed once when
// the worker starts (TimeoutOverrideFromEnv) and injected; when Set it wins over the stored
// setting.
type TimeoutOverride struct {
	Set bool
	// Timeout is how long a request waits; 0 is no deadline.
	Timeout time.Duration
}

// TimeoutOverrideFromEnv parses JAM_RUNTIME_PERMISSION_TIMEOUT_SECS; unset or blank is no
// override. A value the setting would refuse is an error, and no override.
func TimeoutOverrideFromEnv(getenv func(string) string) (TimeoutOverride, error) {
	raw := strings.TrimSpace(getenv(EnvTimeout))
	if raw == "" {
		return TimeoutOverride{}, nil
	}
	def, ok := domain.LookupSetting(domain.SettingPermissionTimeoutSecs)
	if !ok {
		return TimeoutOverride{}, fmt.Errorf("setting %s is not registered", domain.SettingPermissionTimeoutSecs)
	}
	secs, err := strconv.ParseInt(raw, 10, 64)
	if err == nil {
		err = def.Validate(json.RawMessage(strconv.FormatInt(secs, 10)))
	}
	if err != nil {
		return TimeoutOverride{}, fmt.Errorf("%s=%q: %w", EnvTimeout, raw, err)
	}
	return TimeoutOverride{Set: true, Timeout: time.Duration(secs) * time.Second}, nil
}

// The reasons the broker gives when nobody decided.
const (
	ReasonAlwaysRule = "always-rule"
	ReasonDeadline   = "no decision before the deadline"
	ReasonCancelled  = "the request ended before a decision"
)

const (
	// pollInterval re-reads a pending request: the decision may be committed by another
	// process (the API server), whose commits do not wake this one.
	pollInterval = 500 * time.Millisecond
	// closeTimeout bounds recording a cancellation after the caller's context ended.
	closeTimeout = 5 * time.Second
)

// Broker decides runtime permission requests; it implements provider.PermissionBroker.
// Request blocks in the caller's goroutine and starts none of its own.
type Broker struct {
	store    *store.Store
	log      *slog.Logger
	now      func() time.Time
	override TimeoutOverride
	poll     time.Duration

	mu      sync.Mutex
	waiters map[chan struct{}]struct{}
}

var _ provider.PermissionBroker = (*Broker)(nil)

// New builds a broker over the store; override is the operator's timeout, if any. It
// registers one hook on the store's in-process commits to wake waiting requests; build one
// broker per store.
func New(st *store.Store, log *slog.Logger, override TimeoutOverride) *Broker {
	b := &Broker{store: st, log: log, now: time.Now, override: override, poll: pollInterval,
		waiters: map[chan struct{}]struct{}{}}
	st.OnEventsCommitted(b.wake)
	return b
}

// wake nudges every waiting request to re-read its row; it never blocks.
func (b *Broker) wake() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (b *Broker) addWaiter() chan struct{} {
	ch := make(chan struct{}, 1)
	b.mu.Lock()
	b.waiters[ch] = struct{}{}
	b.mu.Unlock()
	return ch
}

func (b *Broker) removeWaiter(ch chan struct{}) {
	b.mu.Lock()
	delete(b.waiters, ch)
	b.mu.Unlock()
}

// Timeout is how long a new request waits for a decision (0: no deadline): the operator's
// override, else the stored runtime.permission.timeout_secs setting, else its default.
func (b *Broker) Timeout(ctx context.Context) (time.Duration, error) {
	if b.override.Set {
		return b.override.Timeout, nil
	}
	def, ok := domain.LookupSetting(domain.SettingPermissionTimeoutSecs)
	if !ok {
		return 0, fmt.Errorf("setting %s is not registered", domain.SettingPermissionTimeoutSecs)
	}
	value := def.Default
	stored, err := b.store.GetSetting(ctx, def.Key)
	switch {
	case err == nil:
		value = stored.Value
	case !errors.Is(err, store.ErrNotFound):
		return 0, err
	}
	var secs int64
	if err := json.Unmarshal(value, &secs); err != nil || secs < 0 {
		return 0, fmt.Errorf("setting %s holds %s, not a number of seconds", def.Key, value)
	}
	return time.Duration(secs) * time.Second, nil
}

// clean makes provider text storable (valid UTF-8 without NUL) and bounds it.
func clean(s string, n int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
	return domain.Truncate(s, n)
}

func optional(id uuid.UUID) *uuid.UUID {
	if id == uuid.Nil {
		return nil
	}
	return &id
}

// Request answers at once from an always-rule for (agent, tool key) without recording
// anything; otherwise it records a pending request and blocks until it is decided, its
// deadline passes (deny, and the request is expired) or ctx ends (the request is cancelled
// and ctx.Err() returned).
func (b *Broker) Request(ctx context.Context, req provider.PermissionRequest) (provider.PermissionAnswer, error) {
	if req.AgentID == uuid.Nil {
		return provider.PermissionAnswer{}, errors.New("permission request: no agent")
	}
	toolKey := clean(req.ToolKey, domain.MaxPermissionToolKey)
	always, err := b.store.HasPermissionRule(ctx, req.AgentID, toolKey)
	if err != nil {
		return provider.PermissionAnswer{}, err
	}
	if always {
		return provider.PermissionAnswer{ID: uuid.Nil, Decision: domain.PermissionAllowAlways, Reason: ReasonAlwaysRule}, nil
	}
	timeout, err := b.Timeout(ctx)
	if err != nil {
		return provider.PermissionAnswer{}, err
	}
	now := b.now()
	p := domain.Permission{ID: uuid.New(), AgentID: req.AgentID, RoomID: optional(req.RoomID),
		RuntimeSession: optional(req.RuntimeSession), ToolKey: toolKey,
		Title: clean(req.Title, domain.MaxPermissionTitle), Summary: clean(req.Summary, domain.MaxPermissionSummary),
		CreatedAt: now}
	if timeout > 0 {
		deadline := now.Add(timeout)
		p.Deadline = &deadline
	}
	// Listen before the request exists, so a decision committed right after cannot be missed.
	wake := b.addWaiter()
	defer b.removeWaiter(wake)
	if p, err = b.store.CreatePermission(ctx, p); err != nil {
		return provider.PermissionAnswer{}, err
	}
	return b.wait(ctx, p, timeout, wake)
}

func (b *Broker) wait(ctx context.Context, p domain.Permission, timeout time.Duration, wake <-chan struct{}) (provider.PermissionAnswer, error) {
	var deadline <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	tick := time.NewTicker(b.poll)
	defer tick.Stop()
	for {
		cur, err := b.store.GetPermission(ctx, p.ID)
		switch {
		case err == nil && cur.State != domain.PermissionPending:
			return answer(cur), nil
		case errors.Is(err, store.ErrNotFound):
			// The agent was deleted while it asked.
			return provider.PermissionAnswer{}, fmt.Errorf("permission request %s: %w", p.ID, err)
		case err != nil && ctx.Err() == nil:
			b.log.Warn("cannot read a pending permission request; retrying", "permission", p.ID, "error", err)
		}
		select {
		case <-ctx.Done():
			b.cancel(p.ID)
			return provider.PermissionAnswer{ID: p.ID}, ctx.Err()
		case <-deadline:
			return b.expire(ctx, p.ID)
		case <-wake:
		case <-tick.C:
		}
	}
}

// expire closes a request whose deadline passed and denies it; a decision that landed first
// wins.
func (b *Broker) expire(ctx context.Context, id uuid.UUID) (provider.PermissionAnswer, error) {
	closed, err := b.store.ClosePermission(ctx, id, domain.PermissionExpired, ReasonDeadline, b.now())
	if errors.Is(err, store.ErrPermissionSettled) {
		if cur, err := b.store.GetPermission(ctx, id); err == nil {
			return answer(cur), nil
		}
	} else if err == nil {
		return answer(closed), nil
	}
	b.log.Warn("cannot record an expired permission request; denying it", "permission", id, "error", err)
	return provider.PermissionAnswer{ID: id, Decision: domain.PermissionDeny, Reason: ReasonDeadline}, nil
}

// cancel records that the asker went away, on a context of its own: the caller's is done.
func (b *Broker) cancel(id uuid.UUID) {
	ctx, stop := context.WithTimeout(context.Background(), closeTimeout)
	defer stop()
	_, err := b.store.ClosePermission(ctx, id, domain.PermissionCancelled, ReasonCancelled, b.now())
	if err != nil && !errors.Is(err, store.ErrPermissionSettled) {
		b.log.Warn("cannot record a cancelled permission request", "permission", id, "error", err)
	}
}

// answer is what a settled request tells the runtime; anything but an allow denies.
func answer(p domain.Permission) provider.PermissionAnswer {
	a := provider.PermissionAnswer{ID: p.ID, Decision: p.Decision, Reason: p.Reason}
	switch p.State {
	case domain.PermissionAllowed, domain.PermissionDenied:
		if a.Reason == "" && p.DecidedBy != "" {
			a.Reason = "decided by " + p.DecidedBy
		}
	case domain.PermissionExpired:
		a.Decision = domain.PermissionDeny
		if a.Reason == "" {
			a.Reason = ReasonDeadline
		}
	default:
		a.Decision = domain.PermissionDeny
		if a.Reason == "" {
			a.Reason = ReasonCancelled
		}
	}
	return a
}
