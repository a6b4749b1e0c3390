package domain

import (
	"time"

	"github.com/google/uuid"
)

// ContinuityStatus is what continuity inspection concludes about a runtime host: whether
// every bound provider session can be resumed exactly from its newest checkpoint.
type ContinuityStatus string

const (
	ContinuityHealthy ContinuityStatus = "healthy"
	// ContinuityMissing: a session is bound to a provider identity but no checkpoint exists.
	ContinuityMissing ContinuityStatus = "missing"
	// ContinuityCorrupt: the newest checkpoint does not verify on disk.
	ContinuityCorrupt ContinuityStatus = "corrupt"
	// ContinuitySessionNotCaptured: a bound session is not in the newest checkpoint.
	ContinuitySessionNotCaptured ContinuityStatus = "session_not_captured"
	// ContinuityProviderVersionMismatch: the newest checkpoint was taken by another provider
	// version than the one that would resume it (both known).
	ContinuityProviderVersionMismatch ContinuityStatus = "provider_version_mismatch"
	// ContinuityResumeFailed: the latest resume of a session from the newest checkpoint failed.
	ContinuityResumeFailed ContinuityStatus = "resume_failed"
)

var ContinuityStatuses = NewEnum("continuity_status", ContinuityHealthy, ContinuityMissing, ContinuityCorrupt,
	ContinuitySessionNotCaptured, ContinuityProviderVersionMismatch, ContinuityResumeFailed)

func (v *ContinuityStatus) UnmarshalText(b []byte) error {
	return unmarshalEnum(ContinuityStatuses, b, v)
}

// ContinuityReset is the immutable record of an explicit start-fresh: every session of the
// source runtime host and its room binding, each mapped to a newly minted replacement. It is
// written before anything changes and replayed until done; nothing is deleted.
type ContinuityReset struct {
	ID               uuid.UUID           `json:"id"`
	SourceHost       uuid.UUID           `json:"source_runtime_host_id"`
	EvidenceChecksum string              `json:"evidence_checksum"`
	Mapping          []ContinuityMapping `json:"mapping"`
	CreatedAt        time.Time           `json:"created_at"`
}

// ContinuityMapping is one source session and binding with their replacements.
type ContinuityMapping struct {
	SourceSession      uuid.UUID `json:"source_runtime_session_id"`
	SourceBinding      uuid.UUID `json:"source_binding_id"`
	ReplacementSession uuid.UUID `json:"replacement_runtime_session_id"`
	ReplacementBinding uuid.UUID `json:"replacement_binding_id"`
	AgentID            uuid.UUID `json:"agent_id"`
	RoomID             uuid.UUID `json:"room_id"`
	// Active: the room binding was active (a tombstone's replacement is a tombstone too).
	Active bool `json:"active"`
}
