package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

func TestARoomRunsTheTemplateItsAgentWasAddedWith(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := createAgent(t, s, "builder", domain.AgentOwned, "")
		first := createTemplate(t, s, a.ID, "default")
		local, err := s.CreateTemplate(ctx, domain.Template{ID: uuid.New(), AgentID: a.ID, CreatedAt: fixtureTime.Add(time.Second),
			Config: domain.TemplateConfig{Alias: "local", Transport: domain.TransportACP}.Normalized()})
		if err != nil {
			t.Fatal(err)
		}
		byAlias, byID, plain := createRoom(t, s, "a"), createRoom(t, s, "b"), createRoom(t, s, "c")
		m, err := s.AddAgentToRoomWith(ctx, byAlias.ID, a.ID, TemplatePick{Alias: "local"}, fixtureTime)
		if err != nil || m.Session.TemplateID != local.ID {
			t.Fatalf("by alias: %+v %v", m.Session, err)
		}
		member := m.Participant.ID
		if m, err = s.AddAgentToRoomWith(ctx, byID.ID, a.ID, TemplatePick{ID: local.ID}, fixtureTime); err != nil || m.Session.TemplateID != local.ID {
			t.Fatalf("by id: %+v %v", m.Session, err)
		}
		if m, err = s.AddAgentToRoom(ctx, plain.ID, a.ID, fixtureTime); err != nil || m.Session.TemplateID != first.ID {
			t.Fatalf("no pick is the first template: %+v %v", m.Session, err)
		}
		other := createRoom(t, s, "d")
		var pre *domain.PreconditionError
		if _, err := s.AddAgentToRoomWith(ctx, other.ID, a.ID, TemplatePick{Alias: "nope"}, fixtureTime); !errors.As(err, &pre) {
			t.Fatalf("an unknown alias: %v", err)
		}
		if ps, _ := s.ListParticipants(ctx, other.ID); len(ps) != 0 {
			t.Fatalf("a refused membership was kept: %+v", ps)
		}
		// Adding it back keeps the session (and its thread): another template is refused,
		// the same one or none reuses it.
		if _, err := s.RemoveParticipant(ctx, byAlias.ID, member, fixtureTime); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AddAgentToRoomWith(ctx, byAlias.ID, a.ID, TemplatePick{Alias: "default"}, fixtureTime.Add(time.Minute)); !errors.As(err, &pre) {
			t.Fatalf("re-add with another template: %v", err)
		}
		again, err := s.AddAgentToRoomWith(ctx, byAlias.ID, a.ID, TemplatePick{Alias: "local"}, fixtureTime.Add(time.Minute))
		if err != nil || !again.Reused || again.Session.TemplateID != local.ID {
			t.Fatalf("re-add with its template: %+v %v", again, err)
		}
	})
}

func TestAProviderSessionKeepsTheKindThatBoundIt(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := createAgent(t, s, "builder", domain.AgentOwned, "")
		createTemplate(t, s, a.ID, "default")
		room := createRoom(t, s, "lab")
		m, err := s.AddAgentToRoom(ctx, room.ID, a.ID, fixtureTime)
		if err != nil {
			t.Fatal(err)
		}
		id := m.Session.RuntimeSessionID
		// Bound before kinds were recorded: unknown, then learned on a resume.
		if err := s.BindProviderSession(ctx, id, "thread-1", "", fixtureTime); err != nil {
			t.Fatal(err)
		}
		if hs, _ := s.GetHostSession(ctx, id); hs.ProviderSessionKind != "" {
			t.Fatalf("kind %q, want unknown", hs.ProviderSessionKind)
		}
		if err := s.BindProviderSession(ctx, id, "thread-1", "acp:jam-testagent", fixtureTime); err != nil {
			t.Fatal(err)
		}
		if err := s.BindProviderSession(ctx, id, "thread-1", "", fixtureTime); err != nil {
			t.Fatal(err)
		}
		if hs, _ := s.GetHostSession(ctx, id); hs.ProviderSessionKind != "acp:jam-testagent" {
			t.Fatalf("kind %q after a bind that named none", hs.ProviderSessionKind)
		}
		if err := s.ReplaceProviderSession(ctx, id, "thread-1", "switched", fixtureTime); err != nil {
			t.Fatal(err)
		}
		if hs, _ := s.GetHostSession(ctx, id); hs.ProviderSessionID != "" || hs.ProviderSessionKind != "" {
			t.Fatalf("replaced: %q %q", hs.ProviderSessionID, hs.ProviderSessionKind)
		}
		if err := s.BindProviderSession(ctx, id, "thread-2", "codex-app-server:codex", fixtureTime); err != nil {
			t.Fatal(err)
		}
		if hs, _ := s.GetHostSession(ctx, id); hs.ProviderSessionID != "thread-2" || hs.ProviderSessionKind != "codex-app-server:codex" {
			t.Fatalf("rebound: %q %q", hs.ProviderSessionID, hs.ProviderSessionKind)
		}
	})
}

// A configuration of another thread kind takes its candidate's thread only when it is
// committed: a candidate that fails leaves the old thread bound; a commit unbinds the old
// thread (the room told) and binds the candidate's; a change of the CLI's directory only
// keeps the thread. Sessions bound before kinds were recorded are judged by their
// effective configuration.
func TestAThreadOfAnotherKindIsSwappedInOnlyByItsCommit(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		tmpl, session := applyFixture(t, s) // acp, /bin/agent-v1
		must := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
		}
		must(s.BindProviderSession(ctx, session, "t-1", "", time.Now())) // bound before kinds were recorded
		bound := func() (string, string) {
			hs, err := s.GetHostSession(ctx, session)
			must(err)
			return hs.ProviderSessionID, hs.ProviderSessionKind
		}

		failed := saveCommand(t, s, tmpl, "/bin/other-agent")
		_, err := s.MarkConfigApplying(ctx, session, failed.DesiredGeneration, time.Now())
		must(err)
		must(s.RecordCandidateThread(ctx, session, failed.DesiredGeneration, "t-failed", "acp:other-agent", time.Now()))
		must(s.FailConfig(ctx, session, failed.DesiredGeneration, "the candidate did not start", time.Now()))
		if id, _ := bound(); id != "t-1" {
			t.Fatalf("a failed candidate moved the thread to %q", id)
		}

		moved := saveCommand(t, s, tmpl, "/opt/agent/agent-v1") // same CLI, another directory
		must(s.CommitConfig(ctx, session, moved.DesiredGeneration, time.Now()))
		if id, _ := bound(); id != "t-1" {
			t.Fatalf("moving the CLI replaced the thread with %q", id)
		}

		switched := saveCommand(t, s, tmpl, "/bin/other-agent")
		_, err = s.MarkConfigApplying(ctx, session, switched.DesiredGeneration, time.Now())
		must(err)
		must(s.RecordCandidateThread(ctx, session, switched.DesiredGeneration, "t-2", "acp:other-agent", time.Now()))
		must(s.CommitConfig(ctx, session, switched.DesiredGeneration, time.Now()))
		if id, kind := bound(); id != "t-2" || kind != "acp:other-agent" {
			t.Fatalf("after the switch: %q %q, want the candidate's thread", id, kind)
		}
		hs, err := s.GetHostSession(ctx, session)
		must(err)
		var told bool
		for _, k := range eventKinds(t, s, EventFilter{Room: &hs.RoomID}) {
			told = told || k == domain.EventThreadReplaced
		}
		if !told {
			t.Fatal("the room was not told its thread was replaced")
		}

		// A dormant room (no candidate started): the commit unbinds; its next wake starts fresh.
		dormant := saveCommand(t, s, tmpl, "/bin/third-agent")
		must(s.CommitConfig(ctx, session, dormant.DesiredGeneration, time.Now()))
		if id, _ := bound(); id != "" {
			t.Fatalf("a committed switch kept thread %q bound", id)
		}
	})
}
