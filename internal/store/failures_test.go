package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// Issue 17: a session whose runtime cannot start for good was poked by Reconcile every
// minute. Held in a recorded failure, it leaves Reconcile's list, tells its room once, and
// returns to it when the failure is cleared.
func TestARuntimeFailureHoldsTheSessionOutOfReconcileUntilCleared(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := createAgent(t, s, "builder", domain.AgentOwned, "")
		createTemplate(t, s, a.ID, "default")
		room := createRoom(t, s, "lab")
		join(t, s, room.ID, "ada", a)
		humanPost(t, s, room.ID, "ada", "anyone?")
		m, err := s.BindingOf(ctx, a.ID, room.ID)
		if err != nil {
			t.Fatal(err)
		}
		session := m.RuntimeSessionID
		backlog := func() []uuid.UUID {
			ids, err := backlogSessions(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			return ids
		}
		if !slices.Contains(backlog(), session) {
			t.Fatalf("the session with a queued message is not in the backlog")
		}
		// Reconcile tags the workflow it starts with the session's agent and room.
		if refs, err := s.SessionsWithBacklog(ctx, 100); err != nil || len(refs) != 1 ||
			refs[0].AgentID != a.ID || refs[0].RoomID != room.ID {
			t.Fatalf("backlog refs %+v %v: want agent %s room %s", refs, err, a.ID, room.ID)
		}
		f := domain.RuntimeFailure{Class: domain.FailureAdapterMissing, Reason: "no adapter for codex-app-server", At: fixtureTime}
		for range 2 { // the same failure twice: one notice
			if err := s.RecordRuntimeFailure(ctx, session, f); err != nil {
				t.Fatal(err)
			}
		}
		hs, err := s.GetHostSession(ctx, session)
		if err != nil || hs.Failure == nil || hs.Failure.Class != f.Class || hs.Failure.Reason != f.Reason || !hs.Failure.At.Equal(fixtureTime) {
			t.Fatalf("recorded failure %+v %v", hs.Failure, err)
		}
		if n := countEvents(t, s, domain.EventRuntimeFailed); n != 1 {
			t.Fatalf("%d runtime_failed events, want 1", n)
		}
		if slices.Contains(backlog(), session) {
			t.Fatalf("a failed session is still poked by Reconcile")
		}
		failed, err := s.FailedSessions(ctx, domain.FailureAdapterMissing, 10)
		if err != nil || len(failed) != 1 || failed[0].RuntimeSessionID != session {
			t.Fatalf("failed sessions %+v %v", failed, err)
		}
		if other, _ := s.FailedSessions(ctx, domain.FailureNotReady, 10); len(other) != 0 {
			t.Fatalf("failed sessions of another class: %+v", other)
		}
		if err := s.RecordRuntimeFailure(ctx, session, domain.RuntimeFailure{Class: "bogus"}); err == nil {
			t.Fatal("an unknown failure class was recorded")
		}
		if err := s.ClearRuntimeFailure(ctx, session, fixtureTime.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if hs, _ := s.GetHostSession(ctx, session); hs.Failure != nil {
			t.Fatalf("cleared failure still there: %+v", hs.Failure)
		}
		if !slices.Contains(backlog(), session) {
			t.Fatalf("a cleared session did not return to the backlog")
		}
		if err := s.RecordProviderVersion(ctx, session, "1.18.33", fixtureTime); err != nil {
			t.Fatal(err)
		}
		if hs, _ := s.GetHostSession(ctx, session); hs.ProviderVersion != "1.18.33" {
			t.Fatalf("provider version %q", hs.ProviderVersion)
		}
	})
}

func TestNodesRecordTheAdaptersTheyRun(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		n, err := s.RegisterNode(ctx, domain.Node{Name: "n1", Hostname: "h", PID: 1, DataDir: "/d",
			Adapters: []domain.Provider{domain.ProviderACP, domain.ProviderOpenCode}})
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.GetNode(ctx, n.Name)
		if err != nil || !got.Runs(domain.ProviderOpenCode) || got.Runs(domain.ProviderCodex) {
			t.Fatalf("node %+v %v", got, err)
		}
	})
}

func countEvents(t *testing.T, s *Store, kind domain.EventKind) int {
	t.Helper()
	n := 0
	for _, k := range eventKinds(t, s, EventFilter{}) {
		if k == kind {
			n++
		}
	}
	return n
}

// backlogSessions are the runtime sessions SessionsWithBacklog names.
func backlogSessions(ctx context.Context, s *Store) ([]uuid.UUID, error) {
	refs, err := s.SessionsWithBacklog(ctx, 100)
	ids := make([]uuid.UUID, len(refs))
	for i, r := range refs {
		ids[i] = r.RuntimeSessionID
	}
	return ids, err
}
