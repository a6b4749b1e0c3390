package band

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
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
	if _, err := b.AddAgent(ctx, room.ID, agent.ID); err != nil {
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
