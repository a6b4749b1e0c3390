package test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// The acceptance path of an attached agent, through the HTTP API of a real `jam dev` only.
func TestAnAttachedAgentConversesThroughTheHTTPAPI(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "jam-home")
	ctx := context.Background()
	d := startDev(t, home)
	op := d.client

	var room api.RoomBody
	must(t, op.Do(ctx, http.MethodPost, "/v1/rooms", api.CreateRoomRequest{Name: "lab"}, &room))
	must(t, op.Do(ctx, http.MethodPost, "/v1/rooms/"+room.ID.String()+"/participants", map[string]string{"human": "ada"}, nil))
	var agent api.AgentBody
	must(t, op.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "helper", Kind: domain.AgentAttached}, &agent))
	must(t, op.Do(ctx, http.MethodPost, "/v1/rooms/"+room.ID.String()+"/participants", map[string]string{"agent_id": agent.ID.String()}, nil))
	me := apiClient(d.apiURL, agent.APIKey)

	// Follow the room's events from its beginning.
	streamCtx, stopStream := context.WithCancel(ctx)
	defer stopStream()
	events := make(chan client.Event, 100)
	go func() {
		_ = op.Stream(streamCtx, "/v1/events?room="+room.ID.String(), "0", func(e client.Event) error {
			events <- e
			return nil
		})
	}()

	// Posted while no receiver waits; delivered on the next receive.
	var question api.MessageBody
	must(t, op.Do(ctx, http.MethodPost, "/v1/rooms/"+room.ID.String()+"/messages", api.PostMessageRequest{Text: "ping?"}, &question))
	receive := "/v1/agents/" + agent.ID.String() + "/receive"
	var got api.ReceiveBody
	must(t, me.Do(ctx, http.MethodPost, receive, api.ReceiveRequest{WaitSeconds: ptr(10)}, &got))
	if got.Message == nil || got.Message.ID != question.ID {
		t.Fatalf("receive %+v", got)
	}
	// The receiver dies before replying; re-armed, it gets the same message, fenced.
	var again api.ReceiveBody
	must(t, me.Do(ctx, http.MethodPost, receive, api.ReceiveRequest{LeaseID: ptr(got.LeaseID.String()), WaitSeconds: ptr(10)}, &again))
	if again.Message == nil || again.Message.ID != question.ID || again.AckRequiredMessageID == nil {
		t.Fatalf("re-armed receive %+v", again)
	}
	var settled api.SettleBody
	must(t, me.Do(ctx, http.MethodPost, "/v1/messages/"+question.ID.String()+"/reply", api.ReplyRequest{Text: "pong"}, &settled))
	// A retry of the same reply settles nothing twice.
	must(t, me.Do(ctx, http.MethodPost, "/v1/messages/"+question.ID.String()+"/reply", api.ReplyRequest{Text: "pong"}, nil))

	// The second message arrives while the receiver waits, and is acked without a reply.
	waited := make(chan api.ReceiveBody, 1)
	go func() {
		var b api.ReceiveBody
		for {
			// The probe below may hold the lease for an instant (409); the receive asks again.
			err := me.Do(ctx, http.MethodPost, receive, api.ReceiveRequest{LeaseID: ptr(got.LeaseID.String()), WaitSeconds: ptr(20)}, &b)
			if !isStatus(err, http.StatusConflict) {
				break
			}
		}
		waited <- b
	}()
	// The receive waits once a second receive on its lease is refused as busy (a probe that
	// waits 0 s claims nothing: no message is queued yet).
	wait.Eventually(t, 10*time.Second, func() bool {
		err := me.Do(ctx, http.MethodPost, receive, api.ReceiveRequest{LeaseID: ptr(got.LeaseID.String()), WaitSeconds: ptr(0)}, nil)
		return isStatus(err, http.StatusConflict)
	}, "the receiver to wait on its lease")
	var second api.MessageBody
	must(t, op.Do(ctx, http.MethodPost, "/v1/rooms/"+room.ID.String()+"/messages", api.PostMessageRequest{Text: "thanks"}, &second))
	select {
	case b := <-waited:
		if b.Message == nil || b.Message.ID != second.ID {
			t.Fatalf("waiting receive %+v", b)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the waiting receiver never got the second message")
	}
	must(t, me.Do(ctx, http.MethodPost, "/v1/messages/"+second.ID.String()+"/ack", nil, nil))

	var transcript api.MessageList
	must(t, op.Do(ctx, http.MethodGet, "/v1/rooms/"+room.ID.String()+"/messages", nil, &transcript))
	if len(transcript.Items) != 3 || transcript.Items[1].Text != "pong" || *transcript.Items[1].ReplyTo != question.ID ||
		transcript.Items[2].ID != second.ID {
		t.Fatalf("transcript %+v", transcript.Items)
	}

	// The reply and both settlements are on the event stream.
	want := map[string]int{string(domain.EventMessagePosted): 3, string(domain.EventMessageSettled): 2}
	seen := map[string]int{}
	deadline := time.After(10 * time.Second)
	for seen[string(domain.EventMessagePosted)] < 3 || seen[string(domain.EventMessageSettled)] < 2 {
		select {
		case e := <-events:
			seen[e.Kind]++
		case <-deadline:
			t.Fatalf("event stream saw %v, want at least %v", seen, want)
		}
	}

	// Nothing was lost across a restart: a message queued before it is delivered after it.
	var third api.MessageBody
	must(t, op.Do(ctx, http.MethodPost, "/v1/rooms/"+room.ID.String()+"/messages", api.PostMessageRequest{Text: "still there?"}, &third))
	stopStream()
	d.stop(t)
	d2 := startDev(t, home)
	me = apiClient(d2.apiURL, agent.APIKey)
	must(t, me.Do(ctx, http.MethodPost, receive, api.ReceiveRequest{WaitSeconds: ptr(10)}, &got))
	if got.Message == nil || got.Message.ID != third.ID {
		t.Fatalf("after restart: %+v", got)
	}
	must(t, me.Do(ctx, http.MethodPost, "/v1/messages/"+third.ID.String()+"/ack", nil, nil))
	must(t, me.Do(ctx, http.MethodPost, receive, api.ReceiveRequest{WaitSeconds: ptr(0)}, &got))
	if got.Message != nil {
		t.Fatalf("a settled message came back: %+v", got.Message)
	}
	// An owned agent is created with its default template, so it joins at once and is bound.
	var owned api.AgentBody
	must(t, d2.client.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "builder", Kind: domain.AgentOwned}, &owned))
	var p api.ParticipantBody
	must(t, d2.client.Do(ctx, http.MethodPost, "/v1/rooms/"+room.ID.String()+"/participants", map[string]string{"agent_id": owned.ID.String()}, &p))
	if p.Session == nil || p.Session.Alias != "default-"+room.ID.String() {
		t.Fatalf("owned agent's membership bound %+v", p.Session)
	}
	d2.stop(t)
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }
