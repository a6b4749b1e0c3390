package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

func createAgent(t testing.TB, s *Store, name string, kind domain.AgentKind, keyHash string) domain.Agent {
	t.Helper()
	a, err := s.CreateAgent(context.Background(), domain.Agent{ID: uuid.New(), Name: name, Kind: kind, CreatedAt: fixtureTime}, keyHash)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func createTemplate(t testing.TB, s *Store, agent uuid.UUID, alias string) domain.Template {
	t.Helper()
	cfg := domain.TemplateConfig{Alias: alias, Transport: domain.TransportACP}.Normalized()
	tmpl, err := s.CreateTemplate(context.Background(), domain.Template{ID: uuid.New(), AgentID: agent, Config: cfg, CreatedAt: fixtureTime})
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

func createRoom(t testing.TB, s *Store, name string) domain.Room {
	t.Helper()
	r, err := s.CreateRoom(context.Background(), domain.Room{ID: uuid.New(), Name: name, CreatedAt: fixtureTime})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// join adds a human (when human is not empty) and agents to a room.
func join(t testing.TB, s *Store, room uuid.UUID, human string, agents ...domain.Agent) {
	t.Helper()
	ctx := context.Background()
	for _, a := range agents {
		if _, err := s.AddAgentToRoom(ctx, room, a.ID, fixtureTime); err != nil {
			t.Fatal(err)
		}
	}
	if human != "" {
		if _, err := s.AddHumanToRoom(ctx, room, human, fixtureTime); err != nil {
			t.Fatal(err)
		}
	}
}

func humanPost(t *testing.T, s *Store, room uuid.UUID, human, text string) domain.Message {
	t.Helper()
	m, err := s.PostMessage(context.Background(), domain.Message{ID: uuid.New(), RoomID: room,
		AuthorKind: domain.ParticipantHuman, AuthorHuman: human, Text: text, CreatedAt: fixtureTime})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestCreatingAnAgentNeverTouchesAnExistingOne(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		first := createAgent(t, s, "builder", domain.AgentOwned, "")
		_, err := s.CreateAgent(ctx, domain.Agent{ID: uuid.New(), Name: "builder", Kind: domain.AgentAttached,
			Briefing: "changed", CreatedAt: fixtureTime}, "hash")
		if !errors.Is(err, ErrConflict) {
			t.Fatalf("second create with the same name: %v, want ErrConflict", err)
		}
		got, err := s.GetAgent(ctx, first.ID)
		if err != nil || got.Kind != domain.AgentOwned || got.Briefing != "" || got.HasAPIKey {
			t.Fatalf("existing agent changed: %+v %v", got, err)
		}
	})
}

func TestRunIntentIsPersisted(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := createAgent(t, s, "builder", domain.AgentOwned, "")
		if a.RunIntent != domain.RunIntentRunning {
			t.Fatalf("new agent intent %s", a.RunIntent)
		}
		if _, err := s.SetAgentRunIntent(ctx, a.ID, domain.RunIntentStopped, fixtureTime); err != nil {
			t.Fatal(err)
		}
		got, _ := s.GetAgent(ctx, a.ID)
		if got.RunIntent != domain.RunIntentStopped {
			t.Fatalf("intent %s", got.RunIntent)
		}
		events, _ := s.ListEvents(ctx, 0, EventFilter{Agent: &a.ID}, 10)
		if len(events) != 2 || events[1].Kind != domain.EventAgentRunIntent {
			t.Fatalf("events %+v", events)
		}
	})
}

func TestTemplatesBelongToOwnedAgentsAndSavesBumpTheFamilyGeneration(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		attached := createAgent(t, s, "visitor", domain.AgentAttached, "h1")
		_, err := s.CreateTemplate(ctx, domain.Template{ID: uuid.New(), AgentID: attached.ID,
			Config: domain.TemplateConfig{Alias: "x", Transport: domain.TransportACP}, CreatedAt: fixtureTime})
		if !errors.Is(err, domain.ErrPrecondition) {
			t.Fatalf("template for an attached agent: %v", err)
		}
		owned := createAgent(t, s, "builder", domain.AgentOwned, "")
		tmpl := createTemplate(t, s, owned.ID, "default")
		if tmpl.DesiredGeneration != 1 || tmpl.EffectiveGeneration != 0 {
			t.Fatalf("new template generations %d/%d", tmpl.DesiredGeneration, tmpl.EffectiveGeneration)
		}
		room := createRoom(t, s, "lab")
		join(t, s, room.ID, "", owned)
		// A room session ahead of the template (as after an apply) raises the family maximum.
		mustExec(t, s, `UPDATE host_sessions SET desired_generation = 5 WHERE template_id = ?`, tmpl.ID)
		cfg := tmpl.Config
		cfg.Args = []string{"--verbose"}
		saved, err := s.SaveTemplate(ctx, tmpl.ID, cfg, fixtureTime)
		if err != nil || saved.DesiredGeneration != 6 || saved.EffectiveGeneration != 0 || saved.Config.Args[0] != "--verbose" {
			t.Fatalf("saved %+v %v", saved, err)
		}
		if _, err := s.CreateTemplate(ctx, domain.Template{ID: uuid.New(), AgentID: owned.ID, Config: cfg, CreatedAt: fixtureTime}); !errors.Is(err, ErrConflict) {
			t.Fatalf("second template with one alias: %v", err)
		}
	})
}

func TestAddingAnOwnedAgentMaterializesASessionAndRemovingLeavesATombstone(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := createAgent(t, s, "builder", domain.AgentOwned, "")
		room := createRoom(t, s, "lab")
		if _, err := s.AddAgentToRoom(ctx, room.ID, a.ID, fixtureTime); !errors.Is(err, domain.ErrPrecondition) {
			t.Fatalf("owned agent without a template: %v", err)
		}
		if ps, _ := s.ListParticipants(ctx, room.ID); len(ps) != 0 {
			t.Fatalf("a refused membership was kept: %+v", ps)
		}
		tmpl := createTemplate(t, s, a.ID, "default")
		m, err := s.AddAgentToRoom(ctx, room.ID, a.ID, fixtureTime)
		if err != nil {
			t.Fatal(err)
		}
		hs := m.Session
		if m.Binding == nil || !m.Binding.Active || hs == nil || m.Reused || !m.Fresh || hs.TemplateID != tmpl.ID ||
			hs.Alias != "default-"+room.ID.String() || hs.RuntimeSessionID == uuid.Nil || hs.RoomID != room.ID ||
			hs.DesiredGeneration != tmpl.DesiredGeneration || hs.EffectiveGeneration != tmpl.DesiredGeneration {
			t.Fatalf("membership %+v session %+v", m, hs)
		}
		session := hs.RuntimeSessionID
		if err := s.BindProviderSession(ctx, session, "ses_provider_1", "", fixtureTime); err != nil {
			t.Fatal(err)
		}
		if err := s.BindProviderSession(ctx, session, "ses_other", "", fixtureTime); !errors.Is(err, ErrConflict) {
			t.Fatalf("a bound provider session was replaced: %v", err)
		}
		if _, err := s.AddAgentToRoom(ctx, room.ID, a.ID, fixtureTime); !errors.Is(err, ErrConflict) {
			t.Fatalf("second membership: %v", err)
		}
		removed, err := s.RemoveParticipant(ctx, room.ID, m.Participant.ID, fixtureTime)
		if err != nil || removed.Binding == nil || removed.Binding.Active || !removed.Session.Removed {
			t.Fatalf("removal %+v %v", removed, err)
		}
		if live, _ := s.ListHostSessions(ctx, SessionFilter{Agent: &a.ID}); len(live) != 0 {
			t.Fatalf("removed session still listed: %+v", live)
		}
		// An authoritative re-add reuses the exact runtime session and provider thread.
		again, err := s.AddAgentToRoom(ctx, room.ID, a.ID, fixtureTime.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if !again.Reused || again.Fresh || again.Session.RuntimeSessionID != session || again.Session.ProviderSessionID != "ses_provider_1" ||
			again.Binding.ID != m.Binding.ID || again.Binding.Generation != 3 || !again.Binding.Active || again.Session.Removed {
			t.Fatalf("re-add %+v session %+v", again.Binding, again.Session)
		}
		kinds := eventKinds(t, s, EventFilter{Room: &room.ID})
		want := []domain.EventKind{domain.EventRoomCreated, domain.EventRoomAdded, domain.EventSessionBound,
			domain.EventRoomRemoved, domain.EventRoomAdded, domain.EventSessionBound}
		if fmt.Sprint(kinds) != fmt.Sprint(want) {
			t.Fatalf("room events %v, want %v", kinds, want)
		}
	})
}

func TestMembershipsWithoutABindingAreFoundAndBound(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := createAgent(t, s, "builder", domain.AgentOwned, "")
		createTemplate(t, s, a.ID, "default")
		room := createRoom(t, s, "lab")
		// A membership whose binding was lost (crash between the two, or an older Jam).
		mustExec(t, s, `INSERT INTO room_participants (id, room_id, kind, agent_id, active, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
			uuid.New(), room.ID, domain.ParticipantAgent, a.ID, true, fixtureTime)
		unbound, err := s.UnboundMemberships(ctx)
		if err != nil || len(unbound) != 1 || *unbound[0].AgentID != a.ID {
			t.Fatalf("unbound %+v %v", unbound, err)
		}
		// Not fresh: messages may have been queued for the membership before its binding,
		// so its session must be poked.
		if m, err := s.BindMembership(ctx, room.ID, a.ID, fixtureTime); err != nil || m.Fresh {
			t.Fatalf("bind %+v %v", m, err)
		}
		if unbound, _ = s.UnboundMemberships(ctx); len(unbound) != 0 {
			t.Fatalf("still unbound %+v", unbound)
		}
	})
}

func eventKinds(t *testing.T, s *Store, f EventFilter) []domain.EventKind {
	t.Helper()
	evs, err := s.ListEvents(context.Background(), 0, f, 1000)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]domain.EventKind, len(evs))
	for i, e := range evs {
		out[i] = e.Kind
	}
	return out
}

func TestAPostQueuesOneInboundRowPerOtherAgent(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		room := createRoom(t, s, "lab")
		a := createAgent(t, s, "a", domain.AgentAttached, "ha")
		b := createAgent(t, s, "b", domain.AgentAttached, "hb")
		outsider := createAgent(t, s, "c", domain.AgentAttached, "hc")
		join(t, s, room.ID, "", a, b)
		join(t, s, room.ID, "ada")
		m := humanPost(t, s, room.ID, "ada", "hello")
		for _, ag := range []domain.Agent{a, b} {
			in, err := s.GetInbound(ctx, ag.ID, m.ID)
			if err != nil || in.State != domain.InboundQueued || in.Seq != m.Seq {
				t.Fatalf("inbound of %s: %+v %v", ag.Name, in, err)
			}
		}
		// An agent's own message is not queued for itself.
		own, err := s.PostMessage(ctx, domain.Message{ID: uuid.New(), RoomID: room.ID, AuthorKind: domain.ParticipantAgent,
			AuthorAgentID: &a.ID, Text: "hi", CreatedAt: fixtureTime})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetInbound(ctx, a.ID, own.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("author queued its own message: %v", err)
		}
		if _, err := s.GetInbound(ctx, b.ID, own.ID); err != nil {
			t.Fatal(err)
		}
		// Non-participants cannot post.
		for _, bad := range []domain.Message{
			{RoomID: room.ID, AuthorKind: domain.ParticipantAgent, AuthorAgentID: &outsider.ID},
			{RoomID: room.ID, AuthorKind: domain.ParticipantHuman, AuthorHuman: "mallory"},
		} {
			bad.ID, bad.Text, bad.CreatedAt = uuid.New(), "x", fixtureTime
			if _, err := s.PostMessage(ctx, bad); !errors.Is(err, domain.ErrPrecondition) {
				t.Fatalf("post by a non-participant: %v", err)
			}
		}
		msgs, err := s.ListMessages(ctx, room.ID, 0, 10)
		if err != nil || len(msgs) != 2 || msgs[0].ID != m.ID || msgs[1].Seq <= msgs[0].Seq {
			t.Fatalf("transcript %+v %v", msgs, err)
		}
		if page, _ := s.ListMessages(ctx, room.ID, msgs[0].Seq, 10); len(page) != 1 || page[0].ID != own.ID {
			t.Fatalf("page after the first: %+v", page)
		}
	})
}

func TestSettlementIsIdempotentAndRefusesASecondOutcome(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		room := createRoom(t, s, "lab")
		a := createAgent(t, s, "a", domain.AgentAttached, "ha")
		b := createAgent(t, s, "b", domain.AgentAttached, "hb")
		join(t, s, room.ID, "", a, b)
		join(t, s, room.ID, "ada")
		m := humanPost(t, s, room.ID, "ada", "question")
		in, reply, err := s.Settle(ctx, a.ID, m.ID, domain.SettledReply, "answer", fixtureTime)
		if err != nil || in.State != domain.InboundSettled || reply == nil || *reply.ReplyTo != m.ID || reply.Text != "answer" {
			t.Fatalf("reply: %+v %+v %v", in, reply, err)
		}
		again, reply2, err := s.Settle(ctx, a.ID, m.ID, domain.SettledReply, "answer", fixtureTime)
		if err != nil || reply2.ID != reply.ID || again.SettledAt == nil {
			t.Fatalf("identical retry: %+v %v", reply2, err)
		}
		for _, other := range []struct {
			how  domain.Settlement
			text string
		}{{domain.SettledReply, "a different answer"}, {domain.SettledAck, ""}} {
			if _, _, err := s.Settle(ctx, a.ID, m.ID, other.how, other.text, fixtureTime); !errors.Is(err, ErrSettledOtherwise) {
				t.Fatalf("conflicting settlement %v: %v", other, err)
			}
		}
		// b still has its own unsettled copy; the reply from a was queued for b too.
		if _, _, err := s.Settle(ctx, b.ID, m.ID, domain.SettledAck, "", fixtureTime); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetInbound(ctx, b.ID, reply.ID); err != nil {
			t.Fatalf("the reply was not queued for the other agent: %v", err)
		}
		msgs, _ := s.ListMessages(ctx, room.ID, 0, 10)
		if len(msgs) != 2 {
			t.Fatalf("an ack or a retry posted a message: %d messages", len(msgs))
		}
		if _, _, err := s.Settle(ctx, a.ID, uuid.New(), domain.SettledAck, "", fixtureTime); !errors.Is(err, ErrNotFound) {
			t.Fatalf("settling a message not in the queue: %v", err)
		}
	})
}

func TestReceiveLeasesFenceDeliveriesUntilSettled(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		room := createRoom(t, s, "lab")
		a := createAgent(t, s, "a", domain.AgentAttached, "ha")
		other := createAgent(t, s, "o", domain.AgentAttached, "ho")
		join(t, s, room.ID, "", a)
		join(t, s, room.ID, "ada")
		now := time.Now()
		lease := uuid.New()
		if err := s.AcquireReceiveLease(ctx, lease, a.ID, "w1", now.Add(time.Minute), now); err != nil {
			t.Fatal(err)
		}
		if err := s.AcquireReceiveLease(ctx, lease, a.ID, "w2", now.Add(time.Minute), now); !errors.Is(err, ErrLeaseBusy) {
			t.Fatalf("second waiter: %v", err)
		}
		if err := s.AcquireReceiveLease(ctx, lease, other.ID, "w3", now.Add(time.Minute), now); !errors.Is(err, ErrNotFound) {
			t.Fatalf("another agent's lease: %v", err)
		}
		if _, err := s.ClaimInbound(ctx, a.ID, lease, now); !errors.Is(err, ErrNotFound) {
			t.Fatalf("empty queue: %v", err)
		}
		m1 := humanPost(t, s, room.ID, "ada", "one")
		m2 := humanPost(t, s, room.ID, "ada", "two")
		c, err := s.ClaimInbound(ctx, a.ID, lease, now)
		if err != nil || c.Message.ID != m1.ID || c.AckRequired || c.Inbound.DeliveryCount != 1 {
			t.Fatalf("first claim %+v %v", c, err)
		}
		// The waiter died: the same lease gets the same message again, fenced.
		if err := s.ReleaseReceiveLease(ctx, lease, "w1", now); err != nil {
			t.Fatal(err)
		}
		c, err = s.ClaimInbound(ctx, a.ID, lease, now)
		if err != nil || c.Message.ID != m1.ID || !c.AckRequired || c.Inbound.DeliveryCount != 2 {
			t.Fatalf("re-armed claim %+v %v", c, err)
		}
		// Another lease does not steal a fresh delivery, but gets the next message.
		lease2 := uuid.New()
		if err := s.AcquireReceiveLease(ctx, lease2, a.ID, "x", now.Add(time.Minute), now); err != nil {
			t.Fatal(err)
		}
		c2, err := s.ClaimInbound(ctx, a.ID, lease2, now)
		if err != nil || c2.Message.ID != m2.ID {
			t.Fatalf("second lease claim %+v %v", c2, err)
		}
		if _, _, err := s.Settle(ctx, a.ID, m1.ID, domain.SettledAck, "", now); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ClaimInbound(ctx, a.ID, lease, now); !errors.Is(err, ErrNotFound) {
			t.Fatalf("after the ack the first lease has nothing: %v", err)
		}
		// A stale lease's fenced delivery is re-offered to another receiver.
		if err := s.ReleaseReceiveLease(ctx, lease2, "x", now); err != nil {
			t.Fatal(err)
		}
		later := now.Add(LeaseStaleAfter + time.Second)
		c3, err := s.ClaimInbound(ctx, a.ID, lease, later)
		if err != nil || c3.Message.ID != m2.ID || c3.Inbound.DeliveryCount != 2 {
			t.Fatalf("re-offer of a stale lease's message: %+v %v", c3, err)
		}
	})
}

// Two receivers claiming at once never get the same queued message.
func TestConcurrentClaimsDeliverEachMessageOnce(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		room := createRoom(t, s, "lab")
		a := createAgent(t, s, "a", domain.AgentAttached, "ha")
		join(t, s, room.ID, "", a)
		join(t, s, room.ID, "ada")
		const n = 12
		for i := 0; i < n; i++ {
			humanPost(t, s, room.ID, "ada", fmt.Sprint("m", i))
		}
		now := time.Now()
		var mu sync.Mutex
		seen := map[uuid.UUID]int{}
		var wg sync.WaitGroup
		for w := 0; w < 3; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					lease := uuid.New()
					if err := s.AcquireReceiveLease(ctx, lease, a.ID, "w", now.Add(time.Minute), now); err != nil {
						t.Error(err)
						return
					}
					c, err := s.ClaimInbound(ctx, a.ID, lease, now)
					if errors.Is(err, ErrNotFound) {
						return
					}
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					seen[c.Message.ID]++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(seen) != n {
			t.Fatalf("delivered %d distinct messages, want %d", len(seen), n)
		}
		for id, count := range seen {
			if count != 1 {
				t.Fatalf("message %s delivered %d times", id, count)
			}
		}
	})
}

func TestEventIDsFollowCommitOrderWithoutGaps(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		committed := 0
		var mu sync.Mutex
		s.OnEventsCommitted(func() { mu.Lock(); committed++; mu.Unlock() })
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; i < 5; i++ {
					if _, err := s.CreateRoom(ctx, domain.Room{ID: uuid.New(), Name: fmt.Sprintf("r%d-%d", w, i), CreatedAt: fixtureTime}); err != nil {
						t.Error(err)
					}
				}
			}(w)
		}
		wg.Wait()
		evs, err := s.ListEvents(ctx, 0, EventFilter{}, 100)
		if err != nil || len(evs) != 20 {
			t.Fatalf("%d events, %v", len(evs), err)
		}
		for i, e := range evs {
			if e.ID != int64(i+1) {
				t.Fatalf("event %d has id %d: ids must be dense and ordered", i, e.ID)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if committed != 20 {
			t.Fatalf("commit hook ran %d times, want 20", committed)
		}
		if n, err := s.PruneEvents(ctx, 5); err != nil || n != 15 {
			t.Fatalf("pruned %d, %v", n, err)
		}
		oldest, newest, err := s.EventBounds(ctx)
		if err != nil || oldest != 16 || newest != 20 {
			t.Fatalf("bounds %d..%d %v", oldest, newest, err)
		}
	})
}

func TestDeletingAnAgentRemovesItsRuntimeRecords(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := createAgent(t, s, "builder", domain.AgentOwned, "")
		createTemplate(t, s, a.ID, "default")
		room := createRoom(t, s, "lab")
		join(t, s, room.ID, "", a)
		if err := s.DeleteAgent(ctx, a.ID, fixtureTime); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetAgent(ctx, a.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("agent still there: %v", err)
		}
		if ps, _ := s.ListParticipants(ctx, room.ID); len(ps) != 0 {
			t.Fatalf("membership survived: %+v", ps)
		}
		if hs, _ := s.ListHostSessions(ctx, SessionFilter{IncludeRemoved: true}); len(hs) != 0 {
			t.Fatalf("sessions survived: %+v", hs)
		}
	})
}

// Many concurrent posters: every post succeeds (no serialization failure gives up), and the
// event log stays dense and in commit order.
func TestConcurrentPostersAllSucceedWithOrderedEvents(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		room := createRoom(t, s, "busy")
		join(t, s, room.ID, "ada")
		a := createAgent(t, s, "a", domain.AgentAttached, "ha")
		join(t, s, room.ID, "", a)
		const posters, each = 32, 10
		var wg sync.WaitGroup
		errs := make(chan error, posters*each)
		for p := 0; p < posters; p++ {
			wg.Add(1)
			go func(p int) {
				defer wg.Done()
				for i := 0; i < each; i++ {
					_, err := s.PostMessage(ctx, domain.Message{ID: uuid.New(), RoomID: room.ID, AuthorKind: domain.ParticipantHuman,
						AuthorHuman: "ada", Text: fmt.Sprintf("%d-%d", p, i), CreatedAt: fixtureTime})
					errs <- err
				}
			}(p)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		evs, err := s.ListEvents(ctx, 0, EventFilter{}, 10000)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range evs {
			if e.ID != int64(i+1) {
				t.Fatalf("event %d has id %d", i, e.ID)
			}
		}
		msgs, _ := s.ListMessages(ctx, room.ID, 0, 1000)
		if len(msgs) != posters*each {
			t.Fatalf("%d messages, want %d", len(msgs), posters*each)
		}
		for i := 1; i < len(msgs); i++ {
			if msgs[i].Seq <= msgs[i-1].Seq {
				t.Fatal("message sequence not increasing")
			}
		}
	})
}

// A removed agent's unsettled messages wait for it: they are not delivered outside the
// room, and an authoritative re-add delivers them.
func TestARemovedAgentsMessagesWaitForItsReturn(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		room := createRoom(t, s, "lab")
		a := createAgent(t, s, "a", domain.AgentAttached, "ha")
		m, err := s.AddAgentToRoom(ctx, room.ID, a.ID, fixtureTime)
		if err != nil {
			t.Fatal(err)
		}
		join(t, s, room.ID, "ada")
		msg := humanPost(t, s, room.ID, "ada", "for a")
		if _, err := s.RemoveParticipant(ctx, room.ID, m.Participant.ID, fixtureTime); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		lease := uuid.New()
		if err := s.AcquireReceiveLease(ctx, lease, a.ID, "w", now.Add(time.Minute), now); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ClaimInbound(ctx, a.ID, lease, now); !errors.Is(err, ErrNotFound) {
			t.Fatalf("claim outside the room: %v", err)
		}
		join(t, s, room.ID, "", a)
		c, err := s.ClaimInbound(ctx, a.ID, lease, now)
		if err != nil || c.Message.ID != msg.ID {
			t.Fatalf("claim after the re-add: %+v %v", c, err)
		}
	})
}

func TestDeletingAnAgentTellsItsRoomsItLeft(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		room := createRoom(t, s, "lab")
		a := createAgent(t, s, "a", domain.AgentAttached, "ha")
		join(t, s, room.ID, "", a)
		if err := s.DeleteAgent(ctx, a.ID, fixtureTime); err != nil {
			t.Fatal(err)
		}
		kinds := eventKinds(t, s, EventFilter{Room: &room.ID})
		if kinds[len(kinds)-1] != domain.EventRoomRemoved {
			t.Fatalf("room events %v end without room_removed", kinds)
		}
	})
}

func TestStaleLeasesThatFenceNothingArePruned(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := createAgent(t, s, "a", domain.AgentAttached, "ha")
		old := time.Now().Add(-time.Hour)
		for i := 0; i < 5; i++ {
			l := uuid.New()
			if err := s.AcquireReceiveLease(ctx, l, a.ID, "w", old.Add(time.Minute), old); err != nil {
				t.Fatal(err)
			}
			if err := s.ReleaseReceiveLease(ctx, l, "w", old); err != nil {
				t.Fatal(err)
			}
		}
		now := time.Now()
		if err := s.AcquireReceiveLease(ctx, uuid.New(), a.ID, "w", now.Add(time.Minute), now); err != nil {
			t.Fatal(err)
		}
		var n int
		if err := s.get(ctx, &n, `SELECT COUNT(*) FROM receive_leases WHERE agent_id = ?`, a.ID); err != nil || n != 1 {
			t.Fatalf("%d leases left, %v", n, err)
		}
	})
}

// Binding takes only its room's lock: one agent's rooms bound at once each get their own
// runtime session and binding, and none is refused or lost.
func TestOneAgentsRoomsBindSideBySide(t *testing.T) {
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := createAgent(t, s, "many-"+uuid.NewString()[:8], domain.AgentOwned, "")
		createTemplate(t, s, a.ID, "default")
		const rooms = 24
		sessions := make([]uuid.UUID, rooms)
		errs := make(chan error, rooms)
		var wg sync.WaitGroup
		for i := range rooms {
			room := createRoom(t, s, fmt.Sprintf("side-%d", i))
			wg.Add(1)
			go func() {
				defer wg.Done()
				m, err := s.AddAgentToRoom(ctx, room.ID, a.ID, fixtureTime)
				if err == nil && (m.Session == nil || !m.Fresh) {
					err = fmt.Errorf("membership %+v", m)
				}
				if err == nil {
					sessions[i] = m.Session.RuntimeSessionID
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		listed, err := s.ListHostSessions(ctx, SessionFilter{Agent: &a.ID})
		if err != nil || len(listed) != rooms {
			t.Fatalf("%d sessions listed, want %d: %v", len(listed), rooms, err)
		}
		if slices.Contains(sessions, uuid.Nil) {
			t.Fatalf("sessions %v", sessions)
		}
	})
}

// Issue 43: an owned agent was two statements, the agent and then its first template; a
// failure between them left an agent with no template to run rooms from.
func TestAnOwnedAgentIsCreatedWithItsFirstTemplateOrNotAtAll(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		cfg := domain.TemplateConfig{Alias: "default", Transport: domain.TransportACP}.Normalized()
		a, tmpl, err := s.CreateOwnedAgent(ctx, domain.Agent{ID: uuid.New(), Name: "builder", Kind: domain.AgentOwned, CreatedAt: fixtureTime},
			domain.Template{ID: uuid.New(), Config: cfg, CreatedAt: fixtureTime})
		if err != nil || tmpl.AgentID != a.ID {
			t.Fatalf("create: %+v %+v %v", a, tmpl, err)
		}
		if ts, err := s.ListTemplates(ctx, a.ID); err != nil || len(ts) != 1 || ts[0].ID != tmpl.ID {
			t.Fatalf("templates %+v %v", ts, err)
		}
		// The template insert fails (its id is taken): the agent is not created either.
		_, _, err = s.CreateOwnedAgent(ctx, domain.Agent{ID: uuid.New(), Name: "orphan", Kind: domain.AgentOwned, CreatedAt: fixtureTime},
			domain.Template{ID: tmpl.ID, Config: cfg, CreatedAt: fixtureTime})
		if err == nil {
			t.Fatal("a template with a taken id was created")
		}
		agents, err := s.ListAgents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range agents {
			if x.Name == "orphan" {
				t.Fatalf("the agent outlived its failed template: %+v", x)
			}
		}
	})
}
