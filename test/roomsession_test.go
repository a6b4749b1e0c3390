package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/temporaltest"
	"github.com/jam-dev/jam/internal/testsupport/testagent"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// An owned agent's rooms under `jam dev`, through the HTTP API only: dormant until messaged,
// answered, reaped when idle, woken on the same provider session, and controlled with
// validated updates.
func TestOwnedAgentRoomsWakeOnMessageAndAreReapedWhenIdle(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "jam-home")
	exe := testagent.Binary(t)
	d := startDevEnv(t, home, ownedEnv(t, t.TempDir(), "JAM_OWNED_RUNTIME_IDLE_SECS=2"))
	c, ctx, pid := d.client, context.Background(), d.proc.cmd.Process.Pid

	var agent api.AgentBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "builder", Kind: domain.AgentOwned}, &agent))
	room, session := roomWith(t, c, "lab", agent.ID)

	// 200 more rooms bound to the same agent start nothing either.
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	dormant := make([]uuid.UUID, 200)
	for i := range dormant {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			_, dormant[i] = roomWith(t, c, fmt.Sprintf("room-%d", i), agent.ID)
		}()
	}
	wg.Wait()
	t.Logf("bound 200 rooms in %s", time.Since(start).Round(time.Millisecond))
	s := awaitPresence(t, c, session, domain.PresenceDormant, 10*time.Second)
	if s.WorkflowID != contract.RoomSessionID(session) || !strings.Contains(s.WorkflowURL, "/workflows/"+s.WorkflowID) {
		t.Fatalf("session workflow id %q url %q", s.WorkflowID, s.WorkflowURL)
	}
	if got := providerChildren(t, pid, exe); len(got) != 0 {
		t.Fatalf("201 bound rooms started %d processes before any message", len(got))
	}
	// A new binding under the lazy lifecycle starts no workflow either: the binding row is the
	// registration, and the room's first message starts its workflow.
	tc := temporaltest.Dial(t, d.temporal)
	if s := getSession(t, c, dormant[199]); s.Presence != domain.PresenceDormant || s.Phase != domain.PhaseDormant {
		t.Fatalf("a bound, never messaged room shows %q/%q, want dormant", s.Presence, s.Phase)
	}
	for _, id := range []uuid.UUID{session, dormant[0], dormant[199]} {
		if _, err := tc.DescribeWorkflowExecution(ctx, contract.RoomSessionID(id), ""); !contract.IsNotFound(err) {
			t.Fatalf("binding room session %s started its workflow (%v), want none until a message", id, err)
		}
	}

	// The first message wakes the room and is answered.
	first := postText(t, c, room.ID, "[[count]] hello")
	if r := awaitReply(t, c, first, 30*time.Second); !strings.Contains(r.Text, "turns remembered: 0") {
		t.Fatalf("first reply %q", r.Text)
	}
	live := awaitPresence(t, c, session, domain.PresenceLive, 5*time.Second)
	if live.Runtime == nil || live.Runtime.PID == 0 || live.Runtime.Node != devNode {
		t.Fatalf("live session %+v", live.Runtime)
	}
	awaitChildren(t, pid, exe, 1, 5*time.Second)

	// Idle for 2 s: reaped with BeforeStop, no process left.
	awaitPresence(t, c, session, domain.PresenceDormant, 20*time.Second)
	awaitChildren(t, pid, exe, 0, 5*time.Second)
	awaitEvent(t, c, room.ID, domain.EventRuntimeStopped, func(p json.RawMessage) bool {
		var v struct {
			Session uuid.UUID               `json:"runtime_session"`
			Reason  domain.CheckpointReason `json:"reason"`
		}
		return json.Unmarshal(p, &v) == nil && v.Session == session && v.Reason == domain.CheckpointBeforeStop
	}, 10*time.Second)

	// The next message wakes it on the same provider session: the agent remembers.
	second := postText(t, c, room.ID, "[[count]] again")
	if r := awaitReply(t, c, second, 30*time.Second); !strings.Contains(r.Text, "turns remembered: 1") {
		t.Fatalf("second reply %q: the provider session was not resumed", r.Text)
	}
	if n := len(repliesTo(t, c, first)); n != 1 {
		t.Fatalf("first message answered %d times", n)
	}

	// Bad input to every update is rejected before it reaches history.
	bad := []struct {
		name, path, body string
		status           int
	}{
		{"stop with a bogus reason", "/v1/sessions/" + session.String() + "/stop", `{"reason":"because"}`, 400},
		{"stop of an unknown session", "/v1/sessions/" + uuid.NewString() + "/stop", `{}`, 404},
		{"restart of an unknown session", "/v1/sessions/" + uuid.NewString() + "/restart", ``, 404},
		{"stop with a malformed body", "/v1/sessions/" + session.String() + "/stop", `{"reason":7}`, 400},
	}
	for _, b := range bad {
		var body any
		if b.body != "" {
			body = json.RawMessage(b.body)
		}
		raw, err := c.DoRaw(ctx, http.MethodPost, b.path, body)
		if !isStatus(err, b.status) {
			t.Fatalf("%s: %v %s, want %d", b.name, err, raw, b.status)
		}
	}
	if n := acceptedUpdates(t, tc, session); n != 0 {
		t.Fatalf("%d updates entered history, want none", n)
	}

	// Session scope: stop holds this one room down with its message queued; restart brings
	// it back and the message is answered. A sibling room is never bounced.
	sibling, siblingSession := roomWith(t, c, "sibling", agent.ID)
	// The runtime is told its room: its own name, the room's and who else is there; the
	// first turn after a human joins names them.
	sm := postText(t, c, sibling.ID, "[[roster]] sibling here")
	if r := awaitReply(t, c, sm, 30*time.Second); !strings.Contains(r.Text, `roster: You are builder, an agent in the room "sibling". Participants: ada (human).`) {
		t.Fatalf("the runtime's roster: %q", r.Text)
	}
	siblingPID := runtimeOf(t, awaitPresence(t, c, siblingSession, domain.PresenceLive, 5*time.Second)).PID
	must(t, c.Do(ctx, http.MethodPost, "/v1/rooms/"+sibling.ID.String()+"/participants", map[string]string{"human": "bob"}, nil))
	var joined api.MessageBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/rooms/"+sibling.ID.String()+"/messages", api.PostMessageRequest{Text: "[[roster]] and now?", Author: "ada"}, &joined))
	if r := awaitReply(t, c, joined, 30*time.Second); !strings.Contains(r.Text, "membership: joined: bob (human).") ||
		!strings.Contains(r.Text, "Participants: ada (human), bob (human).") {
		t.Fatalf("the turn after bob joined: %q", r.Text)
	}
	var stopped api.SessionBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/sessions/"+session.String()+"/stop", nil, &stopped))
	if stopped.Presence != domain.PresenceDormant || stopped.Runtime == nil || !stopped.Runtime.Held {
		t.Fatalf("stopped session %+v %+v", stopped.Presence, stopped.Runtime)
	}
	held := postText(t, c, room.ID, "are you there?")
	wait.Never(t, time.Second, func() bool { return len(repliesTo(t, c, held)) != 0 }, "a stopped session answering")
	must(t, c.Do(ctx, http.MethodPost, "/v1/sessions/"+session.String()+"/restart", nil, nil))
	awaitReply(t, c, held, 30*time.Second)
	if s := getSession(t, c, siblingSession); s.Runtime == nil || s.Runtime.PID != siblingPID {
		t.Fatalf("the sibling room was bounced: %+v", s.Runtime)
	}
	if n := acceptedUpdates(t, tc, session); n != 2 {
		t.Fatalf("%d updates in history, want the stop and the restart", n)
	}

	// Removing the agent from the room retires the session: no process, updates refused.
	var roomBody api.RoomBody
	must(t, c.Do(ctx, http.MethodGet, "/v1/rooms/"+room.ID.String(), nil, &roomBody))
	for _, p := range roomBody.Participants {
		if p.AgentID != nil && *p.AgentID == agent.ID {
			must(t, c.Do(ctx, http.MethodDelete, "/v1/rooms/"+room.ID.String()+"/participants/"+p.ID.String(), nil, nil))
		}
	}
	if _, err := c.DoRaw(ctx, http.MethodPost, "/v1/sessions/"+session.String()+"/restart", nil); !isStatus(err, http.StatusConflict) {
		t.Fatalf("restart of a removed session: %v", err)
	}
	awaitChildren(t, pid, exe, 1, 10*time.Second) // only the sibling's

	// Deleting the agent stops every runtime first and ends its session workflows.
	must(t, c.Do(ctx, http.MethodDelete, "/v1/agents/"+agent.ID.String(), nil, nil))
	awaitChildren(t, pid, exe, 0, 10*time.Second)
	desc, err := tc.DescribeWorkflowExecution(ctx, contract.RoomSessionID(siblingSession), "")
	if err != nil || desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		t.Fatalf("sibling session workflow after the agent's deletion: %v %v", desc.GetWorkflowExecutionInfo().GetStatus(), err)
	}
}

// acceptedUpdates counts the updates in the current run of a session's workflow history.
func acceptedUpdates(t *testing.T, tc client.Client, session uuid.UUID) int {
	t.Helper()
	return historyCount(t, tc, session, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)
}

// historyCount counts the events of one type in the current run of a session's workflow.
func historyCount(t *testing.T, tc client.Client, session uuid.UUID, typ enumspb.EventType) int {
	t.Helper()
	return countHistory(t, tc, session, func(e *historypb.HistoryEvent) bool { return e.GetEventType() == typ })
}

func countHistory(t *testing.T, tc client.Client, session uuid.UUID, match func(*historypb.HistoryEvent) bool) int {
	t.Helper()
	it := tc.GetWorkflowHistory(context.Background(), contract.RoomSessionID(session), "", false,
		enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	n := 0
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatalf("history of %s: %v", session, err)
		}
		if match(e) {
			n++
		}
	}
	return n
}

// Under the eager lifecycle (JAM_OWNED_RUNTIME_LAZY=0) binding a room starts its runtime at
// once, without a message: the API, not only the worker, reads the mode, since only the
// lazy lifecycle lets a new binding start no workflow.
func TestUnderTheEagerLifecycleABoundRoomGoesLiveWithoutAMessage(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "jam-home")
	exe := testagent.Binary(t)
	d := startDevEnv(t, home, ownedEnv(t, t.TempDir(), "JAM_OWNED_RUNTIME_LAZY=0"))
	c, ctx, pid := d.client, context.Background(), d.proc.cmd.Process.Pid

	var agent api.AgentBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "eager", Kind: domain.AgentOwned}, &agent))
	room, session := roomWith(t, c, "lab", agent.ID)
	awaitPresence(t, c, session, domain.PresenceLive, 30*time.Second)
	awaitChildren(t, pid, exe, 1, 5*time.Second)
	if r := awaitReply(t, c, postText(t, c, room.ID, "[[count]] hi"), 30*time.Second); !strings.Contains(r.Text, "turns remembered: 0") {
		t.Fatalf("reply %q", r.Text)
	}
}

// A stopped agent's messages stay queued, through a restart of every `jam dev` process, and
// are answered once the agent is started again, on the same provider session.
func TestAStoppedAgentsMessagesSurviveARestartAndAreAnsweredAfterStart(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "jam-home")
	exe := testagent.Binary(t)
	env := ownedEnv(t, t.TempDir())
	d := startDevEnv(t, home, env)
	c, ctx := d.client, context.Background()

	var agent api.AgentBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "builder", Kind: domain.AgentOwned}, &agent))
	room, session := roomWith(t, c, "lab", agent.ID)
	if r := awaitReply(t, c, postText(t, c, room.ID, "[[count]] one"), 30*time.Second); !strings.Contains(r.Text, "turns remembered: 0") {
		t.Fatalf("first reply %q", r.Text)
	}

	must(t, c.Do(ctx, http.MethodPost, "/v1/agents/"+agent.ID.String()+"/stop", nil, nil))
	awaitPresence(t, c, session, domain.PresenceDormant, 10*time.Second)
	awaitChildren(t, d.proc.cmd.Process.Pid, exe, 0, 10*time.Second)
	queued := postText(t, c, room.ID, "[[count]] two")
	wait.Never(t, 2*time.Second, func() bool { return len(repliesTo(t, c, queued)) != 0 }, "a stopped agent answering")
	d.stop(t)

	d2 := startDevEnv(t, home, env)
	c = d2.client
	var sessions api.SessionList
	must(t, c.Do(ctx, http.MethodGet, "/v1/sessions?agent="+agent.ID.String(), nil, &sessions))
	if len(sessions.Items) != 1 || sessions.Items[0].RuntimeSessionID != session {
		t.Fatalf("sessions after restart %+v", sessions.Items)
	}
	awaitPresence(t, c, session, domain.PresenceDormant, 20*time.Second)
	wait.Never(t, time.Second, func() bool {
		return len(repliesTo(t, c, queued)) != 0 || len(providerChildren(t, d2.proc.cmd.Process.Pid, exe)) != 0
	}, "the stopped agent resurrected by the restart (a reply or a provider child)")

	// A room bound while the agent is stopped and never messaged: starting the agent starts
	// no workflow for it (it has nothing to do).
	_, quiet := roomWith(t, c, "quiet", agent.ID)
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents/"+agent.ID.String()+"/start", nil, nil))
	if r := awaitReply(t, c, queued, 30*time.Second); !strings.Contains(r.Text, "turns remembered: 1") {
		t.Fatalf("reply after start %q: not the same provider session", r.Text)
	}
	wait.Never(t, 500*time.Millisecond, func() bool { return len(repliesTo(t, c, queued)) != 1 }, "the queued message answered other than once")
	tc := temporaltest.Dial(t, d2.temporal)
	if _, err := tc.DescribeWorkflowExecution(ctx, contract.RoomSessionID(quiet), ""); !contract.IsNotFound(err) {
		t.Fatalf("starting the agent started the never-messaged room's workflow (%v)", err)
	}
	if s := getSession(t, c, quiet); s.Presence != domain.PresenceDormant {
		t.Fatalf("never-messaged room after the agent's start: %s", s.Presence)
	}
}
