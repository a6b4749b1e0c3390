package domain

import (
	"time"

	"github.com/google/uuid"
)

// ProviderCheckpoint is the record of one published checkpoint generation. It is immutable;
// only PayloadDeletedAt is ever set later (by checkpoint deletion), and the record itself is
// never deleted.
type ProviderCheckpoint struct {
	ID              uuid.UUID
	RuntimeHostID   uuid.UUID
	Reason          CheckpointReason
	Provider        Provider
	ProviderVersion string
	// Sessions are the runtime sessions captured, with their bound provider identities.
	Sessions         []CheckpointSession
	ManifestChecksum string
	PayloadBytes     int64
	PayloadDeletedAt *time.Time
	CreatedAt        time.Time
}

// CheckpointSession is one runtime session captured in a checkpoint.
type CheckpointSession struct {
	RuntimeSession    uuid.UUID `json:"runtime_session"`
	ProviderSessionID string    `json:"provider_session_id"`
}

// ResumeObservation is the immutable outcome of one exact-resume attempt from a checkpoint.
type ResumeObservation struct {
	ID                        uuid.UUID
	CheckpointID              uuid.UUID
	RuntimeSession            uuid.UUID
	ExpectedProviderSessionID string
	Outcome                   ResumeOutcome
	Detail                    string
	RecordedAt                time.Time
}
