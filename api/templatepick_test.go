package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

func (h *harness) postJSON(path, body string) response {
	h.t.Helper()
	return h.do(http.MethodPost, path, testToken, strings.NewReader(body), "Content-Type", "application/json")
}

// A room runs the template its agent was added with: by alias or id, else the agent's
// first; an unknown one is refused with the agent's templates, both at once is a 400.
func TestAddingAnAgentToARoomPicksItsTemplate(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var agent AgentBody
	r := h.postJSON("/v1/agents", `{"name":"coder","kind":"owned"}`)
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &agent) != nil {
		t.Fatalf("create agent: %d %s", r.status, r.body)
	}
	var local TemplateBody
	r = h.postJSON("/v1/agents/"+agent.ID.String()+"/templates", `{"alias":"local","transport":"acp","command":"/usr/bin/true"}`)
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &local) != nil {
		t.Fatalf("create template: %d %s", r.status, r.body)
	}
	add := func(room string, extra string) response {
		return h.postJSON("/v1/rooms/"+room+"/participants", `{"agent_id":"`+agent.ID.String()+`"`+extra+`}`)
	}
	room := func() string {
		var rb RoomBody
		r := h.postJSON("/v1/rooms", `{"name":"lab"}`)
		if json.Unmarshal(r.body, &rb) != nil {
			t.Fatalf("create room: %s", r.body)
		}
		return rb.ID.String()
	}
	for _, tc := range []struct {
		name, extra string
		status      int
		template    string
	}{
		{"by alias", `,"alias":"local"`, http.StatusCreated, local.ID.String()},
		{"by id", `,"template_id":"` + local.ID.String() + `"`, http.StatusCreated, local.ID.String()},
		{"neither: the first", ``, http.StatusCreated, ""},
		{"unknown alias", `,"alias":"nope"`, http.StatusUnprocessableEntity, ""},
		{"both", `,"alias":"local","template_id":"` + local.ID.String() + `"`, http.StatusBadRequest, ""},
	} {
		r := add(room(), tc.extra)
		if r.status != tc.status {
			t.Fatalf("%s: %d %s, want %d", tc.name, r.status, r.body, tc.status)
		}
		if tc.status != http.StatusCreated {
			if e := r.errorBody(t); tc.name == "unknown alias" && !strings.Contains(e.Message, "default, local") {
				t.Fatalf("%s: %q does not list the agent's templates", tc.name, e.Message)
			}
			continue
		}
		var p ParticipantBody
		if err := json.Unmarshal(r.body, &p); err != nil || p.Session == nil {
			t.Fatalf("%s: %s", tc.name, r.body)
		}
		if tc.template != "" && p.Session.TemplateID.String() != tc.template {
			t.Fatalf("%s: the room runs template %s, want %s", tc.name, p.Session.TemplateID, tc.template)
		}
		if tc.template == "" && (p.Session.TemplateID == local.ID || p.Session.Transport != "acp") {
			t.Fatalf("%s: the room runs %+v, want the agent's first template", tc.name, p.Session)
		}
	}
}

// Creating the same owned agent again answers it (a script run twice works); a different
// one under a taken name, or an attached agent again, is 409.
func TestCreatingTheSameOwnedAgentAgainAnswersIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	body := `{"name":"demo","kind":"owned","template":{"alias":"default","transport":"acp","env_allowlist":[]}}`
	var first, again AgentBody
	r := h.postJSON("/v1/agents", body)
	if r.status != http.StatusCreated || json.Unmarshal(r.body, &first) != nil {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	r = h.postJSON("/v1/agents", `{"name":"demo","kind":"owned"}`)
	if r.status != http.StatusOK || json.Unmarshal(r.body, &again) != nil || again.ID != first.ID {
		t.Fatalf("the same again: %d %s, want 200 with %s", r.status, r.body, first.ID)
	}
	for _, other := range []string{
		`{"name":"demo","kind":"owned","briefing":"another"}`,
		`{"name":"demo","kind":"owned","template":{"alias":"default","transport":"acp","command":"/usr/bin/true"}}`,
		`{"name":"demo","kind":"attached"}`,
	} {
		if r := h.postJSON("/v1/agents", other); r.status != http.StatusConflict {
			t.Fatalf("%s: %d %s, want 409", other, r.status, r.body)
		}
	}
}
