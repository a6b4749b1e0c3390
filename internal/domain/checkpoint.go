package domain

import (
	"fmt"
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

// DeletionStage is the forward-only progress of deleting one checkpoint's payload.
type DeletionStage string

const (
	DeletionPrepared       DeletionStage = "prepared"
	DeletionPayloadRemoved DeletionStage = "payload_removed"
	DeletionSucceeded      DeletionStage = "succeeded"
)

var DeletionStages = NewEnum("stage", DeletionPrepared, DeletionPayloadRemoved, DeletionSucceeded)

func (v *DeletionStage) UnmarshalText(b []byte) error { return unmarshalEnum(DeletionStages, b, v) }

// CheckpointDeletion is the record of deleting one checkpoint's payload, persisted before
// the payload goes. Its id is the checkpoint's.
type CheckpointDeletion struct {
	CheckpointID  uuid.UUID     `json:"checkpoint_id"`
	RuntimeHostID uuid.UUID     `json:"runtime_host_id"`
	Stage         DeletionStage `json:"stage"`
	CreatedAt     time.Time     `json:"created_at"`
	UpdatedAt     time.Time     `json:"updated_at"`
}

// CheckCheckpointDeletion validates writing next over prev (nil when new): a deletion starts
// prepared, its identity never changes, and its stage advances one step at a time.
func CheckCheckpointDeletion(prev *CheckpointDeletion, next CheckpointDeletion) (changed bool, err error) {
	record := fmt.Sprintf("checkpoint deletion %s", next.CheckpointID)
	var v Validations
	if next.CheckpointID == uuid.Nil || next.RuntimeHostID == uuid.Nil {
		v.Add("checkpoint_id", "checkpoint and host are required")
	}
	if !DeletionStages.Has(next.Stage) {
		v.AddErr("stage", mustParse(DeletionStages, string(next.Stage)))
	}
	if err := v.Err(); err != nil {
		return false, err
	}
	if prev == nil {
		if next.Stage != DeletionPrepared {
			return false, &TransitionError{Record: record, Reason: fmt.Sprintf("a deletion starts %s, not %s", DeletionPrepared, next.Stage)}
		}
		return true, nil
	}
	if prev.RuntimeHostID != next.RuntimeHostID {
		return false, &TransitionError{Record: record, Reason: "the host is immutable"}
	}
	if prev.Stage == next.Stage {
		return false, nil
	}
	if step := DeletionStages.Index(next.Stage) - DeletionStages.Index(prev.Stage); step != 1 {
		return false, &TransitionError{Record: record, Reason: fmt.Sprintf("%s cannot move to %s", prev.Stage, next.Stage)}
	}
	return true, nil
}
