package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// ownedInRoom makes an owned agent with a template, a room with a human, and binds them.
func ownedInRoom(t *testing.T, s *Store) (domain.Agent, domain.Room, uuid.UUID) {
	t.Helper()
	a := createAgent(t, s, "owned-"+uuid.NewString()[:8], domain.AgentOwned, "")
	createTemplate(t, s, a.ID, "default")
	room := createRoom(t, s, "lab")
	m, err := s.AddAgentToRoom(context.Background(), room.ID, a.ID, fixtureTime)
	if err != nil {
		t.Fatal(err)
	}
	join(t, s, room.ID, "alice")
	return a, room, m.Session.RuntimeSessionID
}

func TestCommitTurnSettlesOnceAndFencesRetiredInstances(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a, room, session := ownedInRoom(t, s)
		q1 := humanPost(t, s, room.ID, "alice", "question one")
		q2 := humanPost(t, s, room.ID, "alice", "question two")

		gen1, err := s.BeginRuntimeInstance(ctx, session, fixtureTime)
		if err != nil || gen1 != 1 {
			t.Fatalf("first instance: %d %v", gen1, err)
		}
		commit := TurnCommit{RuntimeSession: session, Generation: gen1, AgentID: a.ID, TurnID: "t1", At: fixtureTime,
			Settles: []TurnSettle{{MessageID: q1.ID, How: domain.SettledAck}, {MessageID: q2.ID, How: domain.SettledReply, Text: "answer"}}}
		done, err := s.CommitTurn(ctx, commit)
		if err != nil {
			t.Fatal(err)
		}
		rows := done.Inbound
		if len(rows) != 2 || rows[1].ReplyMessageID == nil {
			t.Fatalf("rows %+v", rows)
		}
		if len(done.Replies) != 1 || done.Replies[0].ID != *rows[1].ReplyMessageID || done.Replies[0].Quiet {
			t.Fatalf("replies %+v", done.Replies)
		}
		// A redelivered activity retries exactly: nothing changes, no second reply is posted.
		again, err := s.CommitTurn(ctx, commit)
		if err != nil || *again.Inbound[1].ReplyMessageID != *rows[1].ReplyMessageID ||
			len(again.Replies) != 1 || again.Replies[0].ID != done.Replies[0].ID {
			t.Fatalf("retry: %+v %v", again, err)
		}
		msgs, _ := s.ListMessages(ctx, room.ID, 0, 10)
		if len(msgs) != 3 {
			t.Fatalf("transcript has %d messages, want the two questions and one reply", len(msgs))
		}

		// A successor instance begins: the retired one can neither settle nor emit.
		gen2, err := s.BeginRuntimeInstance(ctx, session, fixtureTime)
		if err != nil || gen2 != 2 {
			t.Fatalf("second instance: %d %v", gen2, err)
		}
		// The activity that committed and died before reporting is retried after the successor
		// began: an exact retry writes nothing and still succeeds.
		if again, err := s.CommitTurn(ctx, commit); err != nil || *again.Inbound[1].ReplyMessageID != *rows[1].ReplyMessageID {
			t.Fatalf("exact retry after a successor began: %+v %v", again, err)
		}
		q3 := humanPost(t, s, room.ID, "alice", "question three")
		_, err = s.CommitTurn(ctx, TurnCommit{RuntimeSession: session, Generation: gen1, AgentID: a.ID, TurnID: "late",
			Settles: []TurnSettle{{MessageID: q3.ID, How: domain.SettledReply, Text: "stale"}}, At: fixtureTime})
		if !errors.Is(err, ErrFenced) {
			t.Fatalf("a retired instance settled: %v", err)
		}
		if in, _ := s.GetInbound(ctx, a.ID, q3.ID); in.State != domain.InboundQueued {
			t.Fatalf("fenced commit changed the queue: %+v", in)
		}
		payload := []json.RawMessage{json.RawMessage(`{"kind":"thought","text":"late"}`)}
		if err := s.AppendRuntimeActivity(ctx, session, gen2, room.ID, uuid.New(), payload, fixtureTime); !errors.Is(err, ErrFenced) {
			t.Fatalf("another agent wrote into this session: %v", err)
		}
		if err := s.AppendRuntimeActivity(ctx, session, gen1, room.ID, a.ID, payload, fixtureTime); !errors.Is(err, ErrFenced) {
			t.Fatalf("a retired instance emitted: %v", err)
		}
		if err := s.AppendRuntimeActivity(ctx, session, gen2, room.ID, a.ID, payload, fixtureTime); err != nil {
			t.Fatal(err)
		}
		evs, err := s.ListEvents(ctx, 0, EventFilter{Room: &room.ID}, 1000)
		if err != nil {
			t.Fatal(err)
		}
		activity := 0
		for _, e := range evs {
			if e.Kind == domain.EventRuntimeActivity {
				activity++
			}
		}
		if activity != 1 {
			t.Fatalf("%d runtime_activity events, want 1", activity)
		}
	})
}

func TestCommitTurnIsAllOrNothing(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a, room, session := ownedInRoom(t, s)
		q1 := humanPost(t, s, room.ID, "alice", "one")
		q2 := humanPost(t, s, room.ID, "alice", "two")
		gen, _ := s.BeginRuntimeInstance(ctx, session, fixtureTime)
		if _, _, err := s.Settle(ctx, a.ID, q2.ID, domain.SettledAck, "", fixtureTime); err != nil {
			t.Fatal(err)
		}
		// q2 was acked already; replying to it conflicts and the whole turn rolls back.
		_, err := s.CommitTurn(ctx, TurnCommit{RuntimeSession: session, Generation: gen, AgentID: a.ID, TurnID: "t", At: fixtureTime,
			Settles: []TurnSettle{{MessageID: q1.ID, How: domain.SettledAck}, {MessageID: q2.ID, How: domain.SettledReply, Text: "x"}}})
		if !errors.Is(err, ErrSettledOtherwise) {
			t.Fatalf("conflict: %v", err)
		}
		if in, _ := s.GetInbound(ctx, a.ID, q1.ID); in.State != domain.InboundQueued {
			t.Fatalf("a partial commit settled %+v", in)
		}
	})
}

func TestRuntimeExitIsRecordedForTheSessionsRoom(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a, room, session := ownedInRoom(t, s)
		if err := s.RecordRuntimeExit(ctx, session, 1, domain.RuntimeExitedIdle, fixtureTime); err != nil {
			t.Fatal(err)
		}
		kinds := eventKinds(t, s, EventFilter{Room: &room.ID, Agent: &a.ID})
		if kinds[len(kinds)-1] != domain.EventRuntimeExited {
			t.Fatalf("events %v", kinds)
		}
	})
}

// Issue 43: a reply over 64 KiB was cut. It is posted whole, as ordered parts that each
// continue the one before and reply to the same message; a retried commit posts nothing
// again, and another agent in the room gets every part, in order.
func TestALongReplyIsPostedAsOrderedLinkedParts(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a, room, session := ownedInRoom(t, s)
		other := createAgent(t, s, "listener", domain.AgentAttached, "")
		if _, err := s.AddAgentToRoom(ctx, room.ID, other.ID, fixtureTime); err != nil {
			t.Fatal(err)
		}
		q := humanPost(t, s, room.ID, "alice", "write me a long report")
		gen, err := s.BeginRuntimeInstance(ctx, session, fixtureTime)
		if err != nil {
			t.Fatal(err)
		}
		report := strings.Repeat(strings.Repeat("all work and no play ", 50)+"\n\n", 200) // ~210 KiB
		commit := TurnCommit{RuntimeSession: session, Generation: gen, AgentID: a.ID, TurnID: "t1", At: fixtureTime,
			Settles: []TurnSettle{{MessageID: q.ID, How: domain.SettledReply, Text: report}}}
		done, err := s.CommitTurn(ctx, commit)
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := s.ListMessages(ctx, room.ID, q.Seq, 100)
		if err != nil {
			t.Fatal(err)
		}
		var joined strings.Builder
		var prev *uuid.UUID
		for i, m := range msgs {
			if m.ReplyTo == nil || *m.ReplyTo != q.ID || m.Part != i+1 || m.Parts != len(msgs) || len(m.Text) > domain.MaxMessageBytes ||
				(prev == nil) != (m.Continues == nil) || (prev != nil && *m.Continues != *prev) {
				t.Fatalf("part %d of %d: %+v", i+1, len(msgs), m)
			}
			joined.WriteString(m.Text)
			prev = &m.ID
		}
		if len(msgs) != 4 || joined.String() != report {
			t.Fatalf("%d parts; joined equal to the reply: %v", len(msgs), joined.String() == report)
		}
		if *done.Inbound[0].ReplyMessageID != msgs[0].ID {
			t.Fatalf("the inbound row names %s, not the first part", *done.Inbound[0].ReplyMessageID)
		}
		// An exact retry posts nothing.
		if _, err := s.CommitTurn(ctx, commit); err != nil {
			t.Fatalf("retry: %v", err)
		}
		if again, _ := s.ListMessages(ctx, room.ID, q.Seq, 100); len(again) != len(msgs) {
			t.Fatalf("a retry posted %d messages more", len(again)-len(msgs))
		}
		// The other agent is sent every part, in order.
		rows, err := s.ListUnsettled(ctx, other.ID, &room.ID)
		if err != nil {
			t.Fatal(err)
		}
		var got []uuid.UUID
		for _, r := range rows {
			if r.MessageID != q.ID {
				got = append(got, r.MessageID)
			}
		}
		for i := range msgs {
			if i >= len(got) || got[i] != msgs[i].ID {
				t.Fatalf("the other agent's queue %v, want the parts in order", got)
			}
		}
	})
}
