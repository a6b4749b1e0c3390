package permission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/testsupport/testdb"
	"github.com/jam-dev/jam/internal/testsupport/teststore"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

type fixture struct {
	store *store.Store
	// other is a second connection pool on the same database: its commits do not run the
	// first store's hooks, as if another process (the API server) wrote them.
	other  *store.Store
	broker *Broker
	agent  domain.Agent
	room   domain.Room
}

func forEachFixture(t *testing.T, fn func(t *testing.T, f *fixture)) {
	testdb.ForEachURL(t, func(t *testing.T, url string) {
		f := &fixture{store: teststore.Open(t, url), other: teststore.Open(t, url)}
		f.broker = New(f.store, slog.New(slog.NewTextHandler(io.Discard, nil)), TimeoutOverride{})
		ctx := context.Background()
		var err error
		if f.agent, err = f.store.CreateAgent(ctx, domain.Agent{ID: uuid.New(), Name: "builder", Kind: domain.AgentAttached,
			CreatedAt: time.Now()}, "hash"); err != nil {
			t.Fatal(err)
		}
		if f.room, err = f.store.CreateRoom(ctx, domain.Room{ID: uuid.New(), Name: "lab", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		fn(t, f)
	})
}

// setTimeoutEnv gives the broker the override JAM_RUNTIME_PERMISSION_TIMEOUT_SECS=raw parses
// to (none when it is refused), as the startup code would.
func (f *fixture) setTimeoutEnv(raw string) error {
	o, err := TimeoutOverrideFromEnv(func(k string) string {
		if k == EnvTimeout {
			return raw
		}
		return ""
	})
	f.broker.override = o
	return err
}

func (f *fixture) request(toolKey string) provider.PermissionRequest {
	return provider.PermissionRequest{AgentID: f.agent.ID, RoomID: f.room.ID, RuntimeSession: uuid.New(), ToolKey: toolKey,
		Title: "edit main.go", Summary: "apply a patch to main.go"}
}

type result struct {
	answer provider.PermissionAnswer
	err    error
}

// ask runs Request in the background and returns where its result arrives.
func (f *fixture) ask(ctx context.Context, req provider.PermissionRequest) <-chan result {
	out := make(chan result, 1)
	go func() {
		a, err := f.broker.Request(ctx, req)
		out <- result{a, err}
	}()
	return out
}

// pending waits for the one pending request to be recorded.
func (f *fixture) pending(t *testing.T) domain.Permission {
	t.Helper()
	state := domain.PermissionPending
	var ps []domain.Permission
	wait.Eventually(t, 10*time.Second, func() error {
		var err error
		if ps, err = f.other.ListPermissions(context.Background(), store.PermissionFilter{State: &state}); err != nil {
			t.Fatal(err)
		}
		if len(ps) != 1 {
			return fmt.Errorf("%d pending", len(ps))
		}
		return nil
	}, "one pending permission request to be recorded")
	return ps[0]
}

func (f *fixture) waitResult(t *testing.T, c <-chan result, within time.Duration) result {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(within):
		t.Fatalf("Request did not return within %s", within)
		return result{}
	}
}

func (f *fixture) noWaiters(t *testing.T) {
	t.Helper()
	f.broker.mu.Lock()
	defer f.broker.mu.Unlock()
	if n := len(f.broker.waiters); n != 0 {
		t.Fatalf("%d waiters left registered", n)
	}
}

func TestADecisionInThisProcessWakesTheRequestAtOnce(t *testing.T) {
	t.Parallel()
	forEachFixture(t, func(t *testing.T, f *fixture) {
		f.broker.poll = time.Hour // only the commit hook can wake it
		req := f.request("edit")
		req.Title = strings.Repeat("t", domain.MaxPermissionTitle+50)
		req.Summary = strings.Repeat("s", domain.MaxPermissionSummary+50) + "\x00"
		req.ToolKey = strings.Repeat("k", domain.MaxPermissionToolKey+1)
		c := f.ask(context.Background(), req)
		p := f.pending(t)
		if len(p.Title) > domain.MaxPermissionTitle || len(p.Summary) > domain.MaxPermissionSummary ||
			len(p.ToolKey) > domain.MaxPermissionToolKey || p.Deadline != nil || *p.RoomID != f.room.ID || *p.RuntimeSession != req.RuntimeSession {
			t.Fatalf("stored %+v", p)
		}
		if _, err := f.store.DecidePermission(context.Background(), p.ID, domain.PermissionAllowOnce, "operator", "", time.Now()); err != nil {
			t.Fatal(err)
		}
		r := f.waitResult(t, c, 5*time.Second)
		if r.err != nil || r.answer.ID != p.ID || r.answer.Decision != domain.PermissionAllowOnce {
			t.Fatalf("answer %+v, %v", r.answer, r.err)
		}
		f.noWaiters(t)
	})
}

func TestADecisionFromAnotherProcessIsFoundByPolling(t *testing.T) {
	t.Parallel()
	forEachFixture(t, func(t *testing.T, f *fixture) {
		c := f.ask(context.Background(), f.request("execute"))
		p := f.pending(t)
		if _, err := f.other.DecidePermission(context.Background(), p.ID, domain.PermissionDeny, "operator", "not now", time.Now()); err != nil {
			t.Fatal(err)
		}
		r := f.waitResult(t, c, 5*time.Second)
		if r.err != nil || r.answer.ID != p.ID || r.answer.Decision != domain.PermissionDeny || r.answer.Reason != "not now" {
			t.Fatalf("answer %+v, %v", r.answer, r.err)
		}
	})
}

func TestAnAlwaysRuleAnswersWithoutRecordingARequest(t *testing.T) {
	t.Parallel()
	forEachFixture(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		c := f.ask(ctx, f.request("edit"))
		p := f.pending(t)
		if _, err := f.other.DecidePermission(ctx, p.ID, domain.PermissionAllowAlways, "operator", "", time.Now()); err != nil {
			t.Fatal(err)
		}
		if r := f.waitResult(t, c, 5*time.Second); r.err != nil || r.answer.Decision != domain.PermissionAllowAlways {
			t.Fatalf("first answer %+v, %v", r.answer, r.err)
		}
		a, err := f.broker.Request(ctx, f.request("edit"))
		if err != nil || a.ID != uuid.Nil || a.Decision != domain.PermissionAllowAlways || a.Reason != ReasonAlwaysRule {
			t.Fatalf("second answer %+v, %v", a, err)
		}
		if all, _ := f.store.ListPermissions(ctx, store.PermissionFilter{}); len(all) != 1 {
			t.Fatalf("%d requests recorded, want the first only", len(all))
		}
		// The rule is per tool key.
		c = f.ask(ctx, f.request("execute"))
		other := f.pending(t)
		if other.ToolKey != "execute" {
			t.Fatalf("pending %+v", other)
		}
		if _, err := f.store.DecidePermission(ctx, other.ID, domain.PermissionDeny, "operator", "", time.Now()); err != nil {
			t.Fatal(err)
		}
		f.waitResult(t, c, 5*time.Second)
	})
}

func TestNoDecisionBeforeTheDeadlineDeniesAndExpires(t *testing.T) {
	t.Parallel()
	forEachFixture(t, func(t *testing.T, f *fixture) {
		if err := f.setTimeoutEnv("1"); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		a, err := f.broker.Request(context.Background(), f.request("edit"))
		if err != nil || a.Decision != domain.PermissionDeny || a.Reason != ReasonDeadline || a.ID == uuid.Nil {
			t.Fatalf("answer %+v, %v", a, err)
		}
		if took := time.Since(start); took < time.Second || took > 5*time.Second {
			t.Fatalf("returned after %s, want about 1s", took)
		}
		p, err := f.store.GetPermission(context.Background(), a.ID)
		if err != nil || p.State != domain.PermissionExpired || p.Deadline == nil || p.DecidedAt == nil || p.Decision != "" {
			t.Fatalf("record %+v, %v", p, err)
		}
		f.noWaiters(t)
	})
}

func TestTheAskerGoingAwayCancelsTheRequest(t *testing.T) {
	t.Parallel()
	forEachFixture(t, func(t *testing.T, f *fixture) {
		ctx, cancel := context.WithCancel(context.Background())
		c := f.ask(ctx, f.request("edit"))
		p := f.pending(t)
		cancel()
		r := f.waitResult(t, c, 5*time.Second)
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("answer %+v, %v, want context.Canceled", r.answer, r.err)
		}
		got, err := f.store.GetPermission(context.Background(), p.ID)
		if err != nil || got.State != domain.PermissionCancelled || got.Reason != ReasonCancelled {
			t.Fatalf("record %+v, %v", got, err)
		}
		// A later decision is refused; the request is over.
		if _, err := f.store.DecidePermission(context.Background(), p.ID, domain.PermissionAllowOnce, "operator", "", time.Now()); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("decision after cancel: %v", err)
		}
		f.noWaiters(t)

		// An already-ended context records nothing.
		if _, err := f.broker.Request(ctx, f.request("edit")); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled context: %v", err)
		}
		if all, _ := f.store.ListPermissions(context.Background(), store.PermissionFilter{}); len(all) != 1 {
			t.Fatalf("%d requests recorded", len(all))
		}
		f.noWaiters(t)
	})
}

func TestTheTimeoutComesFromTheEnvironmentThenTheSetting(t *testing.T) {
	t.Parallel()
	forEachFixture(t, func(t *testing.T, f *fixture) {
		ctx := context.Background()
		check := func(want time.Duration) {
			t.Helper()
			if got, err := f.broker.Timeout(ctx); err != nil || got != want {
				t.Fatalf("timeout %s, %v, want %s", got, err, want)
			}
		}
		check(0) // the setting's default: no deadline
		if err := f.store.PutSetting(ctx, domain.SettingPermissionTimeoutSecs, json.RawMessage(`30`), time.Now()); err != nil {
			t.Fatal(err)
		}
		check(30 * time.Second)
		for raw, want := range map[string]time.Duration{"5": 5 * time.Second, " 0 ": 0, "": 30 * time.Second} {
			if err := f.setTimeoutEnv(raw); err != nil {
				t.Fatalf("%q: %v", raw, err)
			}
			check(want)
		}
		for _, bad := range []string{"soon", "-1", "1.5", "99999999999"} {
			if err := f.setTimeoutEnv(bad); err == nil {
				t.Fatalf("%q accepted", bad)
			}
			check(30 * time.Second)
		}
	})
}

func TestARequestWithoutAnAgentIsRefused(t *testing.T) {
	t.Parallel()
	forEachFixture(t, func(t *testing.T, f *fixture) {
		req := f.request("edit")
		req.AgentID = uuid.Nil
		if _, err := f.broker.Request(context.Background(), req); err == nil {
			t.Fatal("accepted")
		}
	})
}
