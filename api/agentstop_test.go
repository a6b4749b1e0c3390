package api

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// postStatus posts in as JSON and returns the status and, for an error, its code.
func postStatus(t *testing.T, c *http.Client, url, token string, in any) (int, string) {
	t.Helper()
	b, _ := json.Marshal(in)
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(string(b)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var e ErrorBody
	if resp.StatusCode >= 300 {
		_ = json.NewDecoder(resp.Body).Decode(&e)
	}
	return resp.StatusCode, e.Code
}

// Stopping an attached agent cuts off its key without deleting it: a waiting receive ends,
// every route it reaches with its key answers 403 agent_stopped, messages posted meanwhile
// stay queued for it, and after start it receives them and settles as before.
func TestAStoppedAttachedAgentsKeyIsRefusedUntilStartAndItsQueueIsKept(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newWorld(h)
	srv := h.live()
	id := w.agent.ID.String()
	receiveURL := srv.URL + "/v1/agents/" + id + "/receive"
	before := w.post(h, "before the stop")

	// A receiver waits on a lease (it retries while a probe below holds the lease for an
	// instant); the probe sees 409 once the receiver is the one waiting.
	lease := uuid.NewString()
	type answer struct {
		status int
		code   string
	}
	waited := make(chan answer, 1)
	var got ReceiveBody
	h.mustCall(http.MethodPost, "/v1/agents/"+id+"/receive", w.agentKey, ReceiveRequest{LeaseID: &lease}, &got, 200)
	h.mustCall(http.MethodPost, "/v1/messages/"+before.ID.String()+"/ack", w.agentKey, nil, nil, 200)
	go func() {
		for {
			status, code := postStatus(t, srv.Client(), receiveURL, w.agentKey, ReceiveRequest{LeaseID: &lease, WaitSeconds: ptr(30)})
			if status != http.StatusConflict {
				waited <- answer{status, code}
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	wait.Eventually(t, 5*time.Second, func() bool {
		status, _ := postStatus(t, srv.Client(), receiveURL, w.agentKey, ReceiveRequest{LeaseID: &lease, WaitSeconds: ptr(0)})
		return status == http.StatusConflict
	}, "the receiver to wait on its lease")

	var agent AgentBody
	h.mustCall(http.MethodPost, "/v1/agents/"+id+"/stop", testToken, nil, &agent, 200)
	if agent.RunIntent != domain.RunIntentStopped || agent.Kind != domain.AgentAttached {
		t.Fatalf("after stop: %+v", agent)
	}
	select {
	case a := <-waited:
		if a.status != http.StatusForbidden || a.code != domain.CodeAgentStopped {
			t.Fatalf("the waiting receive answered %d %s, want 403 %s", a.status, a.code, domain.CodeAgentStopped)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting receive went on after the stop")
	}

	// Posted while stopped: queued, not delivered.
	during := w.post(h, "while stopped")
	refused := []struct {
		path string
		body any
	}{
		{"/v1/agents/" + id + "/receive", ReceiveRequest{WaitSeconds: ptr(0)}},
		{"/v1/agents/" + id + "/receive", ReceiveRequest{LeaseID: &lease}},
		{"/v1/messages/" + during.ID.String() + "/reply", ReplyRequest{Text: "no"}},
		{"/v1/messages/" + during.ID.String() + "/ack", nil},
		{"/v1/rooms/" + w.room.ID.String() + "/messages", PostMessageRequest{Text: "let me in"}},
	}
	for _, c := range refused {
		r := h.call(http.MethodPost, c.path, w.agentKey, c.body, nil)
		if r.status != http.StatusForbidden || r.errorBody(t).Code != domain.CodeAgentStopped {
			t.Fatalf("POST %s with a stopped agent's key: %d %s", c.path, r.status, r.body)
		}
	}
	// The operator still reads and posts; the agent is listed stopped.
	h.mustCall(http.MethodGet, "/v1/agents/"+id, testToken, nil, &agent, 200)
	if agent.RunIntent != domain.RunIntentStopped {
		t.Fatalf("the stop was not kept: %+v", agent)
	}
	// An attached agent has no runtime to restart.
	if r := h.call(http.MethodPost, "/v1/agents/"+id+"/restart", testToken, nil, nil); r.status != http.StatusUnprocessableEntity {
		t.Fatalf("restart of an attached agent: %d %s", r.status, r.body)
	}

	h.mustCall(http.MethodPost, "/v1/agents/"+id+"/start", testToken, nil, &agent, 200)
	if agent.RunIntent != domain.RunIntentRunning {
		t.Fatalf("after start: %+v", agent)
	}
	h.mustCall(http.MethodPost, "/v1/agents/"+id+"/receive", w.agentKey, ReceiveRequest{WaitSeconds: ptr(0)}, &got, 200)
	if got.Message == nil || got.Message.ID != during.ID {
		t.Fatalf("after start, receive gave %+v, want the message posted while stopped", got.Message)
	}
	h.mustCall(http.MethodPost, "/v1/messages/"+during.ID.String()+"/reply", w.agentKey, ReplyRequest{Text: "back"}, nil, 200)
	h.mustCall(http.MethodPost, "/v1/rooms/"+w.room.ID.String()+"/messages", w.agentKey, PostMessageRequest{Text: "hello again"}, nil, 201)

	// The code is documented.
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]struct {
					Enum []string `json:"enum"`
				} `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPIDocument(), &doc); err != nil || !slices.Contains(doc.Components.Schemas["Error"].Properties["code"].Enum, domain.CodeAgentStopped) {
		t.Fatalf("the Error schema does not list %s (%v)", domain.CodeAgentStopped, err)
	}

	// An attached agent has no runtimes: the lifecycle is not asked to stop any.
	for _, c := range h.lifecycle.Calls() {
		if c.Method == "AgentRunIntent" {
			t.Fatalf("lifecycle told about an attached agent's intent: %+v", c)
		}
	}
}
