package sandbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/sandbox"
	"github.com/jam-dev/jam/internal/testsupport/fakesbx"
)

func TestParsePolicyListAcceptsJSONAndTables(t *testing.T) {
	cases := []struct {
		name, out string
		want      []sandbox.PolicyRule
		err       bool
	}{
		{"fake JSON", `{"rules":[{"id":"rule-1","scope":"global","resource":"a.com:443"}]}`,
			[]sandbox.PolicyRule{{ID: "rule-1", Scope: "global", Resource: "a.com:443"}}, false},
		{"notice before JSON", "A new version is available.\n" + `{"rules":[]}`, []sandbox.PolicyRule{}, false},
		{"bare array", `[{"id":"7","resource":"b.org"}]`, []sandbox.PolicyRule{{ID: "7", Resource: "b.org"}}, false},
		{"text table", "ID       SCOPE   TYPE     RESOURCE\nr-1  global  network  a.com:443\nr-2  box  network  b.org\n",
			[]sandbox.PolicyRule{{ID: "r-1", Scope: "global", Resource: "a.com:443"}, {ID: "r-2", Scope: "box", Resource: "b.org"}}, false},
		{"empty", "", nil, false},
		{"table with a short row", "ID RESOURCE\nonly-id\n", nil, true},
		{"no header", "something went wrong\n", nil, true},
		{"id that reads as a flag", `{"rules":[{"id":"--all","resource":"x"}]}`, nil, true},
		{"object without rules", `{"policies":[]}`, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := sandbox.ParsePolicyList([]byte(c.out))
			if c.err {
				if !errors.Is(err, sandbox.ErrUnparsable) {
					t.Fatalf("err %v, want ErrUnparsable", err)
				}
				return
			}
			if err != nil || len(got) != len(c.want) || (len(got) > 0 && !slices.Equal(got, c.want)) {
				t.Fatalf("got %+v %v, want %+v", got, err, c.want)
			}
		})
	}
}

// netEnv is one fake sbx state reached by drivers with different injections.
type netEnv struct {
	t     *testing.T
	state string
	dir   string
}

func newNetEnv(t *testing.T) netEnv {
	return netEnv{t: t, state: t.TempDir(), dir: filepath.Join(t.TempDir(), "sandbox-owners")}
}

func (e netEnv) driver(extra ...string) *sandbox.Driver {
	e.t.Helper()
	d := &sandbox.Driver{Path: fakesbx.Binary(e.t), Env: append([]string{"FAKESBX_STATE=" + e.state, "PATH=" + os.Getenv("PATH")}, extra...)}
	if _, err := d.ProbeVersion(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	return d
}

func (e netEnv) journal(extra ...string) *sandbox.NetworkJournal {
	return &sandbox.NetworkJournal{Dir: e.dir, Driver: e.driver(extra...)}
}

// rules lists the fake's rules for resource ("" = all) visible to the sandbox.
func (e netEnv) rules(name, resource string) []sandbox.PolicyRule {
	e.t.Helper()
	all, err := e.driver().PolicyList(context.Background(), name)
	if err != nil {
		e.t.Fatal(err)
	}
	return slices.DeleteFunc(all, func(r sandbox.PolicyRule) bool { return resource != "" && r.Resource != resource })
}

func states(rules []domain.NetworkRule) map[string]domain.NetworkRuleState {
	m := map[string]domain.NetworkRuleState{}
	for _, r := range rules {
		m[r.Target] = r.State
	}
	return m
}

func TestTheNetworkJournalOwnsOnlyTheRulesItProvablyMade(t *testing.T) {
	const box = "jam-box"
	a, b := "registry.npmjs.org:443", "github.com:443"
	cases := []struct {
		name string
		run  func(t *testing.T, e netEnv)
	}{
		{"fresh targets become Owned, one rule each, in a private journal", func(t *testing.T, e netEnv) {
			got, err := e.journal().Reconcile(context.Background(), box, []string{a, b}, true)
			if err != nil || states(got)[a] != domain.NetworkOwned || states(got)[b] != domain.NetworkOwned {
				t.Fatalf("journal %+v %v", got, err)
			}
			if len(e.rules(box, a)) != 1 || len(e.rules(box, b)) != 1 {
				t.Fatalf("rules %+v", e.rules(box, ""))
			}
			st, err := os.Stat(filepath.Join(e.dir, box+sandbox.JournalSuffix))
			if err != nil || st.Mode().Perm() != 0o600 {
				t.Fatalf("journal file %v %v", st, err)
			}
			// A second reconcile changes nothing.
			if _, err := e.journal().Reconcile(context.Background(), box, []string{a, b}, true); err != nil || len(e.rules(box, "")) != 2 {
				t.Fatalf("again: %v %+v", err, e.rules(box, ""))
			}
		}},
		{"an allowed target is covered and its rule survives release", func(t *testing.T, e netEnv) {
			if err := e.driver().PolicyAllowNetwork(context.Background(), box, []string{a}); err != nil {
				t.Fatal(err)
			}
			j := e.journal()
			got, err := j.Reconcile(context.Background(), box, []string{a, b}, true)
			if err != nil || states(got)[a] != domain.NetworkCoveredExternally || states(got)[b] != domain.NetworkOwned {
				t.Fatalf("journal %+v %v", got, err)
			}
			if err := j.Release(context.Background(), box, false); err != nil {
				t.Fatal(err)
			}
			if len(e.rules(box, a)) != 1 || len(e.rules(box, b)) != 0 {
				t.Fatalf("after release %+v", e.rules(box, ""))
			}
			if _, err := os.Stat(filepath.Join(e.dir, box+sandbox.JournalSuffix)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("journal outlived release: %v", err)
			}
		}},
		{"a crash between the allow and the journal converges on one rule", func(t *testing.T, e netEnv) {
			_, err := e.journal("FAKESBX_FAIL=allowcrash").Reconcile(context.Background(), box, []string{a}, true)
			var cmd *sandbox.CommandError
			if !errors.As(err, &cmd) {
				t.Fatalf("crashed allow: %v", err)
			}
			if got, _ := e.journal().Read(box); states(got)[a] != domain.NetworkPendingAdd {
				t.Fatalf("journal after the crash %+v", got)
			}
			got, err := e.journal().Reconcile(context.Background(), box, []string{a}, true)
			if err != nil || states(got)[a] != domain.NetworkOwned || len(e.rules(box, a)) != 1 || got[0].RuleID != e.rules(box, a)[0].ID {
				t.Fatalf("recovered %+v %v; rules %+v", got, err, e.rules(box, ""))
			}
		}},
		{"two new rules beyond the baseline are ambiguous and none is claimed", func(t *testing.T, e netEnv) {
			_, _ = e.journal("FAKESBX_FAIL=allowcrash").Reconcile(context.Background(), box, []string{a}, true)
			if err := e.driver().PolicyAllowNetwork(context.Background(), box, []string{a}); err != nil {
				t.Fatal(err)
			}
			got, err := e.journal().Reconcile(context.Background(), box, []string{a}, true)
			if !errors.Is(err, sandbox.ErrNetworkAmbiguous) || states(got)[a] != domain.NetworkPendingAdd {
				t.Fatalf("journal %+v %v", got, err)
			}
			if err := e.journal().Release(context.Background(), box, false); !errors.Is(err, sandbox.ErrNetworkAmbiguous) || len(e.rules(box, a)) != 2 {
				t.Fatalf("release of an ambiguous entry: %v, rules %+v", err, e.rules(box, ""))
			}
		}},
		{"governance denial is classified, names the target and leaves no intent", func(t *testing.T, e netEnv) {
			for _, j := range []*sandbox.NetworkJournal{e.journal("FAKESBX_GOVERNANCE_DENY=" + b)} {
				got, err := j.Reconcile(context.Background(), box, []string{a, b}, true)
				var denied *sandbox.NetworkDeniedError
				if !errors.Is(err, sandbox.ErrNetworkDenied) || !errors.As(err, &denied) || denied.Target != b || !strings.Contains(err.Error(), b) {
					t.Fatalf("err %v", err)
				}
				if _, ok := states(got)[b]; ok || len(e.rules(box, b)) != 0 {
					t.Fatalf("journal %+v rules %+v", got, e.rules(box, ""))
				}
			}
		}},
		{"targets no longer wanted lose only Jam's rules", func(t *testing.T, e netEnv) {
			if _, err := e.journal().Reconcile(context.Background(), box, []string{a, b}, true); err != nil {
				t.Fatal(err)
			}
			got, err := e.journal().Reconcile(context.Background(), box, []string{a}, true)
			if err != nil || len(got) != 1 || len(e.rules(box, b)) != 0 || len(e.rules(box, a)) != 1 {
				t.Fatalf("journal %+v %v; rules %+v", got, err, e.rules(box, ""))
			}
			// Without prune nothing goes.
			if _, err := e.journal().Reconcile(context.Background(), box, nil, false); err != nil || len(e.rules(box, a)) != 1 {
				t.Fatalf("unpruned %v %+v", err, e.rules(box, ""))
			}
		}},
		{"an interrupted removal is finished and an Owned rule removed by someone is made again", func(t *testing.T, e netEnv) {
			got, err := e.journal().Reconcile(context.Background(), box, []string{a, b}, true)
			if err != nil {
				t.Fatal(err)
			}
			var rb string
			for _, r := range got {
				if r.Target == b {
					rb = r.RuleID
				}
			}
			doc, _ := json.Marshal(map[string]any{"sandbox": box, "rules": []domain.NetworkRule{
				{Target: b, State: domain.NetworkPendingRemove, RuleID: rb}}})
			if err := os.WriteFile(filepath.Join(e.dir, box+sandbox.JournalSuffix), doc, 0o600); err != nil {
				t.Fatal(err)
			}
			// The rule of a, now unjournaled, is not Jam's any more: it covers a.
			got, err = e.journal().Reconcile(context.Background(), box, []string{a}, true)
			if err != nil || len(e.rules(box, b)) != 0 || states(got)[a] != domain.NetworkCoveredExternally {
				t.Fatalf("journal %+v %v; rules %+v", got, err, e.rules(box, ""))
			}
			if _, err := e.journal().Reconcile(context.Background(), box, []string{b}, true); err != nil {
				t.Fatal(err)
			}
			owned := e.rules(box, b)
			if err := e.driver().PolicyRemoveNetworkID(context.Background(), box, owned[0].ID); err != nil {
				t.Fatal(err)
			}
			got, err = e.journal().Reconcile(context.Background(), box, []string{b}, true)
			if err != nil || states(got)[b] != domain.NetworkOwned || len(e.rules(box, b)) != 1 || e.rules(box, b)[0].ID == owned[0].ID {
				t.Fatalf("journal %+v %v; rules %+v", got, err, e.rules(box, ""))
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newNetEnv(t)) })
	}
}

func TestPolicyRulesAreScopedAndIDsNeverReused(t *testing.T) {
	ctx := context.Background()
	e := newNetEnv(t)
	d := e.driver()
	for _, box := range []string{"box-one", "box-two"} {
		if err := d.PolicyAllowNetwork(ctx, box, []string{"a.com:443"}); err != nil {
			t.Fatal(err)
		}
	}
	one := e.rules("box-one", "")
	if len(one) != 1 || one[0].Scope != "box-one" {
		t.Fatalf("box-one sees %+v", one)
	}
	if err := d.PolicyRemoveNetworkID(ctx, "box-one", one[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := d.PolicyAllowNetwork(ctx, "box-one", []string{"b.com:443"}); err != nil {
		t.Fatal(err)
	}
	if again := e.rules("box-one", ""); len(again) != 1 || again[0].ID == one[0].ID || again[0].ID == e.rules("box-two", "")[0].ID {
		t.Fatalf("ids reused: before %+v now %+v", one, again)
	}
}

func TestReadinessChecksBoundedAndClassified(t *testing.T) {
	e := newNetEnv(t)
	d := e.driver("FAKESBX_GOVERNANCE_DENY=blocked.example:443")
	if err := d.PolicyAllowNetwork(context.Background(), "box", []string{"ok.example:443"}); err != nil {
		t.Fatal(err)
	}
	targets := []string{"ok.example:443", "no.example:443", "blocked.example:443"}
	for len(targets) < domain.MaxNetworkPolicyTargets+2 {
		targets = append(targets, "no.example:443")
	}
	got := d.Readiness(context.Background(), "box", targets)
	want := []domain.NetworkReadiness{domain.NetworkAllowed, domain.NetworkDenied, domain.NetworkGovernanceDenied}
	for i, w := range want {
		if got[i].Result != w {
			t.Fatalf("%s: %s, want %s", got[i].Target, got[i].Result, w)
		}
	}
	if got[len(got)-1].Result != domain.NetworkCheckNotAttempted || got[domain.MaxNetworkPolicyTargets-1].Result != domain.NetworkDenied {
		t.Fatalf("the bound: %+v", got[domain.MaxNetworkPolicyTargets-1:])
	}
}
