package store

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

func agentPost(t *testing.T, s *Store, room uuid.UUID, agent domain.Agent, text string) domain.Message {
	t.Helper()
	m, err := s.PostMessage(context.Background(), domain.Message{ID: uuid.New(), RoomID: room,
		AuthorKind: domain.ParticipantAgent, AuthorAgentID: &agent.ID, Text: text, CreatedAt: fixtureTime})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func reply(t *testing.T, s *Store, agent domain.Agent, to domain.Message, text string) domain.Message {
	t.Helper()
	_, r, err := s.Settle(context.Background(), agent.ID, to.ID, domain.SettledReply, text, fixtureTime)
	if err != nil {
		t.Fatal(err)
	}
	return *r
}

func putMaxHops(t *testing.T, s *Store, n string) {
	t.Helper()
	if err := s.PutSetting(context.Background(), domain.SettingMaxAgentHops, json.RawMessage(n), fixtureTime); err != nil {
		t.Fatal(err)
	}
}

// postedPayload is the message_posted event of message id.
func postedPayload(t *testing.T, s *Store, room, id uuid.UUID) messageEvent {
	t.Helper()
	evs, err := s.ListEvents(context.Background(), 0, EventFilter{Room: &room}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		var p messageEvent
		if e.Kind == domain.EventMessagePosted && json.Unmarshal(e.Payload, &p) == nil && p.ID == id {
			return p
		}
	}
	t.Fatalf("no message_posted event for %s", id)
	return messageEvent{}
}

func TestAgentHopsCountTheAgentChainSinceTheLastHumanMessage(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		room := createRoom(t, s, "lab")
		a := createAgent(t, s, "a", domain.AgentAttached, "ha")
		b := createAgent(t, s, "b", domain.AgentAttached, "hb")
		join(t, s, room.ID, "ada", a, b)

		opener := agentPost(t, s, room.ID, a, "first words in an empty room")
		human := humanPost(t, s, room.ID, "ada", "question")
		r1 := reply(t, s, a, human, "answer")
		r2 := reply(t, s, b, r1, "answer to the answer")
		unprompted := agentPost(t, s, room.ID, a, "an aside")
		late := reply(t, s, b, human, "a late answer to the human")
		again := humanPost(t, s, room.ID, "ada", "new topic")
		after := agentPost(t, s, room.ID, b, "an aside after the human")

		for _, tc := range []struct {
			name string
			m    domain.Message
			want int
		}{
			{"an agent's post in an empty room", opener, 1},
			{"a human's message", human, 0},
			{"a reply to a human", r1, 1},
			{"a reply to an agent's reply", r2, 2},
			{"a post continues the room's latest message", unprompted, 3},
			{"a reply counts from what it replies to", late, 1},
			{"a human's message resets the chain", again, 0},
			{"a post after a human's message", after, 1},
		} {
			got, err := s.GetMessage(context.Background(), tc.m.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.AgentHops != tc.want || tc.m.AgentHops != tc.want {
				t.Errorf("%s: stored %d hops, posted %d, want %d", tc.name, got.AgentHops, tc.m.AgentHops, tc.want)
			}
			if p := postedPayload(t, s, room.ID, tc.m.ID); p.AgentHops != tc.want || !p.Wakes {
				t.Errorf("%s: message_posted says %d hops, wakes %v", tc.name, p.AgentHops, p.Wakes)
			}
		}
	})
}

func TestTheDefaultHopLimitLetsSixAgentHopsWake(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		room := createRoom(t, s, "lab")
		a := createAgent(t, s, "a", domain.AgentAttached, "ha")
		b := createAgent(t, s, "b", domain.AgentAttached, "hb")
		join(t, s, room.ID, "ada", a, b)
		m := humanPost(t, s, room.ID, "ada", "go")
		agents := []domain.Agent{a, b}
		for hops := 1; hops <= domain.DefaultMaxAgentHops+1; hops++ {
			m = reply(t, s, agents[hops%2], m, "hop")
			wantQuiet := hops > domain.DefaultMaxAgentHops
			if m.AgentHops != hops || m.Quiet != wantQuiet {
				t.Fatalf("hop %d: %d hops, quiet %v", hops, m.AgentHops, m.Quiet)
			}
			in, err := s.GetInbound(ctx, agents[(hops+1)%2].ID, m.ID)
			if err != nil || in.ContextOnly != wantQuiet {
				t.Fatalf("hop %d: recipient's row %+v %v", hops, in, err)
			}
		}
	})
}

// Past the limit a message is in the transcript and in its recipients' queues, but as
// context: it wakes no session, is not backlog, and no receiver claims it.
func TestMessagesPastTheHopLimitAreContextThatWakesNothing(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		owned, room, session := ownedInRoom(t, s)
		attached := createAgent(t, s, "visitor", domain.AgentAttached, "hv")
		join(t, s, room.ID, "", attached)
		putMaxHops(t, s, "2")

		question := humanPost(t, s, room.ID, "alice", "question")
		if _, _, err := s.Settle(ctx, owned.ID, question.ID, domain.SettledAck, "", fixtureTime); err != nil {
			t.Fatal(err)
		}
		r1 := reply(t, s, attached, question, "one")
		r2 := reply(t, s, owned, r1, "two")
		if r1.Quiet || r2.Quiet {
			t.Fatalf("replies within the limit are quiet: %v %v", r1.Quiet, r2.Quiet)
		}
		r3 := reply(t, s, attached, r2, "three")
		if r3.AgentHops != 3 || !r3.Quiet {
			t.Fatalf("past the limit: %d hops, quiet %v", r3.AgentHops, r3.Quiet)
		}
		if p := postedPayload(t, s, room.ID, r3.ID); p.AgentHops != 3 || p.Wakes {
			t.Fatalf("message_posted of a context message: %+v", p)
		}
		in, err := s.GetInbound(ctx, owned.ID, r3.ID)
		if err != nil || !in.ContextOnly || in.State != domain.InboundQueued {
			t.Fatalf("the owned agent's row %+v %v", in, err)
		}

		// The owned agent's only unsettled message is context: no backlog, nothing to wake.
		if n, err := s.CountUnsettled(ctx, owned.ID, room.ID); err != nil || n != 0 {
			t.Fatalf("backlog %d %v", n, err)
		}
		if ids, err := backlogSessions(ctx, s); err != nil || slices.Contains(ids, session) {
			t.Fatalf("sessions with backlog %v %v", ids, err)
		}
		rows, err := s.ListUnsettled(ctx, owned.ID, &room.ID)
		if err != nil || len(rows) != 1 || rows[0].MessageID != r3.ID || !rows[0].ContextOnly {
			t.Fatalf("unsettled rows %+v %v: the next turn gets the context", rows, err)
		}

		// A context row is never claimed.
		aside := agentPost(t, s, room.ID, owned, "four")
		if aside.AgentHops != 4 || !aside.Quiet {
			t.Fatalf("a post past the limit: %d hops, quiet %v", aside.AgentHops, aside.Quiet)
		}
		lease, now := uuid.New(), time.Now()
		if err := s.AcquireReceiveLease(ctx, lease, attached.ID, "w", now.Add(time.Minute), now); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ClaimInbound(ctx, attached.ID, lease, now); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a receiver claimed a context message: %v", err)
		}

		// A human's message wakes again: it is backlog and claimable, the context is not.
		fresh := humanPost(t, s, room.ID, "alice", "new topic")
		if fresh.AgentHops != 0 || fresh.Quiet {
			t.Fatalf("a human's message: %+v", fresh)
		}
		if n, err := s.CountUnsettled(ctx, owned.ID, room.ID); err != nil || n != 1 {
			t.Fatalf("backlog after a human's message %d %v", n, err)
		}
		if ids, err := backlogSessions(ctx, s); err != nil || !slices.Contains(ids, session) {
			t.Fatalf("sessions with backlog %v %v", ids, err)
		}
		c, err := s.ClaimInbound(ctx, attached.ID, lease, now)
		if err != nil || c.Message.ID != fresh.ID {
			t.Fatalf("claim after a human's message: %+v %v", c, err)
		}
		rows, err = s.ListUnsettled(ctx, owned.ID, &room.ID)
		if err != nil || len(rows) != 2 || rows[0].MessageID != r3.ID || rows[1].MessageID != fresh.ID || rows[1].ContextOnly {
			t.Fatalf("unsettled rows %+v %v", rows, err)
		}
		// The receiver settles the message it claimed: its older context rows are
		// acknowledged with it instead of staying unsettled for ever.
		if _, _, err := s.Settle(ctx, attached.ID, fresh.ID, domain.SettledAck, "", now); err != nil {
			t.Fatal(err)
		}
		if rows, err := s.ListUnsettled(ctx, attached.ID, &room.ID); err != nil || len(rows) != 0 {
			t.Fatalf("the receiver's rows after it settled %+v %v", rows, err)
		}
		if in, err := s.GetInbound(ctx, attached.ID, aside.ID); err != nil || in.Settlement != domain.SettledAck {
			t.Fatalf("the receiver's context row %+v %v", in, err)
		}
	})
}

// A retried commit reports its replies as the first one did, Quiet included, so the caller
// pokes (or does not) the same way.
func TestARetriedCommitReportsWhetherItsRepliesWake(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		owned, room, session := ownedInRoom(t, s)
		other := createAgent(t, s, "other", domain.AgentAttached, "ho")
		join(t, s, room.ID, "", other)
		putMaxHops(t, s, "1")
		question := humanPost(t, s, room.ID, "alice", "question")
		r1 := reply(t, s, other, question, "one")
		gen, err := s.BeginRuntimeInstance(ctx, session, fixtureTime)
		if err != nil {
			t.Fatal(err)
		}
		commit := TurnCommit{RuntimeSession: session, Generation: gen, AgentID: owned.ID, TurnID: "t1", At: fixtureTime,
			Settles: []TurnSettle{{MessageID: question.ID, How: domain.SettledAck}, {MessageID: r1.ID, How: domain.SettledReply, Text: "two"}}}
		for _, attempt := range []string{"first", "retry"} {
			done, err := s.CommitTurn(ctx, commit)
			if err != nil {
				t.Fatal(err)
			}
			if len(done.Replies) != 1 || done.Replies[0].AgentHops != 2 || !done.Replies[0].Quiet {
				t.Fatalf("%s commit replies %+v", attempt, done.Replies)
			}
		}
	})
}
