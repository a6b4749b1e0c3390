package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/fakesbx"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// startNetworkDev is startSandboxDev with further fake sbx injections.
func startNetworkDev(t *testing.T, extra ...string) sandboxEnv {
	t.Helper()
	e := sandboxEnv{home: filepath.Join(t.TempDir(), "jam-home"), state: t.TempDir(),
		log: filepath.Join(t.TempDir(), "sbx.log"), agentState: t.TempDir()}
	e.d = startDevEnv(t, e.home, ownedEnv(t, e.agentState, append([]string{"JAM_SBX=" + fakesbx.Binary(t),
		"FAKESBX_STATE=" + e.state, "FAKESBX_LOG=" + e.log}, extra...)...))
	return e
}

type fakeRule struct{ ID, Scope, Resource string }

// policyRules is the fake's whole policy state, every scope.
func (e sandboxEnv) policyRules(t *testing.T) []fakeRule {
	t.Helper()
	var out struct{ Rules []fakeRule }
	if err := json.Unmarshal([]byte(e.sbx(t, "policy", "ls", "network")), &out); err != nil {
		t.Fatal(err)
	}
	return out.Rules
}

func hostNetwork(t *testing.T, e sandboxEnv, host uuid.UUID) api.HostNetworkBody {
	t.Helper()
	var out api.HostNetworkBody
	must(t, e.d.client.Do(context.Background(), http.MethodGet, "/v1/hosts/"+host.String()+"/network", nil, &out))
	return out
}

// isToolTarget: the node's MCP endpoint as a guest reaches it (the journal manages it too).
func isToolTarget(target string) bool { return strings.HasPrefix(target, "host.docker.internal:") }

// A developer-profile host ends with exactly the profile's targets (and Jam's tool endpoint)
// Owned: one rule each in the sandbox's scope, each the journal's, each reachable.
func TestNetworkDeveloperHostOwnsExactlyItsProfileRules(t *testing.T) {
	t.Parallel()
	e := startNetworkDev(t)
	c := e.d.client
	agent := sandboxedAgent(t, c, "dev", domain.PlacementDedicated)
	room, session := roomWith(t, c, "lab", agent)
	awaitReply(t, c, postText(t, c, room.ID, "hello"), 60*time.Second)
	host := hostsOf(t, c, agent)[0]

	net := hostNetwork(t, e, session)
	want := domain.NetworkTargets(domain.NetworkDeveloper)
	owned := map[string]string{}
	for _, en := range net.Entries {
		if en.State != domain.NetworkOwned || en.RuleID == "" {
			t.Fatalf("entry %+v is not Owned", en)
		}
		if !slices.Contains(want, en.Target) && !isToolTarget(en.Target) {
			t.Fatalf("a target the profile does not need: %+v", en)
		}
		owned[en.Target] = en.RuleID
	}
	for _, w := range want {
		if owned[w] == "" {
			t.Fatalf("%s is not in the journal: %+v", w, net.Entries)
		}
	}
	rules := e.policyRules(t)
	if len(rules) != len(owned) {
		t.Fatalf("the fake holds %d rules, the journal owns %d: %+v", len(rules), len(owned), rules)
	}
	for _, r := range rules {
		if r.Scope != host.SandboxName || owned[r.Resource] != r.ID {
			t.Fatalf("rule %+v is not the journal's (%v)", r, owned)
		}
	}
	if len(net.Readiness) != len(owned) {
		t.Fatalf("readiness %+v", net.Readiness)
	}
	for _, r := range net.Readiness {
		if r.Result != domain.NetworkAllowed {
			t.Fatalf("readiness %+v", net.Readiness)
		}
	}
	cli := []string{"JAM_URL=" + e.d.apiURL, "JAM_HOME=" + filepath.Dir(e.d.tokenFile)}
	if out, err := runJam(t, cli, "host", "network", session.String()); err != nil ||
		!strings.Contains(out, "github.com:443") || !strings.Contains(out, "owned") || !strings.Contains(out, owned["github.com:443"]) {
		t.Fatalf("jam host network: %v\n%s", err, out)
	}
}

// A rule that existed before the host is CoveredExternally and outlives the host's cleanup,
// which removes every rule Jam owned.
func TestNetworkCoveredRuleSurvivesCleanupWhileOwnedRulesGo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := startNetworkDev(t)
	c := e.d.client
	const covered = "github.com:443"
	e.sbx(t, "policy", "allow", "network", covered) // the operator's own global rule
	seeded := e.policyRules(t)
	agent := sandboxedAgent(t, c, "covered", domain.PlacementDedicated)
	room, session := roomWith(t, c, "lab", agent)
	awaitReply(t, c, postText(t, c, room.ID, "hello"), 60*time.Second)

	net := hostNetwork(t, e, session)
	ownedN := 0
	for _, en := range net.Entries {
		switch {
		case en.Target == covered && (en.State != domain.NetworkCoveredExternally || en.RuleID != ""):
			t.Fatalf("the pre-existing rule's target %+v", en)
		case en.Target != covered && en.State != domain.NetworkOwned:
			t.Fatalf("entry %+v", en)
		case en.State == domain.NetworkOwned:
			ownedN++
		}
	}
	if ownedN == 0 || len(e.policyRules(t)) != ownedN+1 {
		t.Fatalf("journal %+v, rules %+v", net.Entries, e.policyRules(t))
	}

	// Preserve the workspace, park, clean up.
	if _, err := workspaceOp(c, session, "archive", api.WorkspaceOpRequest{}); err != nil {
		t.Fatal(err)
	}
	awaitHostState(t, c, session, domain.HostParked, 30*time.Second)
	var cleaned struct {
		Cleanup domain.HostCleanupOperation `json:"cleanup"`
	}
	must(t, c.Operation(ctx, http.MethodPost, "/v1/hosts/"+session.String()+"/cleanup", api.CleanupRequest{ConfirmPermanent: true}, &cleaned, nil))
	if cleaned.Cleanup.Stage != domain.CleanupSucceeded {
		t.Fatalf("cleanup %+v", cleaned.Cleanup)
	}
	if left := e.policyRules(t); len(left) != 1 || left[0] != seeded[0] {
		t.Fatalf("rules after cleanup %+v, want only %+v", left, seeded)
	}
	if n := e.commands(t, "policy", ""); n == 0 || strings.Contains(readLog(t, e), "--id "+seeded[0].ID+"\n") {
		t.Fatalf("the covering rule was asked to be removed:\n%s", readLog(t, e))
	}
}

// A worker that dies between `sbx policy allow` and the journal write leaves a PendingAdd;
// the retried prepare resolves it by the one new rule beyond the baseline: one rule, not two.
func TestNetworkCrashBetweenAllowAndJournalConvergesOnOneRule(t *testing.T) {
	t.Parallel()
	const target = "github.com:443"
	e := startNetworkDev(t, "FAKESBX_ALLOWCRASH_ONCE="+target)
	c := e.d.client
	agent := sandboxedAgent(t, c, "crashy", domain.PlacementDedicated)
	room, session := roomWith(t, c, "lab", agent)
	awaitReply(t, c, postText(t, c, room.ID, "hello"), 90*time.Second)

	var mine []fakeRule
	for _, r := range e.policyRules(t) {
		if r.Resource == target {
			mine = append(mine, r)
		}
	}
	if len(mine) != 1 {
		t.Fatalf("rules for %s: %+v", target, mine)
	}
	for _, en := range hostNetwork(t, e, session).Entries {
		if en.Target == target && (en.State != domain.NetworkOwned || en.RuleID != mine[0].ID) {
			t.Fatalf("journal entry %+v, rule %+v", en, mine[0])
		}
	}
	if n := strings.Count(readLog(t, e), "policy allow network --sandbox "+hostsOf(t, c, agent)[0].SandboxName+" "+target+"\n"); n != 1 {
		t.Fatalf("%s was allowed %d times", target, n)
	}
}

// Organisation governance forbidding a target fails the prepare, non-retryably, with an
// error on the session that names the target; nothing starts.
func TestNetworkGovernanceDenialFailsThePrepareWithItsError(t *testing.T) {
	t.Parallel()
	const target = "pypi.org:443"
	e := startNetworkDev(t, "FAKESBX_GOVERNANCE_DENY="+target)
	c := e.d.client
	agent := sandboxedAgent(t, c, "governed", domain.PlacementDedicated)
	room, session := roomWith(t, c, "lab", agent)
	postText(t, c, room.ID, "hello")
	wait.Eventually(t, 60*time.Second, func() error {
		s := getSession(t, c, session)
		if s.Runtime != nil && strings.Contains(s.Runtime.LastError, target) && strings.Contains(s.Runtime.LastError, "governance") {
			if s.Presence == domain.PresenceLive {
				t.Fatalf("live despite the denial: %+v", s)
			}
			return nil
		}
		return fmt.Errorf("session %+v runtime %+v", s.Presence, s.Runtime)
	}, "the session to show the governance denial")
	for _, r := range e.policyRules(t) {
		if r.Resource == target {
			t.Fatalf("a rule for the denied target: %+v", r)
		}
	}
	if n := strings.Count(readLog(t, e), "policy allow network --sandbox "+hostsOf(t, c, agent)[0].SandboxName+" "+target); n != 0 {
		t.Fatalf("the denied target was asked for %d times", n)
	}
}

func readLog(t *testing.T, e sandboxEnv) string {
	t.Helper()
	b, _ := os.ReadFile(e.log)
	return string(b)
}
