package api

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// Issue 43: exports and checkpoint payloads carry automatic_cleanup_candidate: older than 30
// days, not the newest kept generation, not referenced by continuity evidence. A deleted
// payload is no candidate, and does not count as the newest.
func TestRetentionMarksOnlyOldSupersededUnreferencedArtifacts(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	old := now.Add(-40 * 24 * time.Hour)
	deleted := now
	cps := []domain.ProviderCheckpoint{ // newest first
		{ID: uuid.New(), CreatedAt: old.Add(4 * time.Hour), PayloadDeletedAt: &deleted},
		{ID: uuid.New(), CreatedAt: old.Add(3 * time.Hour)}, // the newest kept
		{ID: uuid.New(), CreatedAt: old.Add(2 * time.Hour)}, // referenced
		{ID: uuid.New(), CreatedAt: old.Add(time.Hour)},     // a candidate
		{ID: uuid.New(), CreatedAt: now.Add(-time.Hour)},    // young (out of order on purpose)
	}
	got := checkpointBodies(cps, map[uuid.UUID]bool{cps[2].ID: true}, now)
	for i, want := range []bool{false, false, false, true, false} {
		if got[i].AutomaticCleanupCandidate != want {
			t.Errorf("checkpoint %d: candidate %v, want %v", i, got[i].AutomaticCleanupCandidate, want)
		}
	}
	exports := []domain.WorkspaceExport{
		{ID: uuid.New(), CreatedAt: old.Add(3 * time.Hour)}, // the newest
		{ID: uuid.New(), CreatedAt: old.Add(2 * time.Hour), DeletedAt: &deleted},
		{ID: uuid.New(), CreatedAt: old.Add(time.Hour)}, // a candidate
	}
	eb := exportBodies(exports, now)
	for i, want := range []bool{false, false, true} {
		if eb[i].AutomaticCleanupCandidate != want {
			t.Errorf("export %d: candidate %v, want %v", i, eb[i].AutomaticCleanupCandidate, want)
		}
	}
}
