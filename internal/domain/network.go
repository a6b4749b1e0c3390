package domain

import "slices"

// developerNetworkTargets are the reviewed destinations a Developer sandbox reaches: the
// package registries and the git host, HTTPS only (port 443).
var developerNetworkTargets = []string{
	"registry.npmjs.org:443",
	"pypi.org:443",
	"files.pythonhosted.org:443",
	"proxy.golang.org:443",
	"sum.golang.org:443",
	"github.com:443",
	"api.github.com:443",
	"codeload.github.com:443",
	"objects.githubusercontent.com:443",
}

// NetworkTargets is what a sandbox of profile p needs beyond Jam's own targets. Production
// needs none; an empty profile is the default, Developer.
func NetworkTargets(p NetworkProfile) []string {
	switch p {
	case NetworkProduction:
		return nil
	default:
		return slices.Clone(developerNetworkTargets)
	}
}

// MaxNetworkPolicyTargets bounds a readiness probe, and the targets one sandbox is given.
const MaxNetworkPolicyTargets = 64

// NetworkRuleState is the state of one target in a sandbox's private network journal.
type NetworkRuleState string

const (
	// NetworkPendingAdd: the intent was recorded before `sbx policy allow`; the baseline is
	// the rule ids the sandbox had then.
	NetworkPendingAdd NetworkRuleState = "pending_add"
	// NetworkOwned: Jam created exactly this rule and may remove only it.
	NetworkOwned NetworkRuleState = "owned"
	// NetworkCoveredExternally: the effective policy already allowed the target; the covering
	// rule is never Jam's to remove.
	NetworkCoveredExternally NetworkRuleState = "covered_externally"
	// NetworkPendingRemove: the intent was recorded before `sbx policy rm`.
	NetworkPendingRemove NetworkRuleState = "pending_remove"
)

var NetworkRuleStates = NewEnum("network_rule_state", NetworkPendingAdd, NetworkOwned, NetworkCoveredExternally, NetworkPendingRemove)

func (v *NetworkRuleState) UnmarshalText(b []byte) error {
	return unmarshalEnum(NetworkRuleStates, b, v)
}

// NetworkRule is one journal entry.
type NetworkRule struct {
	Target string           `json:"target"`
	State  NetworkRuleState `json:"state"`
	// RuleID is the rule Jam owns (Owned, PendingRemove).
	RuleID string `json:"rule_id,omitempty"`
	// BaselineRuleIDs are the rules the sandbox had before the allow (PendingAdd).
	BaselineRuleIDs []string `json:"baseline_rule_ids,omitempty"`
}

// NetworkReadiness is what a read-only check of one target found.
type NetworkReadiness string

const (
	NetworkAllowed           NetworkReadiness = "allowed"
	NetworkDenied            NetworkReadiness = "denied"
	NetworkGovernanceDenied  NetworkReadiness = "governance_denied"
	NetworkCheckUnavailable  NetworkReadiness = "unavailable"
	NetworkCheckNotAttempted NetworkReadiness = "not_checked"
)

var NetworkReadinesses = NewEnum("network_readiness", NetworkAllowed, NetworkDenied, NetworkGovernanceDenied,
	NetworkCheckUnavailable, NetworkCheckNotAttempted)

func (v *NetworkReadiness) UnmarshalText(b []byte) error {
	return unmarshalEnum(NetworkReadinesses, b, v)
}
