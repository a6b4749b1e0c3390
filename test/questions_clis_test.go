package test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/realagent"
	"github.com/jam-dev/jam/internal/testsupport/stubmodel"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// askMarker makes the asking model call jam_ask_question once for the message.
const askMarker = "[[ask-human]]"

// askedQuestion is what the asking model asks.
const askedQuestion = "Which colour should the button be?"

// askingModel asks the room's human askedQuestion for a message holding askMarker, then
// answers every message with jam_reply_to_message (stubmodel.ReplyTool).
func askingModel(t *testing.T) *stubmodel.Server {
	t.Helper()
	model, err := stubmodel.Start(func(r stubmodel.Request) stubmodel.Reply {
		ask := r.ToolName(domain.ToolAskQuestion)
		id, prompt := r.Unanswered()
		asked := false
		for _, c := range r.ToolCalls {
			asked = asked || strings.Contains(c, askedQuestion)
		}
		if ask != "" && id != "" && strings.Contains(prompt, askMarker) && !asked {
			return stubmodel.Reply{ToolCall: &stubmodel.ToolCall{Name: ask, Arguments: map[string]string{"question": askedQuestion}}}
		}
		return stubmodel.ReplyTool(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = model.Close() })
	return model
}

// opencodeSetup is the worker environment and template of the real `opencode acp` talking
// to the scripted model server.
func opencodeSetup(t *testing.T, model *stubmodel.Server) ([]string, domain.TemplateConfig) {
	config := `{"$schema":"https://opencode.ai/config.json","model":"stub/stub-model","autoupdate":false,` +
		`"provider":{"stub":{"npm":"@ai-sdk/openai-compatible","name":"stub","options":{"baseURL":"` + model.URL +
		`/v1","apiKey":"x"},"models":{"stub-model":{"name":"stub"}}}}}`
	env := []string{"OPENCODE_CONFIG_CONTENT=" + config, "OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_LSP_DOWNLOAD=1",
		"XDG_DATA_HOME=" + t.TempDir(), "XDG_CONFIG_HOME=" + t.TempDir(), "XDG_STATE_HOME=" + t.TempDir(), "XDG_CACHE_HOME=" + t.TempDir()}
	return env, domain.TemplateConfig{Alias: "default", Transport: domain.TransportOpenCode,
		EnvAllowlist: []string{"OPENCODE_CONFIG_CONTENT", "OPENCODE_DISABLE_AUTOUPDATE", "OPENCODE_DISABLE_LSP_DOWNLOAD"}}
}

// Issue 43: MCP clients give up on a tool call after about a minute, while a question waits
// 15 minutes by default, so a human who answered after a minute answered no one. With the
// real opencode and claude: a question nobody answers within the inline wait returns its
// call ("asked; the answer comes as a message", with the code), the agent ends its turn,
// and the human's later answer is the agent's next turn, acted on once.
//
// The regular suite shortens the inline wait (JAM_QUESTION_INLINE_SECS=3) and answers as
// soon as the call returned; `make soak` (JAM_SOAK=1) keeps the default wait and answers
// three minutes after the question was asked, past any client's patience.
func TestARealAgentsQuestionOutlivesTheToolCallThatAskedIt(t *testing.T) {
	t.Parallel()
	soak := os.Getenv("JAM_SOAK") == "1"
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, model *stubmodel.Server) ([]string, domain.TemplateConfig)
	}{
		{"opencode", opencodeSetup},
		{"claude", func(t *testing.T, model *stubmodel.Server) ([]string, domain.TemplateConfig) {
			return []string{"ANTHROPIC_BASE_URL=" + model.URL, "ANTHROPIC_API_KEY=x"}, claudeTemplate("")
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			realagent.Require(t, c.name)
			model := askingModel(t)
			env, tmpl := c.setup(t, model)
			if !soak {
				env = append(env, "JAM_QUESTION_INLINE_SECS=3")
			}
			d := startDevEnv(t, filepath.Join(t.TempDir(), "jam-home"), ownedEnv(t, t.TempDir(), env...))
			cl, ctx := d.client, context.Background()
			agent := codexAgent(t, cl, c.name, tmpl)
			room, _ := roomWith(t, cl, "lab", agent)

			asking := postText(t, cl, room.ID, askMarker+" design the button")
			q := pendingQuestion(t, cl, room.ID, 3*time.Minute)
			asked := time.Now()
			if q.Text != askedQuestion || q.Recipient != "ada" {
				t.Fatalf("question %+v", q)
			}
			// The call returned deferred: the agent got the code and ended its turn.
			r := awaitReply(t, cl, asking, 3*time.Minute)
			var told bool
			for _, req := range model.Requests() {
				for _, res := range req.ToolResults {
					told = told || (strings.Contains(res, "no answer yet") && strings.Contains(res, q.Code))
				}
			}
			if !told {
				t.Fatalf("the model never got the deferred call's result (reply %q)", r.Text)
			}
			must(t, cl.Do(ctx, http.MethodGet, "/v1/questions/"+q.ID.String(), nil, &q))
			if q.State != domain.QuestionPending || q.DeferredAt == nil {
				t.Fatalf("after the call returned: %+v", q)
			}
			if soak {
				time.Sleep(time.Until(asked.Add(3 * time.Minute)))
			}

			before := len(model.Requests())
			answer := postText(t, cl, room.ID, q.Code+" blue, like the sky")
			got := awaitReply(t, cl, answer, 3*time.Minute)
			if !strings.Contains(got.Text, "blue, like the sky") {
				t.Fatalf("the agent's turn on the answer: %q", got.Text)
			}
			var saw bool
			for _, req := range model.Requests()[before:] {
				saw = saw || strings.Contains(req.LastUser(), "blue, like the sky")
			}
			if !saw {
				t.Fatal("the answer never reached the model as a turn")
			}
			must(t, cl.Do(ctx, http.MethodGet, "/v1/questions/"+q.ID.String(), nil, &q))
			if q.State != domain.QuestionAnswered || q.AnswerMessageID == nil || *q.AnswerMessageID != answer.ID || q.DeliveredAt == nil {
				t.Fatalf("answered question %+v", q)
			}
			// Acted on once: one reply to the answer, none again to the asking message.
			wait.Never(t, 3*time.Second, func() bool {
				return len(repliesTo(t, cl, answer)) != 1 || len(repliesTo(t, cl, asking)) != 1
			}, "a second reply")
			var list api.QuestionList
			must(t, cl.Do(ctx, http.MethodGet, "/v1/questions?room="+room.ID.String(), nil, &list))
			if len(list.Items) != 1 {
				t.Fatalf("%d questions: the agent asked again", len(list.Items))
			}
		})
	}
}
