package domain

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"github.com/google/uuid"
)

// SessionContinuity is what Jam knows of whether a session's provider thread can be resumed:
// the evidence an operator confirms (by its checksum) before starting the session fresh.
type SessionContinuity struct {
	RuntimeSession    uuid.UUID
	ProviderSessionID string
	ResumePolicy      ResumePolicy
	// Failure is the start failure the session holds in (nil when none).
	Failure *RuntimeFailure
	// CanStartFresh: the session failed closed because its thread cannot be resumed exactly,
	// and no runtime of it runs.
	CanStartFresh    bool
	EvidenceChecksum string
}

// evidenceSchema versions the checksum's input, so a change of what it covers never lets an
// old checksum confirm new evidence.
const evidenceSchema = "jam-session-continuity-evidence-v1"

// SessionEvidence is a host-native session's continuity evidence as of its record.
func SessionEvidence(session uuid.UUID, providerSession string, policy ResumePolicy, failure *RuntimeFailure) SessionContinuity {
	c := SessionContinuity{RuntimeSession: session, ProviderSessionID: providerSession, ResumePolicy: policy, Failure: failure}
	if c.ResumePolicy == "" {
		c.ResumePolicy = ResumeExact
	}
	c.CanStartFresh = failure != nil && failure.Class == FailureExactResumeUnavailable && providerSession != ""
	parts := []string{evidenceSchema, session.String(), providerSession}
	if failure != nil {
		parts = append(parts, string(failure.Class), failure.Reason, failure.At.UTC().Format(time.RFC3339Nano))
	}
	sum := sha256.Sum256([]byte(strings.Join(parts, "\n")))
	c.EvidenceChecksum = hex.EncodeToString(sum[:])
	return c
}
