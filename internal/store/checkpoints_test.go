package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// A crash between complete.json and the record is repaired by an exact retry; a record never
// changes under its id; the newest resume observation supersedes older ones, which are kept.
func TestCheckpointRecordsAreImmutableAndExactRetriesAreRepairs(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := newAgent(t, s)
		host := newHost(t, s, a, domain.PlacementDedicated)
		session := uuid.New()
		c := domain.ProviderCheckpoint{ID: uuid.New(), RuntimeHostID: host, Reason: domain.CheckpointBeforeStop,
			Provider: domain.ProviderACP, ProviderVersion: "0.1.0",
			Sessions:         []domain.CheckpointSession{{RuntimeSession: session, ProviderSessionID: "sess-1"}},
			ManifestChecksum: "abc", PayloadBytes: 42, CreatedAt: time.Now()}
		if ins, err := s.InsertCheckpoint(ctx, c); err != nil || !ins {
			t.Fatalf("insert %v %v", ins, err)
		}
		if ins, err := s.InsertCheckpoint(ctx, c); err != nil || ins {
			t.Fatalf("exact retry %v %v", ins, err)
		}
		changed := c
		changed.ManifestChecksum = "other"
		if _, err := s.InsertCheckpoint(ctx, changed); !errors.Is(err, ErrCheckpointChanged) {
			t.Fatalf("changed record: %v", err)
		}
		got, err := s.GetCheckpoint(ctx, c.ID)
		if err != nil || got.ManifestChecksum != "abc" || len(got.Sessions) != 1 || got.Sessions[0].ProviderSessionID != "sess-1" {
			t.Fatalf("get %+v %v", got, err)
		}
		newer := c
		newer.ID, newer.CreatedAt = uuid.New(), c.CreatedAt.Add(time.Minute)
		if _, err := s.InsertCheckpoint(ctx, newer); err != nil {
			t.Fatal(err)
		}
		if list, err := s.ListCheckpoints(ctx, host); err != nil || len(list) != 2 || list[0].ID != newer.ID {
			t.Fatalf("list %+v %v", list, err)
		}

		failed := domain.ResumeObservation{ID: uuid.New(), CheckpointID: c.ID, RuntimeSession: session,
			ExpectedProviderSessionID: "sess-1", Outcome: domain.ResumeFailed, Detail: "stream error", RecordedAt: time.Now()}
		if err := s.RecordResumeObservation(ctx, failed); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordResumeObservation(ctx, failed); err != nil {
			t.Fatalf("exact retry: %v", err)
		}
		other := failed
		other.Outcome = domain.ResumeSucceeded
		if err := s.RecordResumeObservation(ctx, other); !errors.Is(err, ErrConflict) {
			t.Fatalf("a rewritten observation: %v", err)
		}
		ok := domain.ResumeObservation{ID: uuid.New(), CheckpointID: c.ID, RuntimeSession: session,
			ExpectedProviderSessionID: "sess-1", Outcome: domain.ResumeSucceeded, RecordedAt: failed.RecordedAt.Add(time.Second)}
		if err := s.RecordResumeObservation(ctx, ok); err != nil {
			t.Fatal(err)
		}
		latest, err := s.LatestResumeObservation(ctx, c.ID, session)
		if err != nil || latest.ID != ok.ID || latest.Outcome != domain.ResumeSucceeded {
			t.Fatalf("latest %+v %v", latest, err)
		}
		var n int
		if err := s.get(ctx, &n, `SELECT COUNT(*) FROM provider_resume_observations WHERE checkpoint_id = ?`, c.ID); err != nil || n != 2 {
			t.Fatalf("observations kept %d %v", n, err)
		}
	})
}

// Retention keeps the newest checkpoint of a host and any an export refers to; a deletion's
// stages only move forward, and removing the payload stamps the record, which stays.
func TestCheckpointDeletionIsForwardOnlyAndRetentionKeepsTheNewest(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := newAgent(t, s)
		host := newHost(t, s, a, domain.PlacementDedicated)
		mk := func(at time.Time) domain.ProviderCheckpoint {
			c := domain.ProviderCheckpoint{ID: uuid.New(), RuntimeHostID: host, Reason: domain.CheckpointManual,
				Provider: domain.ProviderACP, ManifestChecksum: "m", CreatedAt: at}
			if _, err := s.InsertCheckpoint(ctx, c); err != nil {
				t.Fatal(err)
			}
			return c
		}
		old, newest := mk(time.Now().Add(-time.Hour)), mk(time.Now())
		if why, err := s.RetentionRefusal(ctx, newest.ID); err != nil || why == "" {
			t.Fatalf("the newest may go: %q %v", why, err)
		}
		if why, err := s.RetentionRefusal(ctx, old.ID); err != nil || why != "" {
			t.Fatalf("an older one is kept: %q %v", why, err)
		}
		now := time.Now()
		d := domain.CheckpointDeletion{CheckpointID: old.ID, RuntimeHostID: host, CreatedAt: now, UpdatedAt: now}
		var te *domain.TransitionError
		d.Stage = domain.DeletionPayloadRemoved
		if _, err := s.WriteCheckpointDeletion(ctx, d); !errors.As(err, &te) {
			t.Fatalf("a deletion that skips prepared: %v", err)
		}
		for _, st := range []domain.DeletionStage{domain.DeletionPrepared, domain.DeletionPrepared, domain.DeletionPayloadRemoved, domain.DeletionSucceeded} {
			d.Stage = st
			if _, err := s.WriteCheckpointDeletion(ctx, d); err != nil {
				t.Fatalf("stage %s: %v", st, err)
			}
		}
		d.Stage = domain.DeletionPrepared
		if _, err := s.WriteCheckpointDeletion(ctx, d); !errors.As(err, &te) {
			t.Fatalf("a stage moved back: %v", err)
		}
		got, err := s.GetCheckpoint(ctx, old.ID)
		if err != nil || got.PayloadDeletedAt == nil {
			t.Fatalf("the record after deletion %+v %v", got, err)
		}
	})
}

// Issue 43: retention candidates were not computed. Continuity evidence (a failed resume
// observed against a checkpoint, an export taken from it) keeps a checkpoint off the list of
// automatic cleanup candidates.
func TestCheckpointEvidenceNamesTheCheckpointsContinuityRefersTo(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := newAgent(t, s)
		host := newHost(t, s, a, domain.PlacementDedicated)
		session := uuid.New()
		at := time.Now().Add(-40 * 24 * time.Hour)
		mk := func(i int) domain.ProviderCheckpoint {
			c := domain.ProviderCheckpoint{ID: uuid.New(), RuntimeHostID: host, Reason: domain.CheckpointBeforeStop,
				Provider: domain.ProviderACP, Sessions: []domain.CheckpointSession{{RuntimeSession: session, ProviderSessionID: "s"}},
				ManifestChecksum: "m", PayloadBytes: 1, CreatedAt: at.Add(time.Duration(i) * time.Minute)}
			if _, err := s.InsertCheckpoint(ctx, c); err != nil {
				t.Fatal(err)
			}
			return c
		}
		plain, failedAgainst, succeededAgainst := mk(0), mk(1), mk(2)
		for c, outcome := range map[uuid.UUID]domain.ResumeOutcome{failedAgainst.ID: domain.ResumeFailed, succeededAgainst.ID: domain.ResumeSucceeded} {
			if err := s.RecordResumeObservation(ctx, domain.ResumeObservation{ID: uuid.New(), CheckpointID: c, RuntimeSession: session,
				ExpectedProviderSessionID: "s", Outcome: outcome, RecordedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		ev, err := s.CheckpointEvidence(ctx, host)
		if err != nil || ev[plain.ID] || !ev[failedAgainst.ID] || ev[succeededAgainst.ID] {
			t.Fatalf("evidence %v %v: want only the checkpoint a failed resume was observed against", ev, err)
		}
	})
}
