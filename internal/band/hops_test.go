package band

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/lifecycle"
	"github.com/jam-dev/jam/internal/store"
)

// An agent's post within the room's hop limit pokes the other owned agents' sessions; one
// past it is posted and queued as context, and pokes no one.
func TestAPostPastTheHopLimitPokesNoOne(t *testing.T) {
	b, st := startBand(t)
	ctx := context.Background()
	room, err := b.CreateRoom(ctx, "lab")
	if err != nil {
		t.Fatal(err)
	}
	var agents []domain.Agent
	for _, name := range []string{"a", "b"} {
		a, err := st.CreateAgent(ctx, domain.Agent{ID: uuid.New(), Name: name, Kind: domain.AgentOwned, CreatedAt: time.Now()}, "")
		if err != nil {
			t.Fatal(err)
		}
		cfg := domain.TemplateConfig{Alias: "default", Transport: domain.TransportACP}.Normalized()
		if _, err := st.CreateTemplate(ctx, domain.Template{ID: uuid.New(), AgentID: a.ID, Config: cfg, CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.AddAgent(ctx, room.ID, a.ID, store.TemplatePick{}); err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
	}
	if err := st.PutSetting(ctx, domain.SettingMaxAgentHops, json.RawMessage(`1`), time.Now()); err != nil {
		t.Fatal(err)
	}
	rec := b.lifecycle.(*lifecycle.Recorder)
	pokes := func() int {
		n := 0
		for _, c := range rec.Calls() {
			if c.Method == "RoomInbound" && c.Agent == agents[1].ID {
				n++
			}
		}
		return n
	}
	post := func(text string) domain.Message {
		t.Helper()
		m, err := b.Post(ctx, domain.Message{RoomID: room.ID, AuthorKind: domain.ParticipantAgent, AuthorAgentID: &agents[0].ID, Text: text})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}

	if m := post("within the limit"); m.AgentHops != 1 || m.Quiet {
		t.Fatalf("first post %+v", m)
	}
	if n := pokes(); n != 1 {
		t.Fatalf("%d pokes of the other agent's session, want 1", n)
	}
	if m := post("past the limit"); m.AgentHops != 2 || !m.Quiet {
		t.Fatalf("second post %+v", m)
	}
	if n := pokes(); n != 1 {
		t.Fatalf("a post past the limit poked: %d pokes", n)
	}
}
