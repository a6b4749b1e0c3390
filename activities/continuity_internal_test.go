package activities

import (
	"testing"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/checkpoint"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// The reference's rule order, with issue 17's version check: a provider upgraded since the
// newest checkpoint is reported, unless the upgraded provider already resumed from it.
func TestContinuityStatusReportsAProviderVersionChange(t *testing.T) {
	id := uuid.New()
	report := func(cpVersion string, s contract.ContinuitySession) contract.ContinuityReport {
		s.RuntimeSession, s.ProviderSessionID, s.Captured = uuid.New(), "ses_1", true
		return contract.ContinuityReport{Checkpoint: &id, CheckpointState: string(checkpoint.StatusComplete),
			CheckpointProviderVersion: cpVersion, Sessions: []contract.ContinuitySession{s}}
	}
	failed := &contract.ResumeEvidence{Outcome: domain.ResumeFailed}
	succeeded := &contract.ResumeEvidence{Outcome: domain.ResumeSucceeded}
	for _, tc := range []struct {
		name string
		r    contract.ContinuityReport
		want domain.ContinuityStatus
	}{
		{"same version", report("1.18.33", contract.ContinuitySession{ProviderVersion: "1.18.33"}), domain.ContinuityHealthy},
		{"checkpoint version unknown", report("", contract.ContinuitySession{ProviderVersion: "1.19.0"}), domain.ContinuityHealthy},
		{"session version unknown", report("1.18.33", contract.ContinuitySession{}), domain.ContinuityHealthy},
		{"upgraded, not yet resumed", report("1.18.33", contract.ContinuitySession{ProviderVersion: "1.19.0"}), domain.ContinuityProviderVersionMismatch},
		{"upgraded and the resume failed", report("1.18.33", contract.ContinuitySession{ProviderVersion: "1.19.0", LastResume: failed}), domain.ContinuityProviderVersionMismatch},
		{"upgraded and resumed", report("1.18.33", contract.ContinuitySession{ProviderVersion: "1.19.0", LastResume: succeeded}), domain.ContinuityHealthy},
		{"same version, the resume failed", report("1.18.33", contract.ContinuitySession{ProviderVersion: "1.18.33", LastResume: failed}), domain.ContinuityResumeFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := continuityStatus(tc.r); got != tc.want {
				t.Fatalf("status %s, want %s", got, tc.want)
			}
		})
	}
}
