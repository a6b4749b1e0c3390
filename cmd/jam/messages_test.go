package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/domain"
)

// `jam message reply` and `ack` print one line like the other change commands; -q the id of
// the reply (or of the acknowledged message), --json the settlement.
func TestMessageSettlementPrintsALine(t *testing.T) {
	msg, reply := uuid.New(), uuid.New()
	var f fakeAPI
	url := f.serve(t, api.SettleBody{MessageID: msg, Settlement: domain.SettledReply, Reply: &api.MessageBody{ID: reply, Seq: 7, Text: "4", AuthorKind: domain.ParticipantAgent}})
	args := []string{"message", "reply", msg.String(), "4", "--url", url, "--key", "k"}
	if out := runCLI(t, args...); out != "replied to "+msg.String()+": posted "+reply.String()+" (seq 7)\n" {
		t.Fatalf("printed %q", out)
	}
	if f.method != http.MethodPost || f.path != "/v1/messages/"+msg.String()+"/reply" || f.auth != "Bearer k" {
		t.Fatalf("sent %+v", f)
	}
	if out := runCLI(t, append(args, "-q")...); out != reply.String()+"\n" {
		t.Fatalf("-q printed %q", out)
	}
	var body api.SettleBody
	if err := json.Unmarshal([]byte(runCLI(t, append(args, "--json")...)), &body); err != nil || body.Reply == nil || body.Reply.ID != reply {
		t.Fatalf("--json printed %+v: %v", body, err)
	}

	var g fakeAPI
	url = g.serve(t, api.SettleBody{MessageID: msg, Settlement: domain.SettledAck})
	if out := runCLI(t, "message", "ack", msg.String(), "--url", url, "--key", "k"); !strings.HasPrefix(out, "settled "+msg.String()+" without a reply") {
		t.Fatalf("ack printed %q", out)
	}
	if out := runCLI(t, "message", "ack", msg.String(), "-q", "--url", url, "--key", "k"); out != msg.String()+"\n" {
		t.Fatalf("ack -q printed %q", out)
	}
}
