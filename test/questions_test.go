package test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// pendingQuestion waits for the agent's pending question in room.
func pendingQuestion(t *testing.T, c *client.Client, room uuid.UUID, timeout time.Duration) api.QuestionBody {
	t.Helper()
	var q api.QuestionBody
	wait.Eventually(t, timeout, func() error {
		var list api.QuestionList
		if err := c.Do(context.Background(), http.MethodGet, "/v1/questions?state=pending&room="+room.String(), nil, &list); err != nil {
			return err
		}
		if len(list.Items) != 1 {
			return fmt.Errorf("%d pending questions", len(list.Items))
		}
		q = list.Items[0]
		return nil
	}, "a pending question in room %s", room)
	return q
}

// jam_ask_question in a one-human room, through the public API with jam-testagent calling
// the tool over MCP: the question appears in the room with its code; the human's reply with
// the code is intercepted (kept in the transcript, delivered to no agent) and the answer
// goes back to the agent, whose turn goes on; no answer before the deadline returns "no
// answer"; a restart of Jam while a question is pending keeps it answerable.
func TestAgentsAskTheRoomsHumanAndGetTheAnswer(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "jam-home")
	env := ownedEnv(t, t.TempDir())
	d := startDevEnv(t, home, env)
	c, ctx := d.client, context.Background()
	var agent api.AgentBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "curious", Kind: domain.AgentOwned}, &agent))
	room, _ := roomWith(t, c, "lab", agent.ID)

	ask := postText(t, c, room.ID, "[[ask-tool Which colour should the button be?]] design it")
	q := pendingQuestion(t, c, room.ID, 30*time.Second)
	if q.Recipient != "ada" || q.Text != "Which colour should the button be?" || len(q.Code) != 4 || q.MessageID == nil {
		t.Fatalf("question %+v", q)
	}
	var asked api.MessageBody
	for _, m := range transcript(t, c, room.ID) {
		if m.ID == *q.MessageID {
			asked = m
		}
	}
	if asked.AuthorAgentID == nil || *asked.AuthorAgentID != agent.ID || !strings.Contains(asked.Text, q.Code) {
		t.Fatalf("the question's room message %+v", asked)
	}
	answer := postText(t, c, room.ID, q.Code+" blue, like the sky")
	r := awaitReply(t, c, ask, 30*time.Second)
	if !strings.Contains(r.Text, "blue, like the sky") {
		t.Fatalf("the agent's turn went on with %q", r.Text)
	}
	var got api.QuestionBody
	must(t, c.Do(ctx, http.MethodGet, "/v1/questions/"+q.ID.String(), nil, &got))
	if got.State != domain.QuestionAnswered || got.AnswerMessageID == nil || *got.AnswerMessageID != answer.ID {
		t.Fatalf("answered question %+v", got)
	}
	// The answer was intercepted: in the transcript, but no turn answers it.
	wait.Never(t, 2*time.Second, func() bool { return len(repliesTo(t, c, answer)) > 0 }, "a reply to the intercepted answer")

	// No answer before the deadline: the agent proceeds without one.
	must(t, c.Do(ctx, http.MethodPatch, "/v1/agents/"+agent.ID.String(), map[string]any{"question_timeout_secs": 2}, nil))
	late := postText(t, c, room.ID, "[[ask-tool Anyone there?]] hello")
	if r := awaitReply(t, c, late, 30*time.Second); !strings.Contains(r.Text, "No answer") {
		t.Fatalf("an unanswered question ended with %q", r.Text)
	}
	var expired api.QuestionList
	must(t, c.Do(ctx, http.MethodGet, "/v1/questions?state=expired&room="+room.ID.String(), nil, &expired))
	if len(expired.Items) != 1 {
		t.Fatalf("expired questions %+v", expired.Items)
	}

	// A restart while a question is pending keeps it answerable.
	must(t, c.Do(ctx, http.MethodPatch, "/v1/agents/"+agent.ID.String(), map[string]any{"question_timeout_secs": nil}, nil))
	postText(t, c, room.ID, "[[ask-tool Shall I deploy?]] ship it")
	pending := pendingQuestion(t, c, room.ID, 30*time.Second)
	d.stop(t)
	d = startDevEnv(t, home, env)
	c = d.client
	var answered api.QuestionBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/questions/"+pending.ID.String()+"/answer", map[string]string{"text": "yes"}, &answered))
	if answered.State != domain.QuestionAnswered || answered.Answer == nil || *answered.Answer != "yes" {
		t.Fatalf("answer after a restart %+v", answered)
	}
}
