package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// applyFixture is an owned agent's template with one room session made from it.
func applyFixture(t *testing.T, s *Store) (domain.Template, uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	a, err := s.CreateAgent(ctx, domain.Agent{ID: uuid.New(), Name: "applier-" + uuid.NewString()[:8], Kind: domain.AgentOwned, CreatedAt: now}, "")
	if err != nil {
		t.Fatal(err)
	}
	cfg := domain.TemplateConfig{Alias: "default", Transport: domain.TransportACP, Command: "/bin/agent-v1"}.Normalized()
	tmpl, err := s.CreateTemplate(ctx, domain.Template{ID: uuid.New(), AgentID: a.ID, Config: cfg, CreatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	room, err := s.CreateRoom(ctx, domain.Room{ID: uuid.New(), Name: "lab", CreatedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.AddAgentToRoom(ctx, room.ID, a.ID, now)
	if err != nil {
		t.Fatal(err)
	}
	return tmpl, m.Session.RuntimeSessionID
}

func saveCommand(t *testing.T, s *Store, tmpl domain.Template, command string) domain.Template {
	t.Helper()
	cfg := tmpl.Config
	cfg.Command = command
	saved, err := s.SaveTemplateAndRequestApply(context.Background(), tmpl.ID, cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return saved
}

// A late acknowledgement from a superseded save cannot commit; a stale candidate cannot be
// started; a failed replacement keeps the old configuration effective with it as the
// recovery target; the current generation commits once.
func TestConfigurationGenerationsAreFencedByTheTemplatesDesiredGeneration(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		tmpl, session := applyFixture(t, s)
		before, err := s.GetHostSession(ctx, session)
		if err != nil {
			t.Fatal(err)
		}
		g2 := saveCommand(t, s, tmpl, "/bin/agent-v2")
		hs, _ := s.GetHostSession(ctx, session)
		if hs.DesiredGeneration != g2.DesiredGeneration || hs.EffectiveGeneration != before.EffectiveGeneration ||
			hs.PendingChange == nil || hs.PendingChange.Status != domain.PendingRequested || hs.Config.Command != "/bin/agent-v1" {
			t.Fatalf("after the save: %+v", hs)
		}
		if applied, err := s.MarkConfigApplying(ctx, session, g2.DesiredGeneration, time.Now()); err != nil || applied {
			t.Fatalf("applying: %v %v", applied, err)
		}
		g3 := saveCommand(t, s, g2, "/bin/agent-v3")
		// The g2 apply answers late: superseded, nothing changes.
		if err := s.CommitConfig(ctx, session, g2.DesiredGeneration, time.Now()); !errors.Is(err, ErrSuperseded) {
			t.Fatalf("late commit of g2: %v", err)
		}
		if _, err := s.CandidateConfig(ctx, session, g2.DesiredGeneration); !errors.Is(err, ErrSuperseded) {
			t.Fatalf("stale candidate: %v", err)
		}
		hs, _ = s.GetHostSession(ctx, session)
		if hs.EffectiveGeneration != before.EffectiveGeneration || hs.Config.Command != "/bin/agent-v1" ||
			hs.PendingChange == nil || hs.PendingChange.Generation != g3.DesiredGeneration {
			t.Fatalf("after the late answer: %+v %+v", hs, hs.PendingChange)
		}
		// A late failure of g2 does not overwrite g3's request.
		if err := s.FailConfig(ctx, session, g2.DesiredGeneration, "late", time.Now()); err != nil {
			t.Fatal(err)
		}
		if hs, _ = s.GetHostSession(ctx, session); hs.PendingChange.Status != domain.PendingRequested {
			t.Fatalf("g2's failure overwrote g3's request: %+v", hs.PendingChange)
		}
		if err := s.FailConfig(ctx, session, g3.DesiredGeneration, "the candidate did not start", time.Now()); err != nil {
			t.Fatal(err)
		}
		hs, _ = s.GetHostSession(ctx, session)
		if hs.PendingChange.Status != domain.PendingFailed || hs.PendingChange.RecoveryTarget != before.EffectiveGeneration ||
			hs.Config.Command != "/bin/agent-v1" {
			t.Fatalf("failed replacement: %+v %+v", hs, hs.PendingChange)
		}
		cfg, err := s.CandidateConfig(ctx, session, g3.DesiredGeneration)
		if err != nil || cfg.Command != "/bin/agent-v3" {
			t.Fatalf("candidate %+v %v", cfg, err)
		}
		for i := 0; i < 2; i++ {
			if err := s.CommitConfig(ctx, session, g3.DesiredGeneration, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		hs, _ = s.GetHostSession(ctx, session)
		if hs.EffectiveGeneration != g3.DesiredGeneration || hs.PendingChange != nil || hs.Config.Command != "/bin/agent-v3" {
			t.Fatalf("committed: %+v", hs)
		}
	})
}
