package test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

func templateOf(t *testing.T, c *client.Client, agent uuid.UUID) api.TemplateBody {
	t.Helper()
	var l api.TemplateList
	must(t, c.Do(context.Background(), http.MethodGet, "/v1/agents/"+agent.String()+"/templates", nil, &l))
	if len(l.Items) != 1 {
		t.Fatalf("templates %+v", l.Items)
	}
	return l.Items[0]
}

// saveApplied saves the template edit with apply_and_restart and returns the 202 answer.
func saveApplied(t *testing.T, c *client.Client, tmpl api.TemplateBody, cfg domain.TemplateConfig) api.TemplateSaveBody {
	t.Helper()
	var out api.TemplateSaveBody
	must(t, c.Do(context.Background(), http.MethodPut, "/v1/templates/"+tmpl.ID.String(),
		api.SaveTemplateRequest{TemplateConfig: cfg, ApplyMode: domain.ApplyAndRestart}, &out))
	if out.Operation == nil || out.Operation.Generation != out.DesiredGeneration || out.DesiredGeneration <= tmpl.DesiredGeneration {
		t.Fatalf("save answered %+v", out)
	}
	return out
}

// awaitConfig polls the session until want says its generations are settled.
func awaitConfig(t *testing.T, c *client.Client, session uuid.UUID, timeout time.Duration, want func(api.SessionBody) bool) api.SessionBody {
	t.Helper()
	var s api.SessionBody
	wait.Eventually(t, timeout, func() error {
		if s = getSession(t, c, session); !want(s) {
			return fmt.Errorf("desired %d effective %d pending %+v", s.DesiredGeneration, s.EffectiveGeneration, s.PendingChange)
		}
		return nil
	}, "session %s to settle its generations", session)
	return s
}

// A save with apply_and_restart reaches every room: the dormant one takes it at once, the
// live one after its runtime accepted it (the reply shows the new configuration); a
// replacement that cannot start leaves the old configuration effective and running, the
// failure recorded with the old generation as the recovery target.
func TestApplyAndRestartReachesEveryRoomAndAFailedReplacementKeepsTheOldConfiguration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := startDevEnv(t, t.TempDir()+"/jam-home", ownedEnv(t, t.TempDir()))
	c := d.client
	var agent api.AgentBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "applied", Kind: domain.AgentOwned}, &agent))
	liveRoom, live := roomWith(t, c, "live", agent.ID)
	_, dormant := roomWith(t, c, "quiet", agent.ID)
	if r := awaitReply(t, c, postText(t, c, liveRoom.ID, "hello"), 60*time.Second); strings.Contains(r.Text, "turns remembered") {
		t.Fatalf("before the edit: %q", r.Text)
	}
	tmpl := templateOf(t, c, agent.ID)
	cfg := tmpl.TemplateConfig
	cfg.Args = []string{"--directives", "[[count]]"}
	saved := saveApplied(t, c, tmpl, cfg)
	gen := saved.DesiredGeneration
	settled := func(s api.SessionBody) bool {
		return s.DesiredGeneration == gen && s.EffectiveGeneration == gen && s.PendingChange == nil
	}
	awaitConfig(t, c, dormant, 30*time.Second, settled)
	awaitConfig(t, c, live, 60*time.Second, settled)
	if r := awaitReply(t, c, postText(t, c, liveRoom.ID, "again"), 60*time.Second); !strings.Contains(r.Text, "turns remembered: 1") {
		t.Fatalf("after the apply the runtime runs the new configuration on the same thread: %q", r.Text)
	}

	// A replacement that cannot start: its command exits at once (one the node lacks is
	// refused at save).
	broken := cfg
	broken.Command = filepath.Join(t.TempDir(), "exits-at-once")
	must(t, os.WriteFile(broken.Command, []byte("#!/bin/sh\nexit 1\n"), 0o755))
	failed := saveApplied(t, c, saved.TemplateBody, broken)
	s := awaitConfig(t, c, live, 60*time.Second, func(s api.SessionBody) bool {
		return s.PendingChange != nil && s.PendingChange.Status == domain.PendingFailed
	})
	if s.EffectiveGeneration != gen || s.DesiredGeneration != failed.DesiredGeneration || s.PendingChange.RecoveryTarget != gen ||
		s.PendingChange.Generation != failed.DesiredGeneration || s.PendingChange.Reason == "" {
		t.Fatalf("failed apply: effective %d desired %d pending %+v", s.EffectiveGeneration, s.DesiredGeneration, s.PendingChange)
	}
	if r := awaitReply(t, c, postText(t, c, liveRoom.ID, "still there?"), 60*time.Second); !strings.Contains(r.Text, "turns remembered: 2") {
		t.Fatalf("the old configuration was not restored: %q", r.Text)
	}
	// The dormant room had no runtime to preserve: the broken generation is its configuration
	// now (it fails when it wakes, truthfully).
	awaitConfig(t, c, dormant, 30*time.Second, func(s api.SessionBody) bool { return s.EffectiveGeneration == failed.DesiredGeneration })
}

// A template edit that changes a Shared host's compatibility fingerprint (here: the network
// profile, from the resolved developer default to production) recreates the host once (one
// sandbox destroyed, one created) and preserves both rooms' sessions and provider threads;
// the recreated host accepts the next bind, allocated by the resolved profile.
func TestAFingerprintChangeRecreatesTheSharedHostOnceAndPreservesItsSessions(t *testing.T) {
	t.Parallel()
	e := startSandboxDev(t)
	c := e.d.client
	agent := sandboxedAgent(t, c, "shared", domain.PlacementShared)
	room1, s1 := roomWith(t, c, "one", agent)
	room2, s2 := roomWith(t, c, "two", agent)
	awaitReply(t, c, postText(t, c, room1.ID, "[[count]] a"), 60*time.Second)
	awaitReply(t, c, postText(t, c, room2.ID, "[[count]] b"), 60*time.Second)
	hosts := hostsOf(t, c, agent)
	if len(hosts) != 1 {
		t.Fatalf("hosts %+v", hosts)
	}
	host := hosts[0]
	before := map[uuid.UUID]string{s1: getSession(t, c, s1).ProviderSessionID, s2: getSession(t, c, s2).ProviderSessionID}
	tmpl := templateOf(t, c, agent)
	cfg := tmpl.TemplateConfig
	if tmpl.NetworkProfile != domain.NetworkDeveloper {
		t.Fatalf("the resolved profile is %q", tmpl.NetworkProfile)
	}
	cfg.NetworkProfile = domain.NetworkProduction // part of the host fingerprint
	saved := saveApplied(t, c, tmpl, cfg)
	for _, s := range []uuid.UUID{s1, s2} {
		awaitConfig(t, c, s, 90*time.Second, func(b api.SessionBody) bool {
			return b.EffectiveGeneration == saved.DesiredGeneration && b.PendingChange == nil
		})
	}
	after := hostsOf(t, c, agent)
	if len(after) != 1 || after[0].ID != host.ID || after[0].Compatibility == host.Compatibility {
		t.Fatalf("hosts after the edit %+v (before %s)", after, host.Compatibility)
	}
	if n := e.commands(t, "rm", host.SandboxName); n != 1 {
		t.Fatalf("%d sandbox removals, want the one recreation", n)
	}
	for room, s := range map[uuid.UUID]uuid.UUID{room1.ID: s1, room2.ID: s2} {
		if r := awaitReply(t, c, postText(t, c, room, "[[count]] again"), 90*time.Second); !strings.Contains(r.Text, "turns remembered: 1") {
			t.Fatalf("room %s after the recreation: %q", room, r.Text)
		}
		if got := getSession(t, c, s).ProviderSessionID; got != before[s] {
			t.Fatalf("session %s moved from provider session %q to %q", s, before[s], got)
		}
	}
	if n := e.commands(t, "create", host.SandboxName); n != 2 {
		t.Fatalf("%d sandbox creations, want the first and the one recreation", n)
	}
	// The next bind: a new room of the agent joins the recreated host.
	room3, s3 := roomWith(t, c, "three", agent)
	awaitReply(t, c, postText(t, c, room3.ID, "hello"), 90*time.Second)
	if got := getSession(t, c, s3); got.EffectiveGeneration != saved.DesiredGeneration {
		t.Fatalf("the new room runs generation %d", got.EffectiveGeneration)
	}
	if hs := hostsOf(t, c, agent); len(hs) != 1 || hs[0].ID != host.ID || len(hs[0].Members) != 3 {
		t.Fatalf("hosts after the next bind %+v", hs)
	}
}

// A worker SIGKILLed while a room's candidate runtime started but before the generation was
// committed: meanwhile the room truthfully reads applying with the old generation effective;
// a new worker finishes the apply, and the room runs the new generation — never half-applied.
func TestAWorkerKilledDuringAnApplyLeavesEveryRoomOnOneGeneration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := startProductionServer(t, "apply-crash-token")
	c := p.client
	fw := faultWorker{fault: t.TempDir(), env: append(append(p.base, "JAM_HOME="+t.TempDir()), ownedEnv(t, t.TempDir())...)}
	w := fw.start(t, "apply.candidate_started")
	var agent api.AgentBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "crashy-apply", Kind: domain.AgentOwned}, &agent))
	liveRoom, live := roomWith(t, c, "live", agent.ID)
	_, dormant := roomWith(t, c, "quiet", agent.ID)
	awaitReply(t, c, postText(t, c, liveRoom.ID, "hello"), 90*time.Second)
	old := getSession(t, c, live).EffectiveGeneration
	tmpl := templateOf(t, c, agent.ID)
	cfg := tmpl.TemplateConfig
	cfg.Args = []string{"--directives", "[[count]]"}
	saved := saveApplied(t, c, tmpl, cfg)
	fw.awaitPause(t, "apply.candidate_started")
	if s := getSession(t, c, live); s.EffectiveGeneration != old || s.PendingChange == nil || s.PendingChange.Status != domain.PendingApplying {
		t.Fatalf("mid-apply the room must read applying on its old generation: effective %d pending %+v", s.EffectiveGeneration, s.PendingChange)
	}
	kill(t, w)
	w = fw.start(t, "")
	for _, s := range []uuid.UUID{live, dormant} {
		awaitConfig(t, c, s, 120*time.Second, func(b api.SessionBody) bool {
			return b.EffectiveGeneration == saved.DesiredGeneration && b.PendingChange == nil
		})
	}
	if r := awaitReply(t, c, postText(t, c, liveRoom.ID, "after"), 90*time.Second); !strings.Contains(r.Text, "turns remembered") {
		t.Fatalf("the room does not run the new generation: %q", r.Text)
	}
	if code := w.interrupt(45 * time.Second); code != 0 {
		t.Fatalf("worker exited %d after Ctrl-C", code)
	}
}
