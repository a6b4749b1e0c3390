package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/domain"
)

// A room transcript names the agents that wrote in it ("helper: …"), not "agent <uuid>".
func TestRoomTranscriptsNameTheirAgents(t *testing.T) {
	url := realAPI(t)
	cli := func(args ...string) string {
		t.Helper()
		return runCLI(t, append(args, "--url", url, "--token", cliToken)...)
	}
	room := strings.TrimSpace(cli("room", "create", "lab", "--human", "ada", "-q"))
	out := cli("agent", "create", "helper", "--kind", "attached")
	id := createdID.FindStringSubmatch(out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	key := lines[len(lines)-1]
	cli("room", "add", room, "--agent", id[1])
	cli("room", "post", room, "hello")
	runCLI(t, "room", "post", room, "hi ada", "--url", url, "--key", key)

	transcript := cli("room", "messages", room)
	if !strings.Contains(transcript, "] ada: hello") || !strings.Contains(transcript, "] helper: hi ada") || strings.Contains(transcript, id[1]) {
		t.Fatalf("transcript:\n%s", transcript)
	}
}

// `room tail` prints message events, whose payload carries only the author's id, with the
// agent's name from the agents list, read once and again only for an agent it does not know.
func TestRoomTailNamesAgentsFromOneAgentsList(t *testing.T) {
	helper, later, gone := uuid.New(), uuid.New(), uuid.New()
	known := []api.AgentBody{{ID: helper, Name: "helper"}}
	lists := 0
	n := &authorNamer{
		list:  func() ([]api.AgentBody, error) { lists++; return known, nil },
		names: map[uuid.UUID]string{},
		asked: map[uuid.UUID]bool{},
	}
	event := func(author uuid.UUID, text string) client.Event {
		payload, _ := json.Marshal(api.MessageBody{Seq: 1, AuthorKind: domain.ParticipantAgent, AuthorAgentID: &author, Text: text})
		return client.Event{Kind: string(domain.EventMessagePosted), Data: api.EventBody{Kind: domain.EventMessagePosted, Payload: payload}}
	}
	var out bytes.Buffer
	for _, e := range []client.Event{event(helper, "one"), event(helper, "two")} {
		if err := printEvent(&out, e, n); err != nil {
			t.Fatal(err)
		}
	}
	known = append(known, api.AgentBody{ID: later, Name: "latecomer"})
	for _, e := range []client.Event{event(later, "three"), event(gone, "four"), event(gone, "five")} {
		if err := printEvent(&out, e, n); err != nil {
			t.Fatal(err)
		}
	}
	want := "[1] helper: one\n[1] helper: two\n[1] latecomer: three\n[1] agent " + gone.String() + ": four\n[1] agent " + gone.String() + ": five\n"
	if out.String() != want || lists != 3 {
		t.Fatalf("printed (after %d agent lists):\n%s\nwant:\n%s", lists, out.String(), want)
	}
}
