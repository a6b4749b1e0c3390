package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// The reset record is written once per source host (a retry returns it) and applied exactly
// once: rooms move to their replacements, the source is archived, nothing is deleted.
func TestAContinuityResetIsRecordedOnceAndAppliedOnce(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := newAgent(t, s)
		live, gone := newSession(t, s, a), newSession(t, s, a)
		rooms := map[uuid.UUID]uuid.UUID{live: uuid.New(), gone: uuid.New()}
		for sess, room := range rooms {
			var removed *time.Time
			if sess == gone {
				removed = &fixtureTime
			}
			mustExec(t, s, `INSERT INTO host_sessions (runtime_session_id, agent_id, template_id, alias, room_id, config,
desired_generation, effective_generation, removed_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, 1, 1, ?, ?, ?)`,
				sess, a.agent, a.template, "default-"+room.String(), room,
				`{"alias":"default","transport":"cursor-acp","sandbox":{"enabled":true}}`, removed, fixtureTime, fixtureTime)
			mustExec(t, s, `INSERT INTO room_bindings (id, agent_id, room_id, runtime_session_id, active, generation, created_at, updated_at)
VALUES (?, ?, ?, ?, ?, 1, ?, ?)`, uuid.New(), a.agent, room, sess, sess == live, fixtureTime, fixtureTime)
		}
		alloc, err := s.AllocateHost(ctx, allocReq(a, live, domain.PlacementShared, "fp"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.AllocateHost(ctx, allocReq(a, gone, domain.PlacementShared, "fp")); err != nil {
			t.Fatal(err)
		}
		host := alloc.Host.ID
		id := uuid.New()
		r, err := s.PrepareContinuityReset(ctx, id, host, "evidence", time.Now())
		if err != nil || len(r.Mapping) != 2 {
			t.Fatalf("prepare %+v %v", r, err)
		}
		again, err := s.PrepareContinuityReset(ctx, id, host, "evidence", time.Now())
		if err != nil || again.Mapping[0].ReplacementSession != r.Mapping[0].ReplacementSession {
			t.Fatalf("a retry minted other replacements: %+v %v", again, err)
		}
		if _, err := s.PrepareContinuityReset(ctx, uuid.New(), host, "evidence", time.Now()); !errors.Is(err, ErrResetExists) {
			t.Fatalf("a second reset of the host: %v", err)
		}
		for i := 0; i < 2; i++ { // applied twice: the second changes nothing
			if err := s.ApplyContinuityReset(ctx, r, time.Now()); err != nil {
				t.Fatalf("apply %d: %v", i, err)
			}
		}
		if h, _ := s.GetRuntimeHost(ctx, host); h.State != domain.HostArchived {
			t.Fatalf("source host %s", h.State)
		}
		for _, m := range r.Mapping {
			src, err := s.GetHostSession(ctx, m.SourceSession)
			if err != nil || !src.Removed {
				t.Fatalf("source %+v %v", src, err)
			}
			rep, err := s.GetHostSession(ctx, m.ReplacementSession)
			if err != nil || rep.RoomID != rooms[m.SourceSession] || rep.Removed != !m.Active || rep.ProviderSessionID != "" {
				t.Fatalf("replacement %+v %v", rep, err)
			}
			b, err := s.BindingOf(ctx, a.agent, m.RoomID)
			if m.Active && (err != nil || b.RuntimeSessionID != m.ReplacementSession || !b.Active) {
				t.Fatalf("binding of the live room %+v %v", b, err)
			}
		}
		var n int
		if err := s.get(ctx, &n, `SELECT COUNT(*) FROM runtime_sessions WHERE agent_id = ?`, a.agent); err != nil || n != 4 {
			t.Fatalf("%d runtime sessions (nothing deleted, two minted once) %v", n, err)
		}
		// Re-adding the agent to the room it had left revives the replacement, never the
		// abandoned source.
		for _, m := range r.Mapping {
			if m.Active {
				continue
			}
			var mb Membership
			err := s.InTx(ctx, func(q *Q) error {
				ag, err := q.GetAgent(ctx, a.agent)
				if err != nil {
					return err
				}
				return q.bindRoom(ctx, ag, m.RoomID, TemplatePick{}, time.Now(), &mb)
			})
			if err != nil || mb.Session == nil || mb.Session.RuntimeSessionID != m.ReplacementSession {
				t.Fatalf("re-add bound %+v, want the replacement %s (%v)", mb.Session, m.ReplacementSession, err)
			}
		}
	})
}
