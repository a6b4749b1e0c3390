package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// questionRoom is a room with a human (ada), the asking agent and a bystander agent.
type questionRoom struct {
	room             domain.Room
	asker, bystander domain.Agent
	session          uuid.UUID
	recipient        string
}

func newQuestionRoom(t *testing.T, s *Store) questionRoom {
	t.Helper()
	r := questionRoom{room: createRoom(t, s, "lab"), session: uuid.New(), recipient: "ada"}
	r.asker = createAgent(t, s, "builder", domain.AgentAttached, "h1")
	r.bystander = createAgent(t, s, "reviewer", domain.AgentAttached, "h2")
	join(t, s, r.room.ID, "ada", r.asker, r.bystander)
	return r
}

func (r questionRoom) ask(t *testing.T, s *Store, text string, deadline *time.Time) domain.Question {
	t.Helper()
	qu, err := s.CreateQuestion(context.Background(), domain.Question{ID: uuid.New(), RoomID: r.room.ID, AgentID: r.asker.ID,
		RuntimeSession: r.session, Recipient: r.recipient, Text: text, Deadline: deadline, CreatedAt: fixtureTime})
	if err != nil {
		t.Fatal(err)
	}
	return qu
}

func (r questionRoom) human(text string, replyTo *uuid.UUID, at time.Time) domain.Message {
	return domain.Message{ID: uuid.New(), RoomID: r.room.ID, AuthorKind: domain.ParticipantHuman, AuthorHuman: "ada",
		Text: text, ReplyTo: replyTo, CreatedAt: at}
}

func questionEvents(t *testing.T, s *Store, room uuid.UUID) []domain.EventKind {
	t.Helper()
	evs, err := s.ListEvents(context.Background(), 0, EventFilter{Room: &room}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []domain.EventKind
	for _, e := range evs {
		if e.Kind == domain.EventQuestionAsked || e.Kind == domain.EventQuestionAnswered {
			out = append(out, e.Kind)
		}
	}
	return out
}

func TestAQuestionIsPostedAsTheAskingAgentsMessage(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		r := newQuestionRoom(t, s)
		deadline := fixtureTime.Add(time.Hour)
		qu := r.ask(t, s, "Deploy to staging?", &deadline)
		if qu.State != domain.QuestionPending || qu.MessageID == nil || len(qu.Code) != 4 || !strings.ContainsAny(qu.Code, "23456789") {
			t.Fatalf("created %+v", qu)
		}
		got, err := s.GetQuestion(ctx, qu.ID)
		if err != nil || got.Text != "Deploy to staging?" || got.Recipient != "ada" || got.Code != qu.Code ||
			got.RuntimeSession != r.session || !got.Deadline.Equal(deadline) || !got.CreatedAt.Equal(fixtureTime) ||
			got.AnsweredAt != nil || got.DeliveredAt != nil || *got.MessageID != *qu.MessageID {
			t.Fatalf("read back %+v, %v", got, err)
		}
		msgs, err := s.ListMessages(ctx, r.room.ID, 0, 10)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("transcript %+v, %v", msgs, err)
		}
		m := msgs[0]
		if m.ID != *qu.MessageID || m.AuthorAgentID == nil || *m.AuthorAgentID != r.asker.ID ||
			m.Text != domain.QuestionMessage("ada", qu.Code, "Deploy to staging?") || !strings.Contains(m.Text, `"`+qu.Code+` your answer"`) {
			t.Fatalf("question message %+v", m)
		}
		if got := questionEvents(t, s, r.room.ID); !equalKinds(got, []domain.EventKind{domain.EventQuestionAsked}) {
			t.Fatalf("events %v", got)
		}
		// The other agents get the question as context: it wakes none of them.
		if n, err := s.CountUnsettled(ctx, r.bystander.ID, r.room.ID); err != nil || n != 0 {
			t.Fatalf("the question is the bystander's backlog: %d, %v", n, err)
		}
		if rows, err := s.ListUnsettled(ctx, r.bystander.ID, &r.room.ID); err != nil || len(rows) != 1 || !rows[0].ContextOnly {
			t.Fatalf("the bystander's queue %+v, %v", rows, err)
		}

		// Pending codes of a room are distinct.
		codes := map[string]bool{qu.Code: true}
		for range 20 {
			c := r.ask(t, s, "again?", nil).Code
			if codes[c] {
				t.Fatalf("code %s given twice in the room", c)
			}
			codes[c] = true
		}

		// Only an active human of the room is asked, and only by a participant; nothing is
		// written for a refused question.
		for name, q := range map[string]domain.Question{
			"a stranger":    {RoomID: r.room.ID, AgentID: r.asker.ID, Recipient: "mallory"},
			"an agent name": {RoomID: r.room.ID, AgentID: r.asker.ID, Recipient: r.bystander.Name},
			"by an outsider": {RoomID: r.room.ID, AgentID: createAgent(t, s, "outsider", domain.AgentAttached, "h3").ID,
				Recipient: "ada"},
		} {
			q.ID, q.RuntimeSession, q.Text, q.CreatedAt = uuid.New(), r.session, "?", fixtureTime
			if _, err := s.CreateQuestion(ctx, q); !errors.Is(err, domain.ErrPrecondition) {
				t.Errorf("%s: %v, want a refusal", name, err)
			}
		}
		if msgs, _ := s.ListMessages(ctx, r.room.ID, 0, 100); len(msgs) != 21 {
			t.Fatalf("%d messages, want 21", len(msgs))
		}
	})
}

func TestAQuestionIsAnsweredOnceAndAnIdenticalRepeatIsIdempotent(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		r := newQuestionRoom(t, s)
		qu := r.ask(t, s, "Deploy?", nil)
		at := fixtureTime.Add(time.Minute)
		got, err := s.AnswerQuestion(ctx, qu.ID, "yes", "operator", nil, at)
		if err != nil || got.State != domain.QuestionAnswered || got.Answer != "yes" || got.AnsweredBy != "operator" ||
			!got.AnsweredAt.Equal(at) || got.AnswerMessageID != nil {
			t.Fatalf("answered %+v, %v", got, err)
		}
		again, err := s.AnswerQuestion(ctx, qu.ID, "yes", "someone else", nil, at.Add(time.Minute))
		if err != nil || again.AnsweredBy != "operator" || !again.AnsweredAt.Equal(at) {
			t.Fatalf("identical repeat %+v, %v", again, err)
		}
		other, err := s.AnswerQuestion(ctx, qu.ID, "no", "operator", nil, at)
		if !errors.Is(err, ErrQuestionSettled) || !errors.Is(err, ErrConflict) || other.Answer != "yes" {
			t.Fatalf("different answer: %+v, %v", other, err)
		}
		if _, err := s.CloseQuestion(ctx, qu.ID, domain.QuestionExpired, at); !errors.Is(err, ErrQuestionSettled) {
			t.Fatalf("expiring an answered question: %v", err)
		}
		if got := questionEvents(t, s, r.room.ID); !equalKinds(got, []domain.EventKind{domain.EventQuestionAsked, domain.EventQuestionAnswered}) {
			t.Fatalf("events %v", got)
		}

		pending := r.ask(t, s, "Other?", nil)
		for name, text := range map[string]string{"empty": "", "blank": " \n", "oversized": strings.Repeat("x", domain.MaxAnswerText+1),
			"control": "a\x00b"} {
			if _, err := s.AnswerQuestion(ctx, pending.ID, text, "operator", nil, at); err == nil {
				t.Errorf("%s answer accepted", name)
			} else if _, ok := domain.AsValidations(err); !ok {
				t.Errorf("%s answer: %v, want a validation error", name, err)
			}
		}
		if _, err := s.AnswerQuestion(ctx, uuid.New(), "yes", "operator", nil, at); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown question: %v", err)
		}
		if got, _ := s.GetQuestion(ctx, pending.ID); got.State != domain.QuestionPending {
			t.Fatalf("refused answers changed the question: %+v", got)
		}
	})
}

func TestOverdueQuestionsAreExpiredLazilyAndClosedOnce(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		r := newQuestionRoom(t, s)
		soon, later := fixtureTime.Add(time.Minute), fixtureTime.Add(time.Hour)
		due := r.ask(t, s, "due?", &soon)
		notDue := r.ask(t, s, "not due?", &later)
		forever := r.ask(t, s, "whenever?", nil)

		expired, err := s.ExpireOverdue(ctx, soon.Add(-time.Second))
		if err != nil || len(expired) != 0 {
			t.Fatalf("before the deadline: %+v, %v", expired, err)
		}
		expired, err = s.ExpireOverdue(ctx, soon)
		if err != nil || len(expired) != 1 || expired[0].ID != due.ID || expired[0].State != domain.QuestionExpired {
			t.Fatalf("at the deadline: %+v, %v", expired, err)
		}
		if got, _ := s.GetQuestion(ctx, due.ID); got.State != domain.QuestionExpired || !got.AnsweredAt.Equal(soon) {
			t.Fatalf("expired %+v", got)
		}
		if _, err := s.AnswerQuestion(ctx, due.ID, "yes", "operator", nil, soon); !errors.Is(err, ErrQuestionSettled) {
			t.Fatalf("answering an expired question: %v", err)
		}

		// Answering a question past its deadline expires it (and keeps that) instead.
		got, err := s.AnswerQuestion(ctx, notDue.ID, "yes", "operator", nil, later.Add(time.Second))
		if !errors.Is(err, ErrQuestionSettled) || got.State != domain.QuestionExpired {
			t.Fatalf("late answer: %+v, %v", got, err)
		}
		if got, _ := s.GetQuestion(ctx, notDue.ID); got.State != domain.QuestionExpired {
			t.Fatalf("the late answer did not keep the expiry: %+v", got)
		}

		// A question without a deadline is never overdue; it is closed explicitly.
		if expired, err := s.ExpireOverdue(ctx, later.Add(1000*time.Hour)); err != nil || len(expired) != 0 {
			t.Fatalf("expired %+v, %v", expired, err)
		}
		c, err := s.CloseQuestion(ctx, forever.ID, domain.QuestionCancelled, later)
		if err != nil || c.State != domain.QuestionCancelled {
			t.Fatalf("cancel %+v, %v", c, err)
		}
		if c, err := s.CloseQuestion(ctx, forever.ID, domain.QuestionCancelled, later.Add(time.Hour)); err != nil || !c.AnsweredAt.Equal(later) {
			t.Fatalf("cancel again %+v, %v", c, err)
		}
		if _, err := s.CloseQuestion(ctx, forever.ID, domain.QuestionExpired, later); !errors.Is(err, ErrQuestionSettled) {
			t.Fatalf("expire a cancelled question: %v", err)
		}
		if _, err := s.CloseQuestion(ctx, forever.ID, domain.QuestionAnswered, later); err == nil || errors.Is(err, ErrQuestionSettled) {
			t.Fatalf("close as answered: %v", err)
		}
		want := []domain.EventKind{domain.EventQuestionAsked, domain.EventQuestionAsked, domain.EventQuestionAsked,
			domain.EventQuestionAnswered, domain.EventQuestionAnswered, domain.EventQuestionAnswered}
		if got := questionEvents(t, s, r.room.ID); !equalKinds(got, want) {
			t.Fatalf("events %v, want %v", got, want)
		}
	})
}

func TestQuestionsAreListedNewestFirstByStateRoomAndAgent(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		r := newQuestionRoom(t, s)
		first := r.ask(t, s, "one?", nil)
		second, err := s.CreateQuestion(ctx, domain.Question{ID: uuid.New(), RoomID: r.room.ID, AgentID: r.asker.ID,
			RuntimeSession: r.session, Recipient: "ada", Text: "two?", CreatedAt: fixtureTime.Add(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		other := createRoom(t, s, "other")
		join(t, s, other.ID, "bob", r.bystander)
		third, err := s.CreateQuestion(ctx, domain.Question{ID: uuid.New(), RoomID: other.ID, AgentID: r.bystander.ID,
			RuntimeSession: uuid.New(), Recipient: "bob", Text: "three?", CreatedAt: fixtureTime.Add(2 * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.AnswerQuestion(ctx, first.ID, "yes", "operator", nil, fixtureTime); err != nil {
			t.Fatal(err)
		}
		pending, answered := domain.QuestionPending, domain.QuestionAnswered
		for _, c := range []struct {
			name string
			f    QuestionFilter
			want []uuid.UUID
		}{
			{"all", QuestionFilter{}, []uuid.UUID{third.ID, second.ID, first.ID}},
			{"pending", QuestionFilter{State: &pending}, []uuid.UUID{third.ID, second.ID}},
			{"answered", QuestionFilter{State: &answered}, []uuid.UUID{first.ID}},
			{"room", QuestionFilter{Room: &r.room.ID}, []uuid.UUID{second.ID, first.ID}},
			{"agent", QuestionFilter{Agent: &r.bystander.ID}, []uuid.UUID{third.ID}},
			{"room and state", QuestionFilter{Room: &r.room.ID, State: &pending}, []uuid.UUID{second.ID}},
			{"limit", QuestionFilter{Limit: 1}, []uuid.UUID{third.ID}},
		} {
			got, err := s.ListQuestions(ctx, c.f)
			if err != nil {
				t.Fatal(err)
			}
			ids := make([]uuid.UUID, len(got))
			for i, q := range got {
				ids[i] = q.ID
			}
			if !equalIDs(ids, c.want) {
				t.Errorf("%s: %v, want %v", c.name, ids, c.want)
			}
		}
		// Deleting the asking agent deletes its questions.
		if err := s.DeleteAgent(ctx, r.bystander.ID, fixtureTime); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetQuestion(ctx, third.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("question survived its agent: %v", err)
		}
	})
}

func equalIDs(a, b []uuid.UUID) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAHumansReplyIsFoundForTheQuestionItAnswers(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		r := newQuestionRoom(t, s)
		join(t, s, r.room.ID, "bob")
		soon := fixtureTime.Add(time.Minute)
		qu := r.ask(t, s, "Deploy?", &soon)
		forBob, err := s.CreateQuestion(ctx, domain.Question{ID: uuid.New(), RoomID: r.room.ID, AgentID: r.asker.ID,
			RuntimeSession: r.session, Recipient: "bob", Text: "Bob?", CreatedAt: fixtureTime})
		if err != nil {
			t.Fatal(err)
		}
		code := qu.Code
		before := fixtureTime.Add(time.Second)
		for _, c := range []struct {
			name string
			m    domain.Message
			want *uuid.UUID
		}{
			{"by code", r.human(code+" yes", nil, before), &qu.ID},
			{"by lower-case code", r.human(strings.ToLower(code)+": yes", nil, before), &qu.ID},
			{"by reply", r.human("yes please", qu.MessageID, before), &qu.ID},
			{"by reply, the text starting with a word", r.human("Sure thing", qu.MessageID, before), &qu.ID},
			{"a code without an answer", r.human(code, nil, before), nil},
			{"an ordinary message", r.human("hello", nil, before), nil},
			{"another human's question's code", r.human(forBob.Code+" yes", nil, before), nil},
			{"a reply to another human's question", r.human("yes", forBob.MessageID, before), nil},
			{"after the deadline", r.human(code+" yes", nil, soon), nil},
			{"another room", domain.Message{RoomID: uuid.New(), AuthorKind: domain.ParticipantHuman, AuthorHuman: "ada",
				Text: code + " yes", CreatedAt: before}, nil},
			{"an agent", domain.Message{RoomID: r.room.ID, AuthorKind: domain.ParticipantAgent, AuthorAgentID: &r.bystander.ID,
				Text: code + " yes", CreatedAt: before}, nil},
		} {
			got, err := s.FindQuestionForReply(ctx, c.m)
			switch {
			case c.want == nil && !errors.Is(err, ErrNoPendingQuestion):
				t.Errorf("%s: %+v, %v, want ErrNoPendingQuestion", c.name, got, err)
			case c.want != nil && (err != nil || got.ID != *c.want):
				t.Errorf("%s: %+v, %v, want question %s", c.name, got, err, *c.want)
			}
		}
		if got, err := s.FindQuestionForReply(ctx, domain.Message{RoomID: r.room.ID, AuthorKind: domain.ParticipantHuman,
			AuthorHuman: "bob", Text: forBob.Code + " no", CreatedAt: before}); err != nil || got.ID != forBob.ID {
			t.Fatalf("bob's answer: %+v, %v", got, err)
		}
	})
}

func TestAHumansAnswerIsPostedAnsweredAndNeverDeliveredAsATurn(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		r := newQuestionRoom(t, s)
		qu := r.ask(t, s, "Deploy?", nil)
		m := r.human(strings.ToLower(qu.Code)+" yes, go ahead", nil, fixtureTime.Add(time.Second))
		found, err := s.FindQuestionForReply(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		posted, answered, err := s.PostQuestionAnswer(ctx, m, found, "human:ada")
		if err != nil {
			t.Fatal(err)
		}
		if posted.ID != m.ID || posted.Seq == 0 || posted.Text != m.Text {
			t.Fatalf("posted %+v", posted)
		}
		if answered.State != domain.QuestionAnswered || answered.Answer != "yes, go ahead" || answered.AnsweredBy != "human:ada" ||
			answered.AnswerMessageID == nil || *answered.AnswerMessageID != m.ID {
			t.Fatalf("answered %+v", answered)
		}
		if got, _ := s.GetQuestion(ctx, qu.ID); got.State != domain.QuestionAnswered || got.Answer != "yes, go ahead" {
			t.Fatalf("stored %+v", got)
		}
		for _, agent := range []domain.Agent{r.asker, r.bystander} {
			in, err := s.GetInbound(ctx, agent.ID, posted.ID)
			if err != nil || in.State != domain.InboundSettled || in.Settlement != domain.SettledAck {
				t.Fatalf("agent %s inbound %+v, %v", agent.Name, in, err)
			}
		}
		// The question is answered: a second reply is an ordinary message, and nothing is
		// written for it here.
		second := r.human(qu.Code+" no", nil, fixtureTime.Add(2*time.Second))
		if _, err := s.FindQuestionForReply(ctx, second); !errors.Is(err, ErrNoPendingQuestion) {
			t.Fatalf("second reply found %v", err)
		}
		if _, _, err := s.PostQuestionAnswer(ctx, second, found, "human:ada"); !errors.Is(err, ErrNoPendingQuestion) {
			t.Fatalf("second answer: %v", err)
		}
		if msgs, _ := s.ListMessages(ctx, r.room.ID, 0, 10); len(msgs) != 2 {
			t.Fatalf("transcript %+v", msgs)
		}
		// Only a human answers in the room.
		if _, _, err := s.PostQuestionAnswer(ctx, domain.Message{ID: uuid.New(), RoomID: r.room.ID, AuthorKind: domain.ParticipantAgent,
			AuthorAgentID: &r.bystander.ID, Text: qu.Code + " yes", CreatedAt: fixtureTime}, r.ask(t, s, "x?", nil), "agent"); !errors.Is(err, domain.ErrPrecondition) {
			t.Fatalf("agent answer: %v", err)
		}
	})
}

func TestARepeatedAskPicksUpItsPendingQuestionOrAnUndeliveredAnswerOnce(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		r := newQuestionRoom(t, s)
		if _, err := s.ReusableQuestion(ctx, r.session, "Deploy?"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("before asking: %v", err)
		}
		qu := r.ask(t, s, "Deploy?", nil)
		if got, err := s.ReusableQuestion(ctx, r.session, "Deploy?"); err != nil || got.ID != qu.ID {
			t.Fatalf("pending: %+v, %v", got, err)
		}
		for name, c := range map[string]struct {
			session uuid.UUID
			text    string
		}{"other text": {r.session, "Deploy now?"}, "other session": {uuid.New(), "Deploy?"}} {
			if _, err := s.ReusableQuestion(ctx, c.session, c.text); !errors.Is(err, ErrNotFound) {
				t.Errorf("%s: %v", name, err)
			}
		}
		// Marking a pending question delivered does nothing.
		if got, err := s.MarkQuestionDelivered(ctx, qu.ID, fixtureTime); err != nil || got.DeliveredAt != nil {
			t.Fatalf("pending marked: %+v, %v", got, err)
		}
		if _, err := s.AnswerQuestion(ctx, qu.ID, "yes", "operator", nil, fixtureTime); err != nil {
			t.Fatal(err)
		}
		if got, err := s.ReusableQuestion(ctx, r.session, "Deploy?"); err != nil || got.State != domain.QuestionAnswered {
			t.Fatalf("undelivered answer: %+v, %v", got, err)
		}
		at := fixtureTime.Add(time.Minute)
		got, err := s.MarkQuestionDelivered(ctx, qu.ID, at)
		if err != nil || got.DeliveredAt == nil || !got.DeliveredAt.Equal(at) {
			t.Fatalf("delivered %+v, %v", got, err)
		}
		if got, _ := s.MarkQuestionDelivered(ctx, qu.ID, at.Add(time.Hour)); !got.DeliveredAt.Equal(at) {
			t.Fatalf("delivered again %+v", got)
		}
		if _, err := s.ReusableQuestion(ctx, r.session, "Deploy?"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("after delivery: %v", err)
		}
		// An expired question is not picked up: the runtime asks afresh.
		expired := r.ask(t, s, "Deploy?", nil)
		if _, err := s.CloseQuestion(ctx, expired.ID, domain.QuestionExpired, at); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ReusableQuestion(ctx, r.session, "Deploy?"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("expired: %v", err)
		}
	})
}

func TestQuestionsALeavingParticipantCanNoLongerAnswerOrAskAreCancelled(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		r := newQuestionRoom(t, s)
		fromAsker := r.ask(t, s, "Shall I?", nil)
		other := domain.Question{ID: uuid.New(), RoomID: r.room.ID, AgentID: r.bystander.ID, RuntimeSession: uuid.New(),
			Recipient: "ada", Text: "And me?", CreatedAt: fixtureTime}
		fromBystander, err := s.CreateQuestion(ctx, other)
		if err != nil {
			t.Fatal(err)
		}
		participant := func(match func(domain.Participant) bool) uuid.UUID {
			ps, err := s.ListParticipants(ctx, r.room.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range ps {
				if match(p) {
					return p.ID
				}
			}
			t.Fatal("no such participant")
			return uuid.Nil
		}
		state := func(id uuid.UUID) domain.QuestionState {
			q, err := s.GetQuestion(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return q.State
		}
		// The asking agent leaves: its question is cancelled, the other stays pending.
		if _, err := s.RemoveParticipant(ctx, r.room.ID, participant(func(p domain.Participant) bool {
			return p.AgentID != nil && *p.AgentID == r.asker.ID
		}), fixtureTime.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if state(fromAsker.ID) != domain.QuestionCancelled || state(fromBystander.ID) != domain.QuestionPending {
			t.Fatalf("after the asker left: %s, %s", state(fromAsker.ID), state(fromBystander.ID))
		}
		// The asked human leaves: nobody can answer the rest.
		if _, err := s.RemoveParticipant(ctx, r.room.ID, participant(func(p domain.Participant) bool {
			return p.HumanName == "ada"
		}), fixtureTime.Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if state(fromBystander.ID) != domain.QuestionCancelled {
			t.Fatalf("after the human left: %s", state(fromBystander.ID))
		}
	})
}
