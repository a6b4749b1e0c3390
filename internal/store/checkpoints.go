package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

type checkpointRow struct {
	ID               uuid.UUID  `db:"id"`
	RuntimeHostID    uuid.UUID  `db:"runtime_host_id"`
	Reason           string     `db:"reason"`
	Provider         string     `db:"provider"`
	ProviderVersion  string     `db:"provider_version"`
	Sessions         string     `db:"sessions"`
	ManifestChecksum string     `db:"manifest_checksum"`
	PayloadBytes     int64      `db:"payload_bytes"`
	PayloadDeletedAt *time.Time `db:"payload_deleted_at"`
	CreatedAt        time.Time  `db:"created_at"`
}

func (r checkpointRow) domain() (domain.ProviderCheckpoint, error) {
	c := domain.ProviderCheckpoint{ID: r.ID, RuntimeHostID: r.RuntimeHostID, Reason: domain.CheckpointReason(r.Reason),
		Provider: domain.Provider(r.Provider), ProviderVersion: r.ProviderVersion, ManifestChecksum: r.ManifestChecksum,
		PayloadBytes: r.PayloadBytes, CreatedAt: utc(r.CreatedAt)}
	if r.PayloadDeletedAt != nil {
		t := utc(*r.PayloadDeletedAt)
		c.PayloadDeletedAt = &t
	}
	if err := json.Unmarshal([]byte(r.Sessions), &c.Sessions); err != nil {
		return c, fmt.Errorf("checkpoint %s: stored sessions: %w", r.ID, err)
	}
	return c, nil
}

// ErrCheckpointChanged: a different checkpoint record exists under the UUID.
var ErrCheckpointChanged = fmt.Errorf("%w: a different checkpoint was recorded under this id", ErrConflict)

// InsertCheckpoint records a published generation. An exact retry (the same record under the
// same UUID, as after a crash between complete.json and this row) changes nothing; a changed
// record under an existing UUID is ErrCheckpointChanged.
func (q *Q) InsertCheckpoint(ctx context.Context, c domain.ProviderCheckpoint) (inserted bool, err error) {
	if !domain.CheckpointReasons.Has(c.Reason) {
		return false, &domain.ValidationError{Field: "reason", Detail: fmt.Sprintf("%q is not a checkpoint reason", c.Reason)}
	}
	if c.Sessions == nil {
		c.Sessions = []domain.CheckpointSession{}
	}
	c.CreatedAt = domain.Timestamp(c.CreatedAt)
	sessions, err := json.Marshal(c.Sessions)
	if err != nil {
		return false, err
	}
	err = q.atomic(ctx, func(q *Q) error {
		prev, err := q.GetCheckpoint(ctx, c.ID)
		switch {
		case err == nil:
			if !sameCheckpoint(prev, c) {
				return ErrCheckpointChanged
			}
			return nil
		case !errors.Is(err, ErrNotFound):
			return err
		}
		inserted = true
		_, err = q.exec(ctx, `
INSERT INTO provider_checkpoints (id, runtime_host_id, reason, provider, provider_version, sessions, manifest_checksum,
    payload_bytes, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			c.ID, c.RuntimeHostID, c.Reason, c.Provider, c.ProviderVersion, string(sessions), c.ManifestChecksum,
			c.PayloadBytes, c.CreatedAt)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("record checkpoint %s: %w", c.ID, err)
	}
	return inserted, nil
}

func sameCheckpoint(a, b domain.ProviderCheckpoint) bool {
	return a.ID == b.ID && a.RuntimeHostID == b.RuntimeHostID && a.Reason == b.Reason && a.Provider == b.Provider &&
		a.ProviderVersion == b.ProviderVersion && slices.Equal(a.Sessions, b.Sessions) &&
		a.ManifestChecksum == b.ManifestChecksum && a.PayloadBytes == b.PayloadBytes && a.CreatedAt.Equal(b.CreatedAt)
}

// GetCheckpoint reads one checkpoint record.
func (q *Q) GetCheckpoint(ctx context.Context, id uuid.UUID) (domain.ProviderCheckpoint, error) {
	var r checkpointRow
	if err := q.get(ctx, &r, `SELECT * FROM provider_checkpoints WHERE id = ?`, id); err != nil {
		return domain.ProviderCheckpoint{}, fmt.Errorf("checkpoint %s: %w", id, err)
	}
	return r.domain()
}

// ListCheckpoints lists a host's checkpoint records, newest first.
func (q *Q) ListCheckpoints(ctx context.Context, host uuid.UUID) ([]domain.ProviderCheckpoint, error) {
	var rows []checkpointRow
	if err := q.selectAll(ctx, &rows, `SELECT * FROM provider_checkpoints WHERE runtime_host_id = ? ORDER BY created_at DESC, id`, host); err != nil {
		return nil, fmt.Errorf("checkpoints of %s: %w", host, err)
	}
	out := make([]domain.ProviderCheckpoint, len(rows))
	for i, r := range rows {
		c, err := r.domain()
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

// RecordResumeObservation writes the immutable outcome of one exact-resume attempt. An exact
// retry under the same id changes nothing; a different one is ErrConflict.
func (q *Q) RecordResumeObservation(ctx context.Context, o domain.ResumeObservation) error {
	if !domain.ResumeOutcomes.Has(o.Outcome) {
		return &domain.ValidationError{Field: "outcome", Detail: fmt.Sprintf("%q is not a resume outcome", o.Outcome)}
	}
	o.RecordedAt = domain.Timestamp(o.RecordedAt)
	o.Detail = domain.Truncate(o.Detail, 1000)
	err := q.atomic(ctx, func(q *Q) error {
		var prev observationRow
		err := q.get(ctx, &prev, `SELECT * FROM provider_resume_observations WHERE id = ?`, o.ID)
		switch {
		case err == nil:
			if p := prev.domain(); p.CheckpointID != o.CheckpointID || p.RuntimeSession != o.RuntimeSession ||
				p.ExpectedProviderSessionID != o.ExpectedProviderSessionID || p.Outcome != o.Outcome ||
				p.Detail != o.Detail || !p.RecordedAt.Equal(o.RecordedAt) {
				return fmt.Errorf("%w: a different resume observation was recorded under this id", ErrConflict)
			}
			return nil
		case !errors.Is(err, ErrNotFound):
			return err
		}
		_, err = q.exec(ctx, `
INSERT INTO provider_resume_observations (id, checkpoint_id, runtime_session_id, expected_provider_session_id, outcome,
    detail, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			o.ID, o.CheckpointID, o.RuntimeSession, o.ExpectedProviderSessionID, o.Outcome, o.Detail, o.RecordedAt)
		return err
	})
	if err != nil {
		return fmt.Errorf("record resume observation %s: %w", o.ID, err)
	}
	return nil
}

// LatestResumeObservation is the newest observation of a session's resume from a checkpoint;
// a later verified success supersedes an earlier failure without deleting it.
func (q *Q) LatestResumeObservation(ctx context.Context, checkpoint, session uuid.UUID) (domain.ResumeObservation, error) {
	var r observationRow
	if err := q.get(ctx, &r, `
SELECT * FROM provider_resume_observations WHERE checkpoint_id = ? AND runtime_session_id = ?
ORDER BY recorded_at DESC, id DESC LIMIT 1`, checkpoint, session); err != nil {
		return domain.ResumeObservation{}, fmt.Errorf("resume observation of %s from %s: %w", session, checkpoint, err)
	}
	return r.domain(), nil
}

type observationRow struct {
	ID                        uuid.UUID `db:"id"`
	CheckpointID              uuid.UUID `db:"checkpoint_id"`
	RuntimeSession            uuid.UUID `db:"runtime_session_id"`
	ExpectedProviderSessionID string    `db:"expected_provider_session_id"`
	Outcome                   string    `db:"outcome"`
	Detail                    string    `db:"detail"`
	RecordedAt                time.Time `db:"recorded_at"`
}

func (r observationRow) domain() domain.ResumeObservation {
	return domain.ResumeObservation{ID: r.ID, CheckpointID: r.CheckpointID, RuntimeSession: r.RuntimeSession,
		ExpectedProviderSessionID: r.ExpectedProviderSessionID, Outcome: domain.ResumeOutcome(r.Outcome),
		Detail: r.Detail, RecordedAt: utc(r.RecordedAt)}
}
