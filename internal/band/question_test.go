package band

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
)

func TestAHumansFirstCorrelatedReplyAnswersTheQuestionInsteadOfBeingATurn(t *testing.T) {
	b, st := startBand(t)
	ctx := context.Background()
	room, err := b.CreateRoom(ctx, "lab")
	if err != nil {
		t.Fatal(err)
	}
	agent, err := st.CreateAgent(ctx, domain.Agent{ID: uuid.New(), Name: "helper", Kind: domain.AgentAttached, CreatedAt: time.Now()}, "h")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ada", "bob"} {
		if _, err := b.AddHuman(ctx, room.ID, name); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.AddAgent(ctx, room.ID, agent.ID, store.TemplatePick{}); err != nil {
		t.Fatal(err)
	}
	ask := func(text string) domain.Question {
		t.Helper()
		q, err := st.CreateQuestion(ctx, domain.Question{ID: uuid.New(), RoomID: room.ID, AgentID: agent.ID,
			RuntimeSession: uuid.New(), Recipient: "ada", Text: text, CreatedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	post := func(author, text string, replyTo *uuid.UUID) domain.Message {
		t.Helper()
		m, err := b.Post(ctx, domain.Message{RoomID: room.ID, AuthorKind: domain.ParticipantHuman, AuthorHuman: author,
			Text: text, ReplyTo: replyTo})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	settledByAck := func(m domain.Message) bool {
		t.Helper()
		in, err := st.GetInbound(ctx, agent.ID, m.ID)
		if err != nil {
			t.Fatal(err)
		}
		return in.State == domain.InboundSettled && in.Settlement == domain.SettledAck
	}

	q := ask("Deploy to staging?")
	// Another human giving the code is talking, not answering.
	bobs := post("bob", q.Code+" yes", nil)
	if settledByAck(bobs) {
		t.Fatal("bob's message was taken as ada's answer")
	}
	answer := post("ada", q.Code+" yes, go ahead", nil)
	got, err := st.GetQuestion(ctx, q.ID)
	if err != nil || got.State != domain.QuestionAnswered || got.Answer != "yes, go ahead" || got.AnsweredBy != HumanDecider("ada") ||
		got.AnswerMessageID == nil || *got.AnswerMessageID != answer.ID {
		t.Fatalf("after ada's reply: %+v, %v", got, err)
	}
	if !settledByAck(answer) {
		t.Fatal("the answer was queued as a turn")
	}
	// Only the first correlated reply answers; the next is an ordinary message.
	again := post("ada", q.Code+" actually no", nil)
	if settledByAck(again) {
		t.Fatal("a second reply was swallowed")
	}
	if got, _ := st.GetQuestion(ctx, q.ID); got.Answer != "yes, go ahead" {
		t.Fatalf("the second reply changed the answer: %+v", got)
	}

	// A reply to the question's message answers it, and a question is checked before a
	// permission request: the words are the answer.
	p, err := st.CreatePermission(ctx, domain.Permission{ID: uuid.New(), AgentID: agent.ID, RoomID: &room.ID, ToolKey: "edit",
		Title: "edit", CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	r := ask("Which permission?")
	reply := post("ada", "approve "+p.ID.String()[:8], r.MessageID)
	if got, _ := st.GetQuestion(ctx, r.ID); got.State != domain.QuestionAnswered || got.Answer != reply.Text {
		t.Fatalf("reply to the question: %+v", got)
	}
	if got, _ := st.GetPermission(ctx, p.ID); got.State != domain.PermissionPending {
		t.Fatalf("the question's answer decided a permission: %+v", got)
	}
	if !settledByAck(reply) {
		t.Fatal("the reply was queued as a turn")
	}
}

func TestTheAnswerToADeferredQuestionIsTheAskersTurnWhoeverGivesIt(t *testing.T) {
	b, st := startBand(t)
	ctx := context.Background()
	room, err := b.CreateRoom(ctx, "lab")
	if err != nil {
		t.Fatal(err)
	}
	asker, err := st.CreateAgent(ctx, domain.Agent{ID: uuid.New(), Name: "asker", Kind: domain.AgentAttached, CreatedAt: time.Now()}, "h1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := st.CreateAgent(ctx, domain.Agent{ID: uuid.New(), Name: "other", Kind: domain.AgentAttached, CreatedAt: time.Now()}, "h2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.AddHuman(ctx, room.ID, "ada"); err != nil {
		t.Fatal(err)
	}
	for _, a := range []uuid.UUID{asker.ID, other.ID} {
		if _, err := b.AddAgent(ctx, room.ID, a, store.TemplatePick{}); err != nil {
			t.Fatal(err)
		}
	}
	deferred := func(text string) domain.Question {
		t.Helper()
		q, err := st.CreateQuestion(ctx, domain.Question{ID: uuid.New(), RoomID: room.ID, AgentID: asker.ID,
			RuntimeSession: uuid.New(), Recipient: "ada", Text: text, CreatedAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if q, err = st.DeferQuestion(ctx, q.ID, time.Now()); err != nil || q.DeferredAt == nil {
			t.Fatalf("defer: %+v, %v", q, err)
		}
		return q
	}
	queued := func(agent uuid.UUID, m uuid.UUID) bool {
		t.Helper()
		in, err := st.GetInbound(ctx, agent, m)
		if err != nil {
			t.Fatal(err)
		}
		return in.State != domain.InboundSettled && !in.ContextOnly
	}

	// ada's reply: answered, and a turn for the asker only.
	q := deferred("Deploy?")
	m, err := b.Post(ctx, domain.Message{RoomID: room.ID, AuthorKind: domain.ParticipantHuman, AuthorHuman: "ada", Text: q.Code + " yes"})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := st.GetQuestion(ctx, q.ID)
	if got.State != domain.QuestionAnswered || got.Answer != "yes" || got.DeliveredAt == nil {
		t.Fatalf("after ada's reply: %+v", got)
	}
	if !queued(asker.ID, m.ID) || queued(other.ID, m.ID) {
		t.Fatal("the answer is not the asker's turn alone")
	}

	// The operator's answer is posted in the room for ada, and is the asker's turn too.
	q = deferred("Merge?")
	got, err = b.AnswerQuestion(ctx, q.ID, "after lunch", "operator")
	if err != nil || got.State != domain.QuestionAnswered || got.AnsweredBy != "operator" || got.AnswerMessageID == nil {
		t.Fatalf("operator's answer: %+v, %v", got, err)
	}
	posted, err := st.GetMessage(ctx, *got.AnswerMessageID)
	if err != nil || posted.AuthorHuman != "ada" || posted.Text != q.Code+" after lunch" {
		t.Fatalf("the posted answer %+v, %v", posted, err)
	}
	if !queued(asker.ID, posted.ID) || queued(other.ID, posted.ID) {
		t.Fatal("the operator's answer is not the asker's turn alone")
	}
	// The same answer again changes nothing; another is refused.
	if again, err := b.AnswerQuestion(ctx, q.ID, "after lunch", "operator"); err != nil || *again.AnswerMessageID != posted.ID {
		t.Fatalf("the same answer again: %+v, %v", again, err)
	}
	if _, err := b.AnswerQuestion(ctx, q.ID, "now", "operator"); !errors.Is(err, store.ErrQuestionSettled) {
		t.Fatalf("another answer: %v", err)
	}
}
