package band

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/lifecycle"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/testsupport/teststore"
)

func startBand(t *testing.T) (*Local, *store.Store) {
	t.Helper()
	st := teststore.SQLite(t)
	b := NewLocal(st, &lifecycle.Recorder{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return b, st
}

func TestASlowSubscriberIsDroppedNotBuffered(t *testing.T) {
	b, _ := startBand(t)
	ctx := context.Background()
	slow := b.Subscribe(store.EventFilter{}, 2)
	fast := b.Subscribe(store.EventFilter{}, 100)
	for i := 0; i < 5; i++ {
		if _, err := b.CreateRoom(ctx, "room"); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	deadline := time.After(5 * time.Second)
	for got < 5 {
		select {
		case <-fast.C:
			got++
		case <-deadline:
			t.Fatalf("the fast subscriber got %d of 5 events", got)
		}
	}
	drained := 0
	for range slow.C {
		drained++
	}
	if !slow.Overflowed() || drained > 2 {
		t.Fatalf("slow subscriber: overflowed=%v after %d buffered events", slow.Overflowed(), drained)
	}
	fast.Close()
	fast.Close() // idempotent
}

func TestSubscriptionsSeeOnlyTheirFilter(t *testing.T) {
	b, _ := startBand(t)
	ctx := context.Background()
	r1, _ := b.CreateRoom(ctx, "one")
	sub := b.Subscribe(store.EventFilter{Room: &r1.ID}, 10)
	defer sub.Close()
	r2, _ := b.CreateRoom(ctx, "two")
	if _, err := b.AddHuman(ctx, r2.ID, "bo"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.AddHuman(ctx, r1.ID, "ada"); err != nil {
		t.Fatal(err)
	}
	// A subscription may also see events committed just before it (the stream's replay
	// dedups them); what it must never see is another room's.
	deadline := time.After(5 * time.Second)
	for added := false; !added; {
		select {
		case e := <-sub.C:
			if *e.RoomID != r1.ID {
				t.Fatalf("an event of another room leaked through: %+v", e)
			}
			added = e.Kind == domain.EventRoomAdded
		case <-deadline:
			t.Fatal("the room's membership event never arrived")
		}
	}
	select {
	case e := <-sub.C:
		t.Fatalf("unexpected event %+v", e)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestReceiveReturnsNothingAfterTheWait(t *testing.T) {
	b, st := startBand(t)
	ctx := context.Background()
	a, err := st.CreateAgent(ctx, domain.Agent{ID: uuid.New(), Name: "a", Kind: domain.AgentAttached, CreatedAt: time.Now()}, "h")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c, err := b.Receive(ctx, a.ID, uuid.New(), 300*time.Millisecond)
	if err != nil || c != nil {
		t.Fatalf("claim %+v, %v", c, err)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 3*time.Second {
		t.Fatalf("waited %s for a 300 ms receive", d)
	}
}
