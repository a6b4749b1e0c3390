package api

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/testsupport/teststore"
)

func (h *harness) pendingPermission(agent uuid.UUID, room *uuid.UUID, toolKey string) domain.Permission {
	h.t.Helper()
	p, err := h.store.CreatePermission(context.Background(), domain.Permission{ID: uuid.New(), AgentID: agent, RoomID: room,
		ToolKey: toolKey, Title: "edit main.go", Summary: "apply a patch", CreatedAt: time.Now()})
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

func TestOperatorsListAndDecidePermissionRequests(t *testing.T) {
	t.Parallel()
	teststore.ForEach(t, func(t *testing.T, st *store.Store) {
		h := newHarnessOn(t, st)
		w := newWorld(h)
		first := h.pendingPermission(w.agent.ID, &w.room.ID, "edit")
		second := h.pendingPermission(w.agent.ID, nil, "execute")
		path := "/v1/permissions/" + first.ID.String()

		var list PermissionList
		h.mustCall(http.MethodGet, "/v1/permissions?state="+string(domain.PermissionPending), testToken, nil, &list, 200)
		if len(list.Items) != 2 || list.Items[0].ID != second.ID || list.Items[1].ID != first.ID {
			t.Fatalf("pending %+v", list.Items)
		}
		h.mustCall(http.MethodGet, "/v1/permissions?room="+w.room.ID.String(), testToken, nil, &list, 200)
		if len(list.Items) != 1 || list.Items[0].ID != first.ID {
			t.Fatalf("room's %+v", list.Items)
		}
		h.mustCall(http.MethodGet, "/v1/permissions?limit=1&agent="+w.agent.ID.String(), testToken, nil, &list, 200)
		if len(list.Items) != 1 {
			t.Fatalf("limited %+v", list.Items)
		}

		// Pending requests show null decision fields, in snake_case.
		r := h.call(http.MethodGet, path, testToken, nil, nil)
		var raw map[string]any
		if err := json.Unmarshal(r.body, &raw); err != nil || r.status != 200 {
			t.Fatalf("%d %s", r.status, r.body)
		}
		for _, k := range []string{"id", "agent_id", "room_id", "runtime_session_id", "tool_key", "title", "summary", "state",
			"decision", "decided_by", "reason", "created_at", "decided_at", "deadline_at"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("field %s missing: %s", k, r.body)
			}
		}
		if raw["decision"] != nil || raw["state"] != string(domain.PermissionPending) || raw["room_id"] != w.room.ID.String() {
			t.Fatalf("pending body %s", r.body)
		}

		var got PermissionBody
		h.mustCall(http.MethodPost, path+"/decision", testToken, DecidePermissionRequest{Decision: domain.PermissionAllowAlways}, &got, 200)
		if got.State != domain.PermissionAllowed || got.Decision == nil || *got.Decision != domain.PermissionAllowAlways ||
			got.DecidedBy == nil || *got.DecidedBy != OperatorDecider || got.DecidedAt == nil {
			t.Fatalf("decided %+v", got)
		}
		if ok, err := st.HasPermissionRule(context.Background(), w.agent.ID, "edit"); err != nil || !ok {
			t.Fatalf("always-rule: %v %v", ok, err)
		}
		// The same decision again is idempotent; another one conflicts.
		h.mustCall(http.MethodPost, path+"/decision", testToken, DecidePermissionRequest{Decision: domain.PermissionAllowAlways}, &got, 200)
		r = h.call(http.MethodPost, path+"/decision", testToken, DecidePermissionRequest{Decision: domain.PermissionDeny}, nil)
		if r.status != http.StatusConflict || r.errorBody(t).Code != domain.CodeConflict {
			t.Fatalf("second decision: %d %s", r.status, r.body)
		}

		for _, c := range []struct {
			name, method, path, body string
			status                   int
			field                    string
		}{
			{"unknown request", http.MethodPost, "/v1/permissions/" + uuid.NewString() + "/decision", `{"decision":"deny"}`, 404, ""},
			{"unknown request read", http.MethodGet, "/v1/permissions/" + uuid.NewString(), ``, 404, ""},
			{"malformed id", http.MethodGet, "/v1/permissions/nope", ``, 400, "id"},
			{"bad decision", http.MethodPost, "/v1/permissions/" + second.ID.String() + "/decision", `{"decision":"maybe"}`, 400, "decision"},
			{"no decision", http.MethodPost, "/v1/permissions/" + second.ID.String() + "/decision", `{}`, 400, "decision"},
			{"unknown field", http.MethodPost, "/v1/permissions/" + second.ID.String() + "/decision", `{"decision":"deny","why":"x"}`, 400, "why"},
			{"bad state", http.MethodGet, "/v1/permissions?state=done", ``, 400, "state"},
			{"bad agent", http.MethodGet, "/v1/permissions?agent=x", ``, 400, "agent"},
			{"bad limit", http.MethodGet, "/v1/permissions?limit=0", ``, 400, "limit"},
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
		if p, _ := st.GetPermission(context.Background(), second.ID); p.State != domain.PermissionPending {
			t.Fatalf("a refused request changed the record: %+v", p)
		}
		// An agent's key cannot decide (its own requests least of all).
		if r := h.call(http.MethodPost, "/v1/permissions/"+second.ID.String()+"/decision", w.agentKey,
			DecidePermissionRequest{Decision: domain.PermissionAllowOnce}, nil); r.status != http.StatusForbidden {
			t.Fatalf("agent key: %d %s", r.status, r.body)
		}
		if r := h.call(http.MethodGet, "/v1/permissions", w.agentKey, nil, nil); r.status != http.StatusForbidden {
			t.Fatalf("agent key list: %d %s", r.status, r.body)
		}
	})
}

func TestAnApproveReplyInTheRoomDecidesAndIsNotDeliveredToTheAgent(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newWorld(h)
	p := h.pendingPermission(w.agent.ID, &w.room.ID, "edit")
	reply := w.post(h, "approve "+p.ID.String()[:8])

	var got PermissionBody
	h.mustCall(http.MethodGet, "/v1/permissions/"+p.ID.String(), testToken, nil, &got, 200)
	if got.State != domain.PermissionAllowed || *got.Decision != domain.PermissionAllowOnce || *got.DecidedBy != "human:ada" {
		t.Fatalf("after the reply %+v", got)
	}
	var transcript MessageList
	h.mustCall(http.MethodGet, "/v1/rooms/"+w.room.ID.String()+"/messages", testToken, nil, &transcript, 200)
	if len(transcript.Items) != 1 || transcript.Items[0].ID != reply.ID {
		t.Fatalf("transcript %+v", transcript.Items)
	}
	if un, err := h.store.ListUnsettled(context.Background(), w.agent.ID, nil); err != nil || len(un) != 0 {
		t.Fatalf("unsettled inbound rows %+v, %v", un, err)
	}
	var rec ReceiveBody
	h.mustCall(http.MethodPost, "/v1/agents/"+w.agent.ID.String()+"/receive", w.agentKey, ReceiveRequest{WaitSeconds: ptr(0)}, &rec, 200)
	if rec.Message != nil {
		t.Fatalf("the agent received the approval as a turn: %+v", rec.Message)
	}
	// With nothing pending, the same words are an ordinary message the agent receives.
	again := w.post(h, "approve "+p.ID.String()[:8])
	h.mustCall(http.MethodPost, "/v1/agents/"+w.agent.ID.String()+"/receive", w.agentKey, ReceiveRequest{WaitSeconds: ptr(0)}, &rec, 200)
	if rec.Message == nil || rec.Message.ID != again.ID {
		t.Fatalf("receive %+v", rec)
	}
}

// The document's enumerations of permission states and decisions are the domain's tables.
func TestOpenAPIPermissionEnumsAreTheDomainTables(t *testing.T) {
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
					Enum []*string `json:"enum"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPIDocument(), &doc); err != nil {
		t.Fatal(err)
	}
	values := func(schema, prop string) []string {
		var out []string
		for _, v := range doc.Components.Schemas[schema].Properties[prop].Enum {
			if v != nil { // a nullable enum lists null too
				out = append(out, *v)
			}
		}
		return out
	}
	var stateParam []string
	for _, p := range doc.Paths["/v1/permissions"]["get"].Parameters {
		if p.Name == "state" {
			stateParam = p.Schema.Enum
		}
	}
	for name, got := range map[string][]string{
		"Permission.state":                 values("Permission", "state"),
		"GET /v1/permissions state":        stateParam,
		"Permission.decision":              values("Permission", "decision"),
		"DecidePermissionRequest.decision": values("DecidePermissionRequest", "decision"),
	} {
		want := domain.PermissionStates.Strings()
		if strings.HasSuffix(name, "decision") {
			want = domain.PermissionDecisions.Strings()
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s enum %v, want %v", name, got, want)
		}
	}
	if events := values("Event", "kind"); !slices.Equal(events, domain.EventKinds.Strings()) {
		t.Errorf("Event.kind enum %v, want every domain event kind %v", events, domain.EventKinds.Strings())
	}
}
