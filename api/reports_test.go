package api

import (
	"reflect"
	"slices"
	"testing"

	"github.com/jam-dev/jam/internal/contract"
)

// TestReportBodiesMapEveryContractField: each REST report body is its own type, mapped field
// by field; a field added to the contract type without a mapping (or dropped) shows up here.
func TestReportBodiesMapEveryContractField(t *testing.T) {
	for _, pair := range []struct {
		name           string
		contract, rest any
	}{
		{"HostLeaseBody", contract.RuntimeHostStatus{}, HostLeaseBody{}},
		{"ContinuityReportBody", contract.ContinuityReport{}, ContinuityReportBody{}},
		{"ContinuitySessionBody", contract.ContinuitySession{}, ContinuitySessionBody{}},
		{"ResumeEvidenceBody", contract.ResumeEvidence{}, ResumeEvidenceBody{}},
		{"NodeReportBody", contract.NodeReport{}, NodeReportBody{}},
		{"CleanupReportBody", contract.CleanupReport{}, CleanupReportBody{}},
		{"CleanupMemberBody", contract.CleanupMember{}, CleanupMemberBody{}},
		{"CleanupSandboxBody", contract.CleanupSandbox{}, CleanupSandboxBody{}},
		{"RemovalReportBody", contract.RemovalReport{}, RemovalReportBody{}},
		{"HostControlResult", contract.ControlResult{}, HostControlResult{}},
		{"HostControlMember", contract.ControlMember{}, HostControlMember{}},
		{"HostCleanupResultBody", contract.HostCleanupResult{}, HostCleanupResultBody{}},
	} {
		if c, r := jsonTags(pair.contract), jsonTags(pair.rest); !slices.Equal(c, r) {
			t.Errorf("%s has fields %v; the contract's type has %v", pair.name, r, c)
		}
	}
}

func jsonTags(v any) []string {
	var out []string
	rt := reflect.TypeOf(v)
	for i := range rt.NumField() {
		out = append(out, rt.Field(i).Tag.Get("json"))
	}
	return out
}
