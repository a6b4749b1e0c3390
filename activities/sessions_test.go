package activities_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/testsuite"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/testsupport/teststore"
)

// Issue 17: a template's idle_secs was validated and stored, then ignored. The threshold
// chain is: the operator's environment override, the template, the setting, the default.
func TestTheIdleThresholdComesFromTheTemplateUnlessTheOperatorOverridesIt(t *testing.T) {
	ctx := context.Background()
	st := teststore.SQLite(t)
	now := time.Now()
	two := 2
	newSession := func(name string, idle *int) uuid.UUID {
		return ownedSession(t, st, name, domain.TemplateConfig{Alias: "default", Transport: domain.TransportACP, IdleSecs: idle})
	}
	withTemplate, without := newSession("templated", &two), newSession("plain", nil)
	load := func(l activities.Lifecycle, session uuid.UUID) int {
		t.Helper()
		var suite testsuite.WorkflowTestSuite
		env := suite.NewTestActivityEnvironment()
		s := &activities.Sessions{Store: st, Lifecycle: l}
		env.RegisterActivity(s)
		v, err := env.ExecuteActivity(s.LoadSession, activities.LoadSessionInput{RuntimeSession: session})
		if err != nil {
			t.Fatal(err)
		}
		var out activities.LoadSessionResult
		if err := v.Get(&out); err != nil {
			t.Fatal(err)
		}
		return out.IdleSecs
	}
	if got := load(activities.Lifecycle{}, withTemplate); got != 2 {
		t.Errorf("template idle_secs 2: got %d", got)
	}
	if got := load(activities.Lifecycle{}, without); got != domain.DefaultIdleSecs {
		t.Errorf("no template value, no setting: got %d", got)
	}
	if err := st.PutSetting(ctx, domain.SettingIdleSecs, json.RawMessage(`900`), now); err != nil {
		t.Fatal(err)
	}
	if got := load(activities.Lifecycle{}, without); got != 900 {
		t.Errorf("the setting: got %d", got)
	}
	if got := load(activities.Lifecycle{}, withTemplate); got != 2 {
		t.Errorf("the template over the setting: got %d", got)
	}
	if got := load(activities.Lifecycle{IdleSecs: 5}, withTemplate); got != 5 {
		t.Errorf("the operator's override over the template: got %d", got)
	}
}

func TestLifecycleKnobsAreParsedOnceAndRefusedWhenMalformed(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	l, err := activities.LifecycleFromEnv(env(map[string]string{
		activities.EnvRuntimeLazy: "0", activities.EnvRuntimeIdleSecs: "30", activities.EnvProviderReadySecs: "5"}))
	if err != nil || !l.Eager || l.IdleSecs != 30 || l.ReadyTimeout != 5*time.Second {
		t.Fatalf("lifecycle %+v %v", l, err)
	}
	if l, err := activities.LifecycleFromEnv(env(nil)); err != nil || l != (activities.Lifecycle{}) {
		t.Fatalf("defaults %+v %v", l, err)
	}
	for k, v := range map[string]string{activities.EnvRuntimeLazy: "maybe", activities.EnvRuntimeIdleSecs: "-1",
		activities.EnvProviderReadySecs: "soon"} {
		if _, err := activities.LifecycleFromEnv(env(map[string]string{k: v})); err == nil {
			t.Errorf("%s=%q was accepted", k, v)
		}
	}
}

// ownedSession creates an owned agent with the template cfg and a room it is in; it returns
// the runtime session the membership bound.
func ownedSession(t *testing.T, st *store.Store, name string, cfg domain.TemplateConfig) uuid.UUID {
	t.Helper()
	ctx, now := context.Background(), time.Now()
	a, err := st.CreateAgent(ctx, domain.Agent{ID: uuid.New(), Name: name, Kind: domain.AgentOwned, CreatedAt: now}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateTemplate(ctx, domain.Template{ID: uuid.New(), AgentID: a.ID, Config: cfg.Normalized(), CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	room, err := st.CreateRoom(ctx, domain.Room{ID: uuid.New(), Name: name, CreatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.AddAgentToRoom(ctx, room.ID, a.ID, now)
	if err != nil {
		t.Fatal(err)
	}
	return m.Session.RuntimeSessionID
}
