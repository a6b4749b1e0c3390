package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// live serves the harness over real HTTP, for long polls and event streams.
func (h *harness) live() *httptest.Server {
	srv := httptest.NewServer(h.srv.Handler())
	h.t.Cleanup(srv.Close)
	return srv
}

// call sends a JSON request over the harness and decodes a JSON answer into out.
func (h *harness) call(method, path, token string, in, out any) response {
	h.t.Helper()
	var body *strings.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			h.t.Fatal(err)
		}
		body = strings.NewReader(string(b))
	} else {
		body = strings.NewReader("")
	}
	r := h.do(method, path, token, body, "Content-Type", "application/json")
	if out != nil && r.status < 300 {
		if err := json.Unmarshal(r.body, out); err != nil {
			h.t.Fatalf("%s %s: %v: %s", method, path, err, r.body)
		}
	}
	return r
}

func (h *harness) mustCall(method, path, token string, in, out any, want int) {
	h.t.Helper()
	if r := h.call(method, path, token, in, out); r.status != want {
		h.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.status, want, r.body)
	}
}

type world struct {
	room     RoomBody
	agent    AgentBody
	agentKey string
}

// newWorld makes a room with the human "ada" and an attached agent.
func newWorld(h *harness) world {
	var w world
	h.mustCall(http.MethodPost, "/v1/rooms", testToken, CreateRoomRequest{Name: "lab"}, &w.room, 201)
	h.mustCall(http.MethodPost, "/v1/rooms/"+w.room.ID.String()+"/participants", testToken, map[string]string{"human": "ada"}, nil, 201)
	h.mustCall(http.MethodPost, "/v1/agents", testToken, CreateAgentRequest{Name: "helper", Kind: domain.AgentAttached}, &w.agent, 201)
	if !strings.HasPrefix(w.agent.APIKey, "jam_agent_") {
		h.t.Fatalf("attached agent key %q", w.agent.APIKey)
	}
	w.agentKey = w.agent.APIKey
	h.mustCall(http.MethodPost, "/v1/rooms/"+w.room.ID.String()+"/participants", testToken, map[string]string{"agent_id": w.agent.ID.String()}, nil, 201)
	return w
}

func (w world) post(h *harness, text string) MessageBody {
	var m MessageBody
	h.mustCall(http.MethodPost, "/v1/rooms/"+w.room.ID.String()+"/messages", testToken, PostMessageRequest{Text: text}, &m, 201)
	return m
}

func TestAnAttachedAgentReceivesRepliesAndAcks(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newWorld(h)
	// The agent key is shown once: reading the agent back does not reveal it.
	var again AgentBody
	h.mustCall(http.MethodGet, "/v1/agents/"+w.agent.ID.String(), testToken, nil, &again, 200)
	if again.APIKey != "" {
		t.Fatal("the API key was shown twice")
	}
	q := w.post(h, "what is 2+2?")
	var got ReceiveBody
	h.mustCall(http.MethodPost, "/v1/agents/"+w.agent.ID.String()+"/receive", w.agentKey, ReceiveRequest{}, &got, 200)
	if got.Message == nil || got.Message.ID != q.ID || got.AckRequiredMessageID != nil || got.LeaseID == uuid.Nil {
		t.Fatalf("receive %+v", got)
	}
	var settled SettleBody
	h.mustCall(http.MethodPost, "/v1/messages/"+q.ID.String()+"/reply", w.agentKey, ReplyRequest{Text: "4"}, &settled, 200)
	if settled.Reply == nil || settled.Reply.ReplyTo == nil || *settled.Reply.ReplyTo != q.ID || *settled.Reply.AuthorAgentID != w.agent.ID {
		t.Fatalf("reply %+v", settled)
	}
	second := w.post(h, "thanks")
	h.mustCall(http.MethodPost, "/v1/agents/"+w.agent.ID.String()+"/receive", w.agentKey, ReceiveRequest{LeaseID: ptr(got.LeaseID.String())}, &got, 200)
	if got.Message == nil || got.Message.ID != second.ID {
		t.Fatalf("second receive %+v", got)
	}
	h.mustCall(http.MethodPost, "/v1/messages/"+second.ID.String()+"/ack", w.agentKey, nil, &settled, 200)
	var transcript MessageList
	h.mustCall(http.MethodGet, "/v1/rooms/"+w.room.ID.String()+"/messages", testToken, nil, &transcript, 200)
	if len(transcript.Items) != 3 || transcript.Items[1].Text != "4" || transcript.Items[2].ID != second.ID {
		t.Fatalf("transcript %+v", transcript.Items)
	}
	// Nothing is left to deliver: a short wait returns no message.
	h.mustCall(http.MethodPost, "/v1/agents/"+w.agent.ID.String()+"/receive", w.agentKey, ReceiveRequest{WaitSeconds: ptr(0)}, &got, 200)
	if got.Message != nil {
		t.Fatalf("settled message delivered again: %+v", got.Message)
	}
}

func ptr[T any](v T) *T { return &v }

func TestAReceiverThatDiesGetsTheSameMessageAgain(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newWorld(h)
	m := w.post(h, "hello")
	path := "/v1/agents/" + w.agent.ID.String() + "/receive"
	var first, again ReceiveBody
	h.mustCall(http.MethodPost, path, w.agentKey, ReceiveRequest{}, &first, 200)
	// The receiver crashed before replying; it re-arms the same lease.
	h.mustCall(http.MethodPost, path, w.agentKey, ReceiveRequest{LeaseID: ptr(first.LeaseID.String())}, &again, 200)
	if again.Message == nil || again.Message.ID != m.ID || again.AckRequiredMessageID == nil || *again.AckRequiredMessageID != m.ID || again.DeliveryCount != 2 {
		t.Fatalf("re-armed receive %+v", again)
	}
	h.mustCall(http.MethodPost, "/v1/messages/"+m.ID.String()+"/ack", w.agentKey, nil, nil, 200)
	h.mustCall(http.MethodPost, "/v1/messages/"+m.ID.String()+"/ack", w.agentKey, nil, nil, 200) // idempotent
	if r := h.call(http.MethodPost, "/v1/messages/"+m.ID.String()+"/reply", w.agentKey, ReplyRequest{Text: "late"}, nil); r.status != 409 {
		t.Fatalf("reply after ack: %d %s", r.status, r.body)
	}
}

func TestAWaitingReceiverIsWokenByANewMessage(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newWorld(h)
	srv := h.live()
	path := srv.URL + "/v1/agents/" + w.agent.ID.String() + "/receive"

	// One receiver waits; a message posted meanwhile wakes it.
	got := make(chan ReceiveBody, 1)
	go func() {
		var b ReceiveBody
		_ = postJSON(srv.Client(), path, w.agentKey, ReceiveRequest{WaitSeconds: ptr(20)}, &b)
		got <- b
	}()
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	m := w.post(h, "wake up")
	select {
	case b := <-got:
		if b.Message == nil || b.Message.ID != m.ID {
			t.Fatalf("woken receive %+v", b)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("the waiting receiver took %s to see the message", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting receiver never got the message")
	}
}

func TestASecondWaitOnOneLeaseIsAConflictAndADroppedWaiterFreesIt(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newWorld(h)
	srv := h.live()
	lease := uuid.NewString()
	path := srv.URL + "/v1/agents/" + w.agent.ID.String() + "/receive"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b, _ := json.Marshal(ReceiveRequest{LeaseID: &lease, WaitSeconds: ptr(30)})
		// A probe below may hold the lease for an instant; the long wait retries until it is
		// the one holding it.
		for ctx.Err() == nil {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, path, strings.NewReader(string(b)))
			req.Header.Set("Authorization", "Bearer "+w.agentKey)
			req.Header.Set("Content-Type", "application/json")
			resp, err := srv.Client().Do(req)
			if err != nil {
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusConflict {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	wait.Eventually(t, 5*time.Second, func() error {
		if status := postJSON(srv.Client(), path, w.agentKey, ReceiveRequest{LeaseID: &lease, WaitSeconds: ptr(0)}, nil); status != http.StatusConflict {
			return fmt.Errorf("answered %d", status)
		}
		return nil
	}, "a second wait on a held lease to answer 409")
	cancel() // the first waiter goes away
	<-done
	wait.Eventually(t, 5*time.Second, func() error {
		if status := postJSON(srv.Client(), path, w.agentKey, ReceiveRequest{LeaseID: &lease, WaitSeconds: ptr(0)}, nil); status != 200 {
			return fmt.Errorf("answered %d", status)
		}
		return nil
	}, "the dropped waiter to free the lease")
}

func postJSON(c *http.Client, url, token string, in, out any) int {
	b, _ := json.Marshal(in)
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(string(b)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode < 300 {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

func TestAgentsMaySettleOnlyTheirOwnMessages(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newWorld(h)
	var other AgentBody
	h.mustCall(http.MethodPost, "/v1/agents", testToken, CreateAgentRequest{Name: "other", Kind: domain.AgentAttached}, &other, 201)
	m := w.post(h, "for helper only")
	cases := []struct {
		name, path, token string
		status            int
	}{
		{"another agent's message", "/v1/messages/" + m.ID.String() + "/reply", other.APIKey, 403},
		{"another agent's ack", "/v1/messages/" + m.ID.String() + "/ack", other.APIKey, 403},
		{"the operator", "/v1/messages/" + m.ID.String() + "/ack", testToken, 403},
		{"a missing message", "/v1/messages/" + uuid.NewString() + "/ack", w.agentKey, 404},
		{"a non-UUID id", "/v1/messages/42/ack", w.agentKey, 400},
		{"another agent's receive", "/v1/agents/" + w.agent.ID.String() + "/receive", other.APIKey, 403},
		{"an agent on an operator route", "/v1/rooms", w.agentKey, 403},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var in any = ReplyRequest{Text: "x"}
			method := http.MethodPost
			if c.path == "/v1/rooms" {
				method, in = http.MethodGet, nil
			}
			r := h.call(method, c.path, c.token, in, nil)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			r.errorBody(t)
		})
	}
}

func TestBadBandInputGetsClearErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newWorld(h)
	var owned AgentBody
	h.mustCall(http.MethodPost, "/v1/agents", testToken, CreateAgentRequest{Name: "builder", Kind: domain.AgentOwned}, &owned, 201)
	// An owned agent made outside the API (an older record) may have no template at all.
	bare, err := h.store.CreateAgent(context.Background(), domain.Agent{ID: uuid.New(), Name: "bare", Kind: domain.AgentOwned, CreatedAt: time.Now()}, "")
	if err != nil {
		t.Fatal(err)
	}
	templates := "/v1/agents/" + owned.ID.String() + "/templates"
	messages := "/v1/rooms/" + w.room.ID.String() + "/messages"
	cases := []struct {
		name   string
		method string
		path   string
		body   string
		status int
		field  string
	}{
		{"unknown transport", "POST", templates, `{"alias":"d","transport":"gemini"}`, 400, "transport"},
		{"shared with direct host", "POST", templates, `{"alias":"d","transport":"codex-app-server","placement":"shared_agent_host","sandbox":{"enabled":true,"workspace_source":"direct_host","host_path":"/src"}}`, 400, "sandbox"},
		{"opencode shared", "POST", templates, `{"alias":"d","transport":"opencode","placement":"shared_agent_host","sandbox":{"enabled":true}}`, 400, "sandbox"},
		{"unknown template field", "POST", templates, `{"alias":"d","transport":"acp","sandbox":{"enabled":false,"gpu":true}}`, 400, "sandbox.gpu"},
		{"empty message", "POST", messages, `{"text":""}`, 400, "text"},
		{"blank message", "POST", messages, `{"text":"  \n "}`, 400, "text"},
		{"NUL in a message", "POST", messages, `{"text":"a\u0000b"}`, 400, "text"},
		{"NUL in a briefing", "PATCH", "/v1/agents/" + owned.ID.String(), `{"briefing":"x\u0000"}`, 400, "briefing"},
		{"long message", "POST", messages, `{"text":"` + strings.Repeat("x", domain.MaxMessageBytes+1) + `"}`, 400, "text"},
		{"10 MB message", "POST", messages, `{"text":"` + strings.Repeat("x", 10<<20) + `"}`, 413, ""},
		{"non-UUID room", "GET", "/v1/rooms/not-a-uuid", ``, 400, "id"},
		{"upper-case UUID", "GET", "/v1/rooms/" + strings.ToUpper(w.room.ID.String()), ``, 400, "id"},
		{"non-UUID agent", "POST", "/v1/rooms/" + w.room.ID.String() + "/participants", `{"agent_id":"7"}`, 400, "agent_id"},
		{"agent and human", "POST", "/v1/rooms/" + w.room.ID.String() + "/participants", `{"agent_id":"` + owned.ID.String() + `","human":"bo"}`, 400, "agent_id"},
		{"unknown agent", "POST", "/v1/rooms/" + w.room.ID.String() + "/participants", `{"agent_id":"` + uuid.NewString() + `"}`, 404, ""},
		{"owned agent without template", "POST", "/v1/rooms/" + w.room.ID.String() + "/participants", `{"agent_id":"` + bare.ID.String() + `"}`, 422, ""},
		{"template of an attached agent", "POST", "/v1/agents", `{"name":"x","kind":"attached","template":{"alias":"d","transport":"acp"}}`, 400, "template"},
		{"bad first template", "POST", "/v1/agents", `{"name":"y","kind":"owned","template":{"alias":"d","transport":"gemini"}}`, 400, "transport"},
		{"duplicate agent name", "POST", "/v1/agents", `{"name":"helper","kind":"owned"}`, 409, ""},
		{"bad agent kind", "POST", "/v1/agents", `{"name":"x","kind":"robot"}`, 400, "kind"},
		{"bad paging", "GET", messages + "?after=-1&limit=9999", ``, 400, "after"},
		{"apply and restart", "PUT", "/v1/templates/" + uuid.NewString(), `{"alias":"d","transport":"acp","apply_mode":"apply_and_restart"}`, 404, ""},
		{"author not in room", "POST", messages, `{"text":"hi","author":"mallory"}`, 422, ""},
		{"bad event filter", "GET", "/v1/events?room=x", ``, 400, "room"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := h.do(c.method, c.path, testToken, strings.NewReader(c.body), "Content-Type", "application/json")
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %.300s", r.status, c.status, r.body)
			}
			e := r.errorBody(t)
			if c.field != "" && (len(e.Validations) == 0 || e.Validations[0].Field != c.field) {
				t.Fatalf("validations %+v, want field %s", e.Validations, c.field)
			}
		})
	}
}

func TestOwnedAgentMembershipBindsAndAReaddReusesTheSession(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var room RoomBody
	h.mustCall(http.MethodPost, "/v1/rooms", testToken, CreateRoomRequest{Name: "lab"}, &room, 201)
	var owned AgentBody
	h.mustCall(http.MethodPost, "/v1/agents", testToken, CreateAgentRequest{Name: "builder", Kind: domain.AgentOwned}, &owned, 201)
	if owned.APIKey != "" {
		t.Fatal("an owned agent got an API key")
	}
	// Created with its parked default template: the embedded default provider.
	var tmpls TemplateList
	h.mustCall(http.MethodGet, "/v1/agents/"+owned.ID.String()+"/templates", testToken, nil, &tmpls, 200)
	if len(tmpls.Items) != 1 {
		t.Fatalf("templates %+v", tmpls)
	}
	tmpl := tmpls.Items[0]
	if tmpl.Alias != "default" || tmpl.Transport != domain.TransportACP || tmpl.Placement == nil || *tmpl.Placement != domain.PlacementDedicated || tmpl.DesiredGeneration != 1 || tmpl.IdlePolicy != domain.IdleAllow {
		t.Fatalf("template %+v", tmpl)
	}
	var p ParticipantBody
	h.mustCall(http.MethodPost, "/v1/rooms/"+room.ID.String()+"/participants", testToken, map[string]string{"agent_id": owned.ID.String()}, &p, 201)
	if p.Session == nil || p.Session.Reused || p.Session.Alias != "default-"+room.ID.String() {
		t.Fatalf("participant %+v", p)
	}
	var sessions SessionList
	h.mustCall(http.MethodGet, "/v1/sessions?room="+room.ID.String(), testToken, nil, &sessions, 200)
	if len(sessions.Items) != 1 || sessions.Items[0].RuntimeSessionID != p.Session.RuntimeSessionID ||
		sessions.Items[0].TemplateID != tmpl.ID || sessions.Items[0].Presence != domain.PresenceUnknown ||
		sessions.Items[0].WorkflowID != "RoomSession:"+p.Session.RuntimeSessionID.String() {
		t.Fatalf("sessions %+v", sessions.Items)
	}
	h.mustCall(http.MethodDelete, "/v1/rooms/"+room.ID.String()+"/participants/"+p.ID.String(), testToken, nil, nil, 204)
	var readd ParticipantBody
	h.mustCall(http.MethodPost, "/v1/rooms/"+room.ID.String()+"/participants", testToken, map[string]string{"agent_id": owned.ID.String()}, &readd, 201)
	if readd.Session == nil || !readd.Session.Reused || readd.Session.RuntimeSessionID != p.Session.RuntimeSessionID {
		t.Fatalf("re-add %+v", readd.Session)
	}
	var methods []string
	for _, c := range h.lifecycle.Calls() {
		methods = append(methods, fmt.Sprintf("%s(fresh=%t)", c.Method, c.Fresh))
	}
	// Only the first binding is fresh: the re-add must reach the retired session's workflow.
	if fmt.Sprint(methods) != "[RoomBound(fresh=true) RoomUnbound(fresh=false) RoomBound(fresh=false)]" {
		t.Fatalf("lifecycle calls %v", methods)
	}
}

func TestRunIntentIsKeptAndDeleteStopsRuntimesFirst(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var owned AgentBody
	h.mustCall(http.MethodPost, "/v1/agents", testToken, CreateAgentRequest{Name: "builder", Kind: domain.AgentOwned}, &owned, 201)
	id := owned.ID.String()
	h.mustCall(http.MethodPost, "/v1/agents/"+id+"/stop", testToken, nil, &owned, 200)
	if owned.RunIntent != domain.RunIntentStopped {
		t.Fatalf("after stop: %s", owned.RunIntent)
	}
	h.mustCall(http.MethodGet, "/v1/agents/"+id, testToken, nil, &owned, 200)
	if owned.RunIntent != domain.RunIntentStopped {
		t.Fatal("the stop was not kept")
	}
	h.mustCall(http.MethodPost, "/v1/agents/"+id+"/restart", testToken, nil, &owned, 200)
	h.mustCall(http.MethodPatch, "/v1/agents/"+id, testToken, map[string]string{"briefing": "be brief"}, &owned, 200)
	if owned.Briefing != "be brief" || owned.RunIntent != domain.RunIntentRunning {
		t.Fatalf("agent %+v", owned)
	}
	h.mustCall(http.MethodDelete, "/v1/agents/"+id, testToken, nil, nil, 204)
	h.mustCall(http.MethodGet, "/v1/agents/"+id, testToken, nil, nil, 404)
	calls := h.lifecycle.Calls()
	if len(calls) != 3 || calls[0].Intent != domain.RunIntentStopped || !calls[1].Restart || calls[2].Method != "AgentDeleting" {
		t.Fatalf("lifecycle calls %+v", calls)
	}
}

type sseEvent struct {
	id, kind string
	data     EventBody
}

// readEvents reads log events (not the stream's control frames) until n arrived or the
// stream ends.
func readEvents(t *testing.T, resp *http.Response, n int) []sseEvent {
	t.Helper()
	var out []sseEvent
	eachEvent(resp, func(e sseEvent) bool {
		if !domain.StreamControls.Has(domain.StreamControl(e.kind)) {
			out = append(out, e)
		}
		return len(out) < n
	})
	return out
}

// eachEvent calls fn for every server-sent event until fn returns false or the stream ends.
func eachEvent(resp *http.Response, fn func(sseEvent) bool) {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var cur sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.kind = line[7:]
		case strings.HasPrefix(line, "data: "):
			_ = json.Unmarshal([]byte(line[6:]), &cur.data)
		case line == "" && cur.kind != "":
			if !fn(cur) {
				return
			}
			cur = sseEvent{}
		}
	}
}

func openStream(t *testing.T, url, token, lastID string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream answered %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return resp
}

func TestTheEventStreamOpensWithItsPositionAndResetsAFutureID(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newWorld(h)
	srv := h.live()
	var open, reset sseEvent
	resp := openStream(t, srv.URL+"/v1/events?room="+w.room.ID.String(), testToken, "")
	eachEvent(resp, func(e sseEvent) bool { open = e; return false })
	resp.Body.Close()
	if open.kind != string(domain.StreamOpen) || open.id == "" || open.id == "0" {
		t.Fatalf("first frame %+v, want open with the current position", open)
	}
	resp = openStream(t, srv.URL+"/v1/events", testToken, "999999")
	eachEvent(resp, func(e sseEvent) bool { reset = e; return false })
	resp.Body.Close()
	if reset.kind != string(domain.StreamReset) {
		t.Fatalf("first frame for a future id %+v, want reset", reset)
	}
}

func TestTheEventStreamResumesWithoutLossOrDuplication(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newWorld(h)
	srv := h.live()
	url := srv.URL + "/v1/events?room=" + w.room.ID.String()
	resp := openStream(t, url, testToken, "0")
	// Replay from the beginning of the room: creation and both memberships.
	first := readEvents(t, resp, 3)
	resp.Body.Close()
	if len(first) != 3 || first[0].kind != string(domain.EventRoomCreated) || first[1].kind != string(domain.EventRoomAdded) {
		t.Fatalf("replayed %+v", first)
	}
	last := first[len(first)-1].id
	// While disconnected, messages are posted.
	var posted []uuid.UUID
	for i := 0; i < 5; i++ {
		posted = append(posted, w.post(h, fmt.Sprint("m", i)).ID)
	}
	resp = openStream(t, url, testToken, last)
	defer resp.Body.Close()
	var (
		mu   sync.Mutex
		seen []sseEvent
	)
	go eachEvent(resp, func(e sseEvent) bool {
		if !domain.StreamControls.Has(domain.StreamControl(e.kind)) {
			mu.Lock()
			seen = append(seen, e)
			mu.Unlock()
		}
		return true
	})
	// And more while connected.
	for i := 5; i < 10; i++ {
		posted = append(posted, w.post(h, fmt.Sprint("m", i)).ID)
	}
	wait.Eventually(t, 10*time.Second, func() error {
		mu.Lock()
		var got []uuid.UUID
		ids := map[string]bool{}
		dup := false
		for _, e := range seen {
			if ids[e.id] {
				dup = true
			}
			ids[e.id] = true
			if e.kind == string(domain.EventMessagePosted) {
				var p struct{ ID uuid.UUID }
				_ = json.Unmarshal(e.data.Payload, &p)
				got = append(got, p.ID)
			}
		}
		mu.Unlock()
		if dup {
			t.Fatal("an event was delivered twice")
		}
		if fmt.Sprint(got) != fmt.Sprint(posted) {
			return fmt.Errorf("delivered %d of %d messages in order: %v", len(got), len(posted), got)
		}
		return nil
	}, "the stream to deliver every message in order")
}
