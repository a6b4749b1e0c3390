package api

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/testsupport/teststore"
)

func (h *harness) question(w world, text string, createdAt time.Time, deadline *time.Time) domain.Question {
	h.t.Helper()
	q, err := h.store.CreateQuestion(context.Background(), domain.Question{ID: uuid.New(), RoomID: w.room.ID, AgentID: w.agent.ID,
		RuntimeSession: uuid.New(), Recipient: "ada", Text: text, CreatedAt: createdAt, Deadline: deadline})
	if err != nil {
		h.t.Fatal(err)
	}
	return q
}

func TestOperatorsListAndAnswerQuestions(t *testing.T) {
	t.Parallel()
	teststore.ForEach(t, func(t *testing.T, st *store.Store) {
		h := newHarnessOn(t, st)
		w := newWorld(h)
		now := time.Now()
		first := h.question(w, "Deploy?", now, nil)
		overdue := now.Add(-time.Minute)
		late := h.question(w, "Too late?", now.Add(-time.Hour), &overdue)
		path := "/v1/questions/" + first.ID.String()

		// Listing expires the overdue question first.
		var list QuestionList
		h.mustCall(http.MethodGet, "/v1/questions?state="+string(domain.QuestionPending), testToken, nil, &list, 200)
		if len(list.Items) != 1 || list.Items[0].ID != first.ID || list.Items[0].Code != first.Code || list.Items[0].Recipient != "ada" {
			t.Fatalf("pending %+v", list.Items)
		}
		h.mustCall(http.MethodGet, "/v1/questions?state=expired&room="+w.room.ID.String()+"&agent="+w.agent.ID.String(), testToken, nil, &list, 200)
		if len(list.Items) != 1 || list.Items[0].ID != late.ID || list.Items[0].AnsweredAt == nil {
			t.Fatalf("expired %+v", list.Items)
		}
		h.mustCall(http.MethodGet, "/v1/questions?limit=1", testToken, nil, &list, 200)
		if len(list.Items) != 1 || list.Items[0].ID != first.ID {
			t.Fatalf("limited %+v", list.Items)
		}
		h.mustCall(http.MethodGet, "/v1/questions?room="+uuid.NewString(), testToken, nil, &list, 200)
		if len(list.Items) != 0 {
			t.Fatalf("another room's %+v", list.Items)
		}

		// A pending question shows null answer fields, in snake_case.
		r := h.call(http.MethodGet, path, testToken, nil, nil)
		var raw map[string]any
		if err := json.Unmarshal(r.body, &raw); err != nil || r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		for _, k := range []string{"id", "room_id", "agent_id", "runtime_session_id", "recipient", "text", "code", "state",
			"answer", "answered_by", "message_id", "answer_message_id", "created_at", "deadline_at", "answered_at", "delivered_at"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("field %s missing: %s", k, r.body)
			}
		}
		if raw["answer"] != nil || raw["answered_by"] != nil || raw["state"] != string(domain.QuestionPending) || raw["message_id"] != first.MessageID.String() {
			t.Fatalf("pending body %s", r.body)
		}

		var got QuestionBody
		h.mustCall(http.MethodPost, path+"/answer", testToken, AnswerQuestionRequest{Text: "yes, go ahead"}, &got, 200)
		if got.State != domain.QuestionAnswered || got.Answer == nil || *got.Answer != "yes, go ahead" ||
			got.AnsweredBy == nil || *got.AnsweredBy != OperatorDecider || got.AnsweredAt == nil || got.AnswerMessageID != nil {
			t.Fatalf("answered %+v", got)
		}
		// The same answer again is idempotent; another one conflicts, as does answering an
		// expired question.
		h.mustCall(http.MethodPost, path+"/answer", testToken, AnswerQuestionRequest{Text: "yes, go ahead"}, &got, 200)
		for _, c := range []struct{ path, text string }{{path, "no"}, {"/v1/questions/" + late.ID.String(), "yes"}} {
			r := h.call(http.MethodPost, c.path+"/answer", testToken, AnswerQuestionRequest{Text: c.text}, nil)
			if r.status != http.StatusConflict || r.errorBody(t).Code != domain.CodeConflict {
				t.Fatalf("%s: %d %s", c.path, r.status, r.body)
			}
		}
		// A question whose deadline passed while nobody looked is expired when read.
		pending := h.question(w, "Soon?", now.Add(-time.Hour), &overdue)
		h.mustCall(http.MethodGet, "/v1/questions/"+pending.ID.String(), testToken, nil, &got, 200)
		if got.State != domain.QuestionExpired {
			t.Fatalf("read overdue %+v", got)
		}

		open := h.question(w, "Still open?", now, nil)
		openPath := "/v1/questions/" + open.ID.String()
		for _, c := range []struct {
			name, method, path, body string
			status                   int
			field                    string
		}{
			{"unknown question", http.MethodPost, "/v1/questions/" + uuid.NewString() + "/answer", `{"text":"yes"}`, 404, ""},
			{"unknown question read", http.MethodGet, "/v1/questions/" + uuid.NewString(), ``, 404, ""},
			{"malformed id", http.MethodGet, "/v1/questions/nope", ``, 400, "id"},
			{"empty text", http.MethodPost, openPath + "/answer", `{"text":""}`, 422, "text"},
			{"blank text", http.MethodPost, openPath + "/answer", `{"text":"  "}`, 422, "text"},
			{"no text", http.MethodPost, openPath + "/answer", `{}`, 422, "text"},
			{"oversized text", http.MethodPost, openPath + "/answer", `{"text":"` + strings.Repeat("x", domain.MaxAnswerText+1) + `"}`, 422, "text"},
			{"unknown field", http.MethodPost, openPath + "/answer", `{"text":"yes","why":"x"}`, 400, "why"},
			{"bad state", http.MethodGet, "/v1/questions?state=done", ``, 400, "state"},
			{"bad room", http.MethodGet, "/v1/questions?room=x", ``, 400, "room"},
			{"bad limit", http.MethodGet, "/v1/questions?limit=0", ``, 400, "limit"},
		} {
			t.Run(c.name, func(t *testing.T) {
				r := h.do(c.method, c.path, testToken, strings.NewReader(c.body), "Content-Type", "application/json")
				if r.status != c.status {
					t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
				}
				e := r.errorBody(t)
				if c.field != "" && (len(e.Validations) == 0 || e.Validations[0].Field != c.field) {
					t.Fatalf("validations %+v, want %s", e.Validations, c.field)
				}
			})
		}
		if q, _ := st.GetQuestion(context.Background(), open.ID); q.State != domain.QuestionPending {
			t.Fatalf("a refused answer changed the question: %+v", q)
		}
		// An agent's key neither lists nor answers (its own questions least of all).
		if r := h.call(http.MethodPost, openPath+"/answer", w.agentKey, AnswerQuestionRequest{Text: "yes"}, nil); r.status != http.StatusForbidden {
			t.Fatalf("agent key: %d %s", r.status, r.body)
		}
		if r := h.call(http.MethodGet, "/v1/questions", w.agentKey, nil, nil); r.status != http.StatusForbidden {
			t.Fatalf("agent key list: %d %s", r.status, r.body)
		}
	})
}

func TestAnAnswerByCodeInTheRoomAnswersTheQuestionAndIsNotATurn(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newWorld(h)
	q := h.question(w, "Deploy?", time.Now(), nil)
	reply := w.post(h, strings.ToLower(q.Code)+": yes")

	var got QuestionBody
	h.mustCall(http.MethodGet, "/v1/questions/"+q.ID.String(), testToken, nil, &got, 200)
	if got.State != domain.QuestionAnswered || *got.Answer != "yes" || *got.AnsweredBy != "human:ada" ||
		got.AnswerMessageID == nil || *got.AnswerMessageID != reply.ID {
		t.Fatalf("after the reply %+v", got)
	}
	var rec ReceiveBody
	h.mustCall(http.MethodPost, "/v1/agents/"+w.agent.ID.String()+"/receive", w.agentKey, ReceiveRequest{WaitSeconds: ptr(0)}, &rec, 200)
	if rec.Message != nil && rec.Message.ID == reply.ID {
		t.Fatalf("the agent received the answer as a turn: %+v", rec.Message)
	}
}

func TestAnAgentsQuestionTimeoutIsEditedWithPatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newWorld(h)
	path := "/v1/agents/" + w.agent.ID.String()
	var a AgentBody
	h.mustCall(http.MethodGet, path, testToken, nil, &a, 200)
	if a.QuestionTimeoutSecs != nil {
		t.Fatalf("a new agent's timeout %v", *a.QuestionTimeoutSecs)
	}
	patch := func(body string, want *int) {
		t.Helper()
		r := h.do(http.MethodPatch, path, testToken, strings.NewReader(body), "Content-Type", "application/json")
		var got AgentBody
		if err := json.Unmarshal(r.body, &got); err != nil || r.status != 200 {
			t.Fatalf("%s: %d %s", body, r.status, r.body)
		}
		if (got.QuestionTimeoutSecs == nil) != (want == nil) || (want != nil && *got.QuestionTimeoutSecs != *want) {
			t.Fatalf("%s: timeout %v, want %v", body, got.QuestionTimeoutSecs, want)
		}
	}
	patch(`{"question_timeout_secs": 60}`, ptr(60))
	patch(`{"briefing": "be brief"}`, ptr(60))
	patch(`{"question_timeout_secs": 0, "briefing": "still brief"}`, ptr(0))
	patch(`{"question_timeout_secs": null}`, nil)
	h.mustCall(http.MethodGet, path, testToken, nil, &a, 200)
	if a.Briefing != "still brief" || a.QuestionTimeoutSecs != nil {
		t.Fatalf("agent %+v", a)
	}
	// The Go request type sends what is set, and null to clear.
	for _, c := range []struct {
		req  PatchAgentRequest
		want string
	}{
		{PatchAgentRequest{QuestionTimeoutSecs: NullableInt{Set: true, Value: ptr(5)}}, `{"question_timeout_secs":5}`},
		{PatchAgentRequest{QuestionTimeoutSecs: NullableInt{Set: true}}, `{"question_timeout_secs":null}`},
		{PatchAgentRequest{Briefing: ptr("x")}, `{"briefing":"x"}`},
	} {
		if b, err := json.Marshal(c.req); err != nil || string(b) != c.want {
			t.Errorf("%+v encodes as %s (%v), want %s", c.req, b, err, c.want)
		}
	}

	for _, c := range []struct{ name, body, field string }{
		{"negative", `{"question_timeout_secs": -1}`, "question_timeout_secs"},
		{"too long", `{"question_timeout_secs": ` + strconv.Itoa(domain.MaxQuestionTimeoutSecs+1) + `}`, "question_timeout_secs"},
		{"not a number", `{"question_timeout_secs": "soon"}`, "question_timeout_secs"},
		{"a fraction", `{"question_timeout_secs": 1.5}`, "question_timeout_secs"},
		{"nothing to change", `{}`, "briefing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := h.do(http.MethodPatch, path, testToken, strings.NewReader(c.body), "Content-Type", "application/json")
			if r.status != http.StatusBadRequest {
				t.Fatalf("status %d: %s", r.status, r.body)
			}
			if e := r.errorBody(t); len(e.Validations) == 0 || e.Validations[0].Field != c.field {
				t.Fatalf("validations %+v, want %s", e.Validations, c.field)
			}
		})
	}
}

// The document's enumerations of question states are the domain's table.
func TestOpenAPIQuestionStatesAreTheDomainTable(t *testing.T) {
	t.Parallel()
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name   string `json:"name"`
				Schema struct {
					Enum []string `json:"enum"`
				} `json:"schema"`
			} `json:"parameters"`
		} `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Enum []string `json:"enum"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPIDocument(), &doc); err != nil {
		t.Fatal(err)
	}
	var param []string
	for _, p := range doc.Paths["/v1/questions"]["get"].Parameters {
		if p.Name == "state" {
			param = p.Schema.Enum
		}
	}
	want := domain.QuestionStates.Strings()
	for name, got := range map[string][]string{
		"Question.state":          doc.Components.Schemas["Question"].Properties["state"].Enum,
		"GET /v1/questions state": param,
	} {
		if !slices.Equal(got, want) {
			t.Errorf("%s enum %v, want %v", name, got, want)
		}
	}
}
