package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/privatefile"
)

// ErrNetworkDenied: the organisation's governance forbids a target; no rule can allow it.
var ErrNetworkDenied = errors.New("network target denied by organisation governance")

// ErrNetworkAmbiguous: a policy mutation left more than one candidate rule, so Jam cannot
// tell which one it made and claims none.
var ErrNetworkAmbiguous = errors.New("network policy is ambiguous")

// NetworkDeniedError names the sandbox and the target governance forbids.
type NetworkDeniedError struct{ Sandbox, Target string }

func (e *NetworkDeniedError) Error() string {
	return fmt.Sprintf("sandbox %s may not reach %s: the organisation's governance policy forbids it", e.Sandbox, e.Target)
}

func (e *NetworkDeniedError) Unwrap() error { return ErrNetworkDenied }

// NetworkJournal keeps, per sandbox, the private journal of the network rules Jam asked
// for (<Dir>/<name>.network-policy, mode 0600, replaced whole), so Jam removes only rules it
// proved it created and a crash mid-mutation converges on one rule, never two.
type NetworkJournal struct {
	Dir    string
	Driver *Driver
}

type journalDoc struct {
	Sandbox string               `json:"sandbox"`
	Rules   []domain.NetworkRule `json:"rules"`
}

// JournalSuffix ends a journal's file name (owner markers end in .json, so the two never mix).
const JournalSuffix = ".network-policy"

func (j *NetworkJournal) path(name string) (string, error) {
	if err := ValidateName(name); err != nil {
		return "", err
	}
	return filepath.Join(j.Dir, name+JournalSuffix), nil
}

// Read returns the sandbox's journal entries; none when it has no journal.
func (j *NetworkJournal) Read(name string) ([]domain.NetworkRule, error) {
	p, err := j.path(name)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("network journal of %s: %w", name, err)
	}
	var doc journalDoc
	if err := json.Unmarshal(b, &doc); err != nil || doc.Sandbox != name {
		return nil, fmt.Errorf("network journal of %s is unreadable: %w", name, errors.Join(ErrUnparsable, err))
	}
	for _, r := range doc.Rules {
		if !domain.NetworkRuleStates.Has(r.State) {
			return nil, fmt.Errorf("network journal of %s: %w: state %q", name, ErrUnparsable, r.State)
		}
	}
	return doc.Rules, nil
}

// journal is one sandbox's entries while the lock is held; every change is written (and
// synced) before the `sbx` command it announces runs.
type journal struct {
	j     *NetworkJournal
	name  string
	rules []domain.NetworkRule
}

func (jl *journal) get(target string) (domain.NetworkRule, bool) {
	for _, r := range jl.rules {
		if r.Target == target {
			return r, true
		}
	}
	return domain.NetworkRule{}, false
}

// set records r (replacing its target's entry) or, with drop, forgets the target.
func (jl *journal) set(r domain.NetworkRule, drop bool) error {
	jl.rules = slices.DeleteFunc(jl.rules, func(e domain.NetworkRule) bool { return e.Target == r.Target })
	if !drop {
		jl.rules = append(jl.rules, r)
	}
	p, err := jl.j.path(jl.name)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(jl.j.Dir, 0o700); err != nil {
		return fmt.Errorf("network journal directory: %w", err)
	}
	b, err := json.MarshalIndent(journalDoc{Sandbox: jl.name, Rules: append([]domain.NetworkRule{}, jl.rules...)}, "", "  ")
	if err != nil {
		return err
	}
	if err := privatefile.Replace(p, b); err != nil {
		return fmt.Errorf("network journal of %s: %w", jl.name, err)
	}
	return nil
}

// open takes the node's journal lock (a flock on the directory: one journal mutation at a
// time across activities and processes) and reads the sandbox's journal.
func (j *NetworkJournal) open(ctx context.Context, name string) (*journal, func(), error) {
	if err := os.MkdirAll(j.Dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("network journal directory: %w", err)
	}
	dir, err := os.Open(j.Dir)
	if err != nil {
		return nil, nil, fmt.Errorf("network journal directory: %w", err)
	}
	for {
		err := syscall.Flock(int(dir.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			dir.Close()
			return nil, nil, fmt.Errorf("lock network journals: %w", err)
		}
		select {
		case <-ctx.Done():
			dir.Close()
			return nil, nil, fmt.Errorf("lock network journals: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	unlock := func() { dir.Close() } // closing the descriptor drops the flock
	rules, err := j.Read(name)
	if err != nil {
		unlock()
		return nil, nil, err
	}
	return &journal{j: j, name: name, rules: rules}, unlock, nil
}

// Reconcile gives the sandbox the wanted targets: pending entries are resolved first; with
// prune, Owned rules of targets no longer wanted are removed (and covered ones forgotten).
// It returns the journal as it stands.
func (j *NetworkJournal) Reconcile(ctx context.Context, name string, want []string, prune bool) ([]domain.NetworkRule, error) {
	want = slices.Compact(slices.Sorted(slices.Values(want)))
	if len(want) > domain.MaxNetworkPolicyTargets {
		return nil, &domain.ValidationError{Field: "targets", Detail: fmt.Sprintf("at most %d network targets", domain.MaxNetworkPolicyTargets)}
	}
	if len(want) > 0 {
		if err := validTargets(want); err != nil {
			return nil, err
		}
	}
	jl, unlock, err := j.open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := jl.recover(ctx); err != nil {
		return jl.rules, err
	}
	if prune {
		for _, r := range slices.Clone(jl.rules) {
			if slices.Contains(want, r.Target) {
				continue
			}
			if err := jl.remove(ctx, r); err != nil {
				return jl.rules, err
			}
		}
	}
	var live []PolicyRule
	if slices.ContainsFunc(jl.rules, func(r domain.NetworkRule) bool { return r.State == domain.NetworkOwned }) {
		if live, err = j.Driver.PolicyList(ctx, name); err != nil {
			return jl.rules, fmt.Errorf("list network rules of %s: %w", name, err)
		}
	}
	for _, t := range want {
		if err := jl.ensure(ctx, t, live); err != nil {
			return jl.rules, err
		}
	}
	return jl.rules, nil
}

// recover finishes what a crash interrupted: a PendingRemove is removed, a PendingAdd is
// resolved by the exactly-one-new-rule test (and dropped when its allow never landed).
func (jl *journal) recover(ctx context.Context) error {
	for _, r := range slices.Clone(jl.rules) {
		switch r.State {
		case domain.NetworkPendingRemove:
			if err := jl.remove(ctx, r); err != nil {
				return err
			}
		case domain.NetworkPendingAdd:
			if _, err := jl.resolve(ctx, r, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// ensure makes target reachable, by Jam's own rule only when nothing else allows it. live
// is the sandbox's listed rules (for Owned entries; nil when none).
func (jl *journal) ensure(ctx context.Context, target string, live []PolicyRule) error {
	name, d := jl.name, jl.j.Driver
	if r, ok := jl.get(target); ok {
		switch r.State {
		case domain.NetworkOwned:
			if slices.ContainsFunc(live, func(p PolicyRule) bool { return p.ID == r.RuleID }) {
				return nil
			}
			// Someone removed Jam's rule: forget it and ask again.
		case domain.NetworkCoveredExternally:
			dec, err := d.PolicyCheck(ctx, name, target)
			if err != nil {
				return fmt.Errorf("check sandbox %s may reach %s: %w", name, target, err)
			}
			if dec.Governance {
				return &NetworkDeniedError{Sandbox: name, Target: target}
			}
			if dec.Allowed {
				return nil
			}
			// The covering rule went: Jam needs its own.
		}
		if err := jl.set(r, true); err != nil {
			return err
		}
	}
	dec, err := d.PolicyCheck(ctx, name, target)
	if err != nil {
		return fmt.Errorf("check sandbox %s may reach %s: %w", name, target, err)
	}
	if dec.Governance {
		return &NetworkDeniedError{Sandbox: name, Target: target}
	}
	if dec.Allowed {
		return jl.set(domain.NetworkRule{Target: target, State: domain.NetworkCoveredExternally}, false)
	}
	rules, err := d.PolicyList(ctx, name)
	if err != nil {
		return fmt.Errorf("list network rules of %s: %w", name, err)
	}
	pending := domain.NetworkRule{Target: target, State: domain.NetworkPendingAdd, BaselineRuleIDs: ruleIDs(rules)}
	if err := jl.set(pending, false); err != nil {
		return err
	}
	if err := d.PolicyAllowNetwork(ctx, name, []string{target}); err != nil {
		if dec, cerr := d.PolicyCheck(ctx, name, target); cerr == nil && dec.Governance {
			if _, rerr := jl.resolve(ctx, pending, true); rerr != nil {
				return rerr
			}
			return &NetworkDeniedError{Sandbox: name, Target: target}
		}
		// The intent stays: the next reconcile resolves it against the baseline.
		return fmt.Errorf("allow sandbox %s to reach %s: %w", name, target, err)
	}
	state, err := jl.resolve(ctx, pending, false)
	if err != nil {
		return err
	}
	if state == "" {
		return fmt.Errorf("allow sandbox %s to reach %s: sbx reported success, yet no rule appeared and the target is not allowed", name, target)
	}
	return nil
}

// resolve settles a PendingAdd: exactly one new rule for the target beyond the baseline is
// Jam's (Owned); none, with the target allowed, is CoveredExternally; none otherwise means
// the allow never landed (dropped when dropUnlanded, else left pending; state ""); two or
// more is ambiguous and nothing is claimed.
func (jl *journal) resolve(ctx context.Context, r domain.NetworkRule, dropUnlanded bool) (domain.NetworkRuleState, error) {
	name, d := jl.name, jl.j.Driver
	rules, err := d.PolicyList(ctx, name)
	if err != nil {
		return "", fmt.Errorf("list network rules of %s: %w", name, err)
	}
	var fresh []string
	for _, p := range rules {
		// A new rule for another resource is someone else's concurrent change, not ours.
		if !slices.Contains(r.BaselineRuleIDs, p.ID) && (p.Resource == "" || p.Resource == r.Target) {
			fresh = append(fresh, p.ID)
		}
	}
	switch {
	case len(fresh) == 1:
		return domain.NetworkOwned, jl.set(domain.NetworkRule{Target: r.Target, State: domain.NetworkOwned, RuleID: fresh[0]}, false)
	case len(fresh) > 1:
		return "", fmt.Errorf("%w: sandbox %s has %d new rules for %s beyond the recorded baseline; none is claimed",
			ErrNetworkAmbiguous, name, len(fresh), r.Target)
	}
	dec, err := d.PolicyCheck(ctx, name, r.Target)
	if err != nil {
		return "", fmt.Errorf("check sandbox %s may reach %s: %w", name, r.Target, err)
	}
	if dec.Allowed {
		return domain.NetworkCoveredExternally, jl.set(domain.NetworkRule{Target: r.Target, State: domain.NetworkCoveredExternally}, false)
	}
	if dropUnlanded {
		return "", jl.set(r, true)
	}
	return "", nil
}

// remove ends Jam's part in a target: an Owned (or PendingRemove) rule is removed by its id
// after the intent is recorded; anything else is only forgotten.
func (jl *journal) remove(ctx context.Context, r domain.NetworkRule) error {
	switch r.State {
	case domain.NetworkPendingAdd:
		state, err := jl.resolve(ctx, r, true)
		if err != nil {
			return err
		}
		cur, ok := jl.get(r.Target)
		if state != domain.NetworkOwned {
			if ok {
				return jl.set(cur, true)
			}
			return nil
		}
		r = cur
	case domain.NetworkCoveredExternally:
		return jl.set(r, true)
	}
	r.State = domain.NetworkPendingRemove
	if err := jl.set(r, false); err != nil {
		return err
	}
	if err := jl.j.Driver.PolicyRemoveNetworkID(ctx, jl.name, r.RuleID); err != nil {
		// Gone already (an operator removed it) is removed.
		rules, lerr := jl.j.Driver.PolicyList(ctx, jl.name)
		if lerr != nil || slices.ContainsFunc(rules, func(p PolicyRule) bool { return p.ID == r.RuleID }) {
			return fmt.Errorf("remove network rule %s (%s) of sandbox %s: %w", r.RuleID, r.Target, jl.name, err)
		}
	}
	return jl.set(r, true)
}

// Release removes every rule Jam owns in the sandbox (resolving pending entries first) and
// then the journal; covering rules are never touched. With gone (Docker no longer has the
// sandbox, and with it its rules) a failed removal does not keep the journal.
func (j *NetworkJournal) Release(ctx context.Context, name string, gone bool) error {
	p, err := j.path(name)
	if err != nil {
		return err
	}
	if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	jl, unlock, err := j.open(ctx, name)
	if err != nil {
		return err
	}
	defer unlock()
	for _, r := range slices.Clone(jl.rules) {
		if err := jl.remove(ctx, r); err != nil && !gone {
			return err
		}
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("network journal of %s: %w", name, err)
	}
	return nil
}

func ruleIDs(rules []PolicyRule) []string {
	out := make([]string, 0, len(rules))
	for _, r := range rules {
		out = append(out, r.ID)
	}
	return out
}

// Readiness bounds (the reference's network_policy_readiness).
const (
	ReadinessConcurrency = 8
	ReadinessTimeout     = 15 * time.Second
)

// TargetReadiness is what one read-only check found.
type TargetReadiness struct {
	Target string                  `json:"target"`
	Result domain.NetworkReadiness `json:"result"`
}

// Readiness checks, read-only, whether the sandbox may reach each target under the effective
// policy: at most MaxNetworkPolicyTargets (the rest not_checked), ReadinessConcurrency at a
// time, all within ReadinessTimeout; a check that fails or runs out of time is unavailable.
func (d *Driver) Readiness(ctx context.Context, name string, targets []string) []TargetReadiness {
	ctx, cancel := context.WithTimeout(ctx, ReadinessTimeout)
	defer cancel()
	out := make([]TargetReadiness, len(targets))
	sem := make(chan struct{}, ReadinessConcurrency)
	var wg sync.WaitGroup
	for i, t := range targets {
		out[i] = TargetReadiness{Target: t, Result: domain.NetworkCheckNotAttempted}
		if i >= domain.MaxNetworkPolicyTargets {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				out[i].Result = domain.NetworkCheckUnavailable
				return
			}
			defer func() { <-sem }()
			dec, err := d.PolicyCheck(ctx, name, t)
			switch {
			case err != nil:
				out[i].Result = domain.NetworkCheckUnavailable
			case dec.Governance:
				out[i].Result = domain.NetworkGovernanceDenied
			case dec.Allowed:
				out[i].Result = domain.NetworkAllowed
			default:
				out[i].Result = domain.NetworkDenied
			}
		}()
	}
	wg.Wait()
	return out
}
