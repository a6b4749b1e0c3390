package band

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
)

func TestAHumansApproveReplyDecidesThePendingPermissionInItsRoom(t *testing.T) {
	b, st := startBand(t)
	ctx := context.Background()
	room, err := b.CreateRoom(ctx, "lab")
	if err != nil {
		t.Fatal(err)
	}
	other, err := b.CreateRoom(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	agent, err := st.CreateAgent(ctx, domain.Agent{ID: uuid.New(), Name: "helper", Kind: domain.AgentAttached, CreatedAt: time.Now()}, "h")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []domain.Room{room, other} {
		if _, err := b.AddHuman(ctx, r.ID, "ada"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.AddAgent(ctx, r.ID, agent.ID, store.TemplatePick{}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := st.CreatePermission(ctx, domain.Permission{ID: uuid.New(), AgentID: agent.ID, RoomID: &room.ID, ToolKey: "edit",
		Title: "edit", CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	human := func(r domain.Room, text string) domain.Message {
		t.Helper()
		m, err := b.Post(ctx, domain.Message{RoomID: r.ID, AuthorKind: domain.ParticipantHuman, AuthorHuman: "ada", Text: text})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	unsettled := func(r domain.Room) int {
		t.Helper()
		rows, err := st.ListUnsettled(ctx, agent.ID, &r.ID)
		if err != nil {
			t.Fatal(err)
		}
		return len(rows)
	}

	// The same words in another room, or with a prefix that matches nothing, are messages.
	human(other, "approve "+p.ID.String()[:8])
	human(room, "approve 00000000")
	human(room, "please approve "+p.ID.String()[:8])
	if n := unsettled(other) + unsettled(room); n != 3 {
		t.Fatalf("%d unsettled rows, want 3 ordinary messages", n)
	}
	if got, _ := st.GetPermission(ctx, p.ID); got.State != domain.PermissionPending {
		t.Fatalf("decided by an ordinary message: %+v", got)
	}

	reply := human(room, "  Deny "+p.ID.String()[:13]+" ")
	got, err := st.GetPermission(ctx, p.ID)
	if err != nil || got.State != domain.PermissionDenied || got.Decision != domain.PermissionDeny || got.DecidedBy != HumanDecider("ada") {
		t.Fatalf("after the reply: %+v, %v", got, err)
	}
	if in, err := st.GetInbound(ctx, agent.ID, reply.ID); err != nil || in.State != domain.InboundSettled || in.Settlement != domain.SettledAck {
		t.Fatalf("the reply's inbound row %+v, %v", in, err)
	}
	if n := unsettled(room); n != 2 {
		t.Fatalf("%d unsettled rows in the room, want the 2 earlier messages", n)
	}
	// An agent writing the same words posts a message and decides nothing.
	q, err := st.CreatePermission(ctx, domain.Permission{ID: uuid.New(), AgentID: agent.ID, RoomID: &room.ID, ToolKey: "edit",
		Title: "edit", CreatedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Post(ctx, domain.Message{RoomID: room.ID, AuthorKind: domain.ParticipantAgent, AuthorAgentID: &agent.ID,
		Text: "approve " + q.ID.String()}); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.GetPermission(ctx, q.ID); got.State != domain.PermissionPending {
		t.Fatalf("an agent decided its own request: %+v", got)
	}
}
