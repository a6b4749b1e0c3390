package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// PolicyRule is one network rule `sbx policy ls` shows. Resource may be "" when the listing
// does not say.
type PolicyRule struct {
	ID       string `json:"id"`
	Scope    string `json:"scope,omitempty"`
	Resource string `json:"resource,omitempty"`
}

// PolicyDecision is the effective policy for one target.
type PolicyDecision struct {
	Allowed bool
	// Governance: the organisation's governance forbids the target; no rule of the
	// sandbox's can allow it.
	Governance bool
}

// PolicyCheck asks the effective policy about target (`sbx policy check network --json`).
func (d *Driver) PolicyCheck(ctx context.Context, name, target string) (PolicyDecision, error) {
	if err := validTargets([]string{target}); err != nil {
		return PolicyDecision{}, err
	}
	args, err := d.policyArgs("check", name, "--json", target)
	if err != nil {
		return PolicyDecision{}, err
	}
	out, err := d.run(ctx, PolicyCheckTimeout, nil, args...)
	if err != nil {
		return PolicyDecision{}, err
	}
	return parsePolicyCheck(out)
}

func parsePolicyCheck(out []byte) (PolicyDecision, error) {
	var res struct {
		Allowed    *bool  `json:"allowed"`
		Governance string `json:"governance"`
	}
	if err := json.Unmarshal(lastJSONLine(out), &res); err != nil || res.Allowed == nil {
		return PolicyDecision{}, fmt.Errorf("%w: policy check printed %q", ErrUnparsable, truncate(out))
	}
	g := strings.ToLower(res.Governance)
	denied := g == "denied" || g == "forbidden" || g == "blocked"
	return PolicyDecision{Allowed: *res.Allowed && !denied, Governance: denied}, nil
}

// PolicyList lists the network rules that apply to the sandbox, its own and global ones
// (`sbx policy ls network`), in the JSON the release prints or its text table.
func (d *Driver) PolicyList(ctx context.Context, name string) ([]PolicyRule, error) {
	args, err := d.policyArgs("ls", name)
	if err != nil {
		return nil, err
	}
	out, err := d.run(ctx, ReadOnlyTimeout, nil, args...)
	if err != nil {
		return nil, err
	}
	return ParsePolicyList(out)
}

// PolicyRemoveNetworkID removes exactly one rule by its id (`sbx policy rm network --id`).
func (d *Driver) PolicyRemoveNetworkID(ctx context.Context, name, id string) error {
	if !ruleID.MatchString(id) {
		return fmt.Errorf("%w: rule id %q", ErrUnparsable, truncate([]byte(id)))
	}
	args, err := d.policyArgs("rm", name, "--id", id)
	if err != nil {
		return err
	}
	_, err = d.run(ctx, LifecycleTimeout, nil, args...)
	return err
}

// ruleID is what Jam accepts as a rule id: nothing the CLI could read as a flag.
var ruleID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// ParsePolicyList reads `sbx policy ls` output: {"rules":[...]} or a bare array (notice
// lines may precede either), or a text table with an ID and a RESOURCE column. Rows without a
// usable id are an error: a rule Jam cannot name would hide from the baseline.
func ParsePolicyList(out []byte) ([]PolicyRule, error) {
	trimmed := bytes.TrimSpace(out)
	if len(trimmed) == 0 {
		return nil, nil
	}
	if body := lastJSONStart(trimmed); body != nil {
		var rules []PolicyRule
		if body[0] == '[' {
			if err := json.Unmarshal(body, &rules); err != nil {
				return nil, fmt.Errorf("%w: policy ls printed %q", ErrUnparsable, truncate(out))
			}
		} else {
			var obj struct {
				Rules *[]PolicyRule `json:"rules"`
			}
			if err := json.Unmarshal(body, &obj); err != nil || obj.Rules == nil {
				return nil, fmt.Errorf("%w: policy ls printed %q", ErrUnparsable, truncate(out))
			}
			rules = *obj.Rules
		}
		for _, r := range rules {
			if !ruleID.MatchString(r.ID) {
				return nil, fmt.Errorf("%w: policy ls listed a rule without a usable id", ErrUnparsable)
			}
		}
		return rules, nil
	}
	return parsePolicyTable(trimmed)
}

// lastJSONStart is the JSON document that starts on the last line beginning with { or [.
func lastJSONStart(out []byte) []byte {
	lines := bytes.Split(out, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		if l := bytes.TrimSpace(lines[i]); len(l) > 0 && (l[0] == '{' || l[0] == '[') {
			return bytes.TrimSpace(bytes.Join(lines[i:], []byte("\n")))
		}
	}
	return nil
}

func parsePolicyTable(out []byte) ([]PolicyRule, error) {
	lines := strings.Split(string(out), "\n")
	idCol, resCol, scopeCol, header := -1, -1, -1, -1
	for i, l := range lines {
		for j, f := range strings.Fields(l) {
			switch strings.ToUpper(f) {
			case "ID", "RULE", "RULE_ID":
				idCol = j
			case "RESOURCE", "RESOURCES", "TARGET":
				resCol = j
			case "SCOPE", "SANDBOX":
				scopeCol = j
			}
		}
		if idCol >= 0 && resCol >= 0 {
			header = i
			break
		}
		idCol, resCol, scopeCol = -1, -1, -1
	}
	if header < 0 {
		return nil, fmt.Errorf("%w: policy ls printed %q", ErrUnparsable, truncate(out))
	}
	var rules []PolicyRule
	for _, l := range lines[header+1:] {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if len(f) <= max(idCol, resCol) || !ruleID.MatchString(f[idCol]) {
			return nil, fmt.Errorf("%w: policy ls row %q", ErrUnparsable, truncate([]byte(l)))
		}
		r := PolicyRule{ID: f[idCol], Resource: f[resCol]}
		if scopeCol >= 0 && scopeCol < len(f) {
			r.Scope = f[scopeCol]
		}
		rules = append(rules, r)
	}
	return rules, nil
}
