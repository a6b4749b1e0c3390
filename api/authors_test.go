package api

import (
	"net/http"
	"testing"

	"github.com/jam-dev/jam/internal/domain"
)

// Every message body the API answers with names its authoring agent, so a transcript reads
// "helper: …" without a lookup per line; a human's message has no agent name.
func TestMessagesCarryTheirAuthoringAgentsName(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	w := newWorld(h)
	var other AgentBody
	h.mustCall(http.MethodPost, "/v1/agents", testToken, CreateAgentRequest{Name: "other", Kind: domain.AgentAttached}, &other, 201)
	h.mustCall(http.MethodPost, "/v1/rooms/"+w.room.ID.String()+"/participants", testToken, map[string]string{"agent_id": other.ID.String()}, nil, 201)

	question := w.post(h, "who is there?")
	if question.AuthorAgentName != "" || question.AuthorHuman != "ada" {
		t.Fatalf("a human's message: %+v", question)
	}
	var posted MessageBody
	h.mustCall(http.MethodPost, "/v1/rooms/"+w.room.ID.String()+"/messages", w.agentKey, PostMessageRequest{Text: "helper here"}, &posted, 201)
	if posted.AuthorAgentName != "helper" {
		t.Fatalf("posted by an agent: %+v", posted)
	}
	var got ReceiveBody
	h.mustCall(http.MethodPost, "/v1/agents/"+other.ID.String()+"/receive", other.APIKey, ReceiveRequest{WaitSeconds: ptr(0)}, &got, 200)
	if got.Message == nil || got.Message.ID != question.ID {
		t.Fatalf("first receive: %+v", got.Message)
	}
	h.mustCall(http.MethodPost, "/v1/messages/"+question.ID.String()+"/ack", other.APIKey, nil, nil, 200)
	h.mustCall(http.MethodPost, "/v1/agents/"+other.ID.String()+"/receive", other.APIKey, ReceiveRequest{LeaseID: ptr(got.LeaseID.String()), WaitSeconds: ptr(0)}, &got, 200)
	if got.Message == nil || got.Message.ID != posted.ID || got.Message.AuthorAgentName != "helper" {
		t.Fatalf("received from helper: %+v", got.Message)
	}
	var settled SettleBody
	h.mustCall(http.MethodPost, "/v1/messages/"+posted.ID.String()+"/reply", other.APIKey, ReplyRequest{Text: "hi helper"}, &settled, 200)
	if settled.Reply == nil || settled.Reply.AuthorAgentName != "other" {
		t.Fatalf("reply: %+v", settled.Reply)
	}
	var transcript MessageList
	h.mustCall(http.MethodGet, "/v1/rooms/"+w.room.ID.String()+"/messages", testToken, nil, &transcript, 200)
	want := []string{"", "helper", "other"}
	if len(transcript.Items) != len(want) {
		t.Fatalf("transcript %+v", transcript.Items)
	}
	for i, m := range transcript.Items {
		if m.AuthorAgentName != want[i] {
			t.Fatalf("transcript[%d] named %q, want %q: %+v", i, m.AuthorAgentName, want[i], m)
		}
	}
}
