package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/domain"
)

func TestQuestionCommandsCallTheAPI(t *testing.T) {
	id := uuid.New()
	answer, by := "yes, go ahead", api.OperatorDecider
	body := api.QuestionBody{ID: id, RoomID: uuid.New(), AgentID: uuid.New(), Recipient: "ada", Text: "Deploy\nto staging?",
		Code: "Q7K2", State: domain.QuestionAnswered, Answer: &answer, AnsweredBy: &by, CreatedAt: time.Now()}

	var f fakeAPI
	url := f.serve(t, api.QuestionList{Items: []api.QuestionBody{body}})
	room := uuid.NewString()
	out := runCLI(t, "questions", "list", "--state", "pending", "--room", room, "--url", url, "--token", "tok")
	if f.method != http.MethodGet || f.path != "/v1/questions" || f.query != "room="+room+"&state=pending" || f.auth != "Bearer tok" {
		t.Fatalf("sent %+v", f)
	}
	for _, want := range []string{id.String(), "Q7K2", "answered", "ada", "Deploy to staging?", "yes, go ahead"} {
		if !strings.Contains(out, want) {
			t.Fatalf("table lacks %q:\n%s", want, out)
		}
	}

	url = f.serve(t, body)
	out = runCLI(t, "question", "show", id.String(), "--url", url, "--token", "tok")
	if f.method != http.MethodGet || f.path != "/v1/questions/"+id.String() || !strings.Contains(out, `"code": "Q7K2"`) {
		t.Fatalf("sent %+v, printed %s", f, out)
	}

	out = runCLI(t, "question", "answer", id.String(), "yes,", "go", "ahead", "--url", url, "--token", "tok")
	if f.method != http.MethodPost || f.path != "/v1/questions/"+id.String()+"/answer" {
		t.Fatalf("sent %+v", f)
	}
	var sent api.AnswerQuestionRequest
	if err := json.Unmarshal([]byte(f.body), &sent); err != nil || sent.Text != "yes, go ahead" {
		t.Fatalf("body %s (%v)", f.body, err)
	}
	if !strings.Contains(out, id.String()+": answered by operator") {
		t.Fatalf("output %q", out)
	}
	out = runCLI(t, "question", "answer", id.String(), "yes", "--json", "--url", url, "--token", "tok")
	var echoed api.QuestionBody
	if err := json.Unmarshal([]byte(out), &echoed); err != nil || echoed.ID != id {
		t.Fatalf("--json output %q (%v)", out, err)
	}
}

func TestAgentEditSendsOnlyWhatItChanges(t *testing.T) {
	id := uuid.NewString()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--briefing", "be brief"}, `{"briefing":"be brief"}`},
		{[]string{"--question-timeout-secs", "0"}, `{"question_timeout_secs":0}`},
		{[]string{"--clear-question-timeout"}, `{"question_timeout_secs":null}`},
		{[]string{"--briefing", "x", "--question-timeout-secs", "60"}, `{"briefing":"x","question_timeout_secs":60}`},
	} {
		var f fakeAPI
		url := f.serve(t, api.AgentBody{})
		runCLI(t, append([]string{"agent", "edit", id, "--url", url, "--token", "tok"}, c.args...)...)
		if f.method != http.MethodPatch || f.path != "/v1/agents/"+id || strings.TrimSpace(f.body) != c.want {
			t.Errorf("%v sent %s %s %s, want %s", c.args, f.method, f.path, f.body, c.want)
		}
	}
	for _, args := range [][]string{{}, {"--question-timeout-secs", "5", "--clear-question-timeout"}} {
		root := newRootCmd()
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		root.SetArgs(append([]string{"agent", "edit", id, "--url", "http://127.0.0.1:1", "--token", "tok"}, args...))
		if err := root.ExecuteContext(context.Background()); err == nil {
			t.Errorf("agent edit %v: no error", args)
		}
	}
}
