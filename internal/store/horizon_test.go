package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/testdb"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// heldPost posts to a room inside a scoped transaction that stays open until release is
// closed; then it commits, or rolls back when abort is set. It returns the message's seq
// (its first event id) once the ids are reserved.
func heldPost(t *testing.T, s *Store, room uuid.UUID, release <-chan struct{}, abort bool) (seq int64, done <-chan error) {
	t.Helper()
	reserved := make(chan int64, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- s.InScopedTx(context.Background(), RoomScope(room), func(q *Q) error {
			m, err := q.PostMessage(context.Background(), domain.Message{ID: uuid.New(), RoomID: room,
				AuthorKind: domain.ParticipantHuman, AuthorHuman: "alice", Text: "held", CreatedAt: fixtureTime})
			if err != nil {
				return err
			}
			reserved <- m.Seq
			<-release
			if abort {
				return errAbortHeld
			}
			return nil
		})
	}()
	select {
	case seq = <-reserved:
	case err := <-errc:
		t.Fatalf("held post: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("held post did not reserve its ids")
	}
	return seq, errc
}

var errAbortHeld = errors.New("abort the held post")

func eventIDs(evs []domain.Event) []int64 {
	ids := make([]int64, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	return ids
}

// TestEventReadersNeverPassAnIdAnOpenWriterHolds: posts to two rooms run side by side on
// Postgres, so a later id can commit first. A reader must stop below the id the open
// transaction holds, and go on once it commits, or pass it once it rolls back: tailing
// "after the last id" must never skip an event.
func TestEventReadersNeverPassAnIdAnOpenWriterHolds(t *testing.T) {
	t.Parallel()
	for _, abort := range []bool{false, true} {
		t.Run(fmt.Sprintf("abort=%v", abort), func(t *testing.T) {
			s := openTest(t, testdb.PostgresURL(t))
			ctx := context.Background()
			slow, fast := createRoom(t, s, "slow"), createRoom(t, s, "fast")
			join(t, s, slow.ID, "alice")
			join(t, s, fast.ID, "alice")
			_, start, err := s.EventBounds(ctx)
			if err != nil {
				t.Fatal(err)
			}

			release := make(chan struct{})
			var releaseOnce sync.Once
			defer releaseOnce.Do(func() { close(release) })
			held, done := heldPost(t, s, slow.ID, release, abort)
			later := humanPost(t, s, fast.ID, "alice", "committed first")
			if later.Seq <= held {
				t.Fatalf("the later post got seq %d, not above the held %d", later.Seq, held)
			}

			// The later post is committed and visible, yet no reader is shown it.
			evs, err := s.ListEvents(ctx, start, EventFilter{}, 100)
			if err != nil {
				t.Fatal(err)
			}
			if ids := eventIDs(evs); len(ids) > 0 && ids[len(ids)-1] >= held {
				t.Fatalf("listed %v while id %d is held by an open transaction", ids, held)
			}
			// A reader starting "now" waits for the open writer instead of starting past it.
			bounded, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			_, _, err = s.EventBounds(bounded)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("EventBounds beside an open writer: %v, want it to wait", err)
			}

			releaseOnce.Do(func() { close(release) })
			if err := <-done; abort != errors.Is(err, errAbortHeld) {
				t.Fatalf("held post ended with %v", err)
			}
			var got []int64
			wait.Eventually(t, 10*time.Second, func() error {
				evs, err := s.ListEvents(ctx, start, EventFilter{}, 100)
				if err != nil {
					return err
				}
				got = eventIDs(evs)
				if !slices.Contains(got, later.Seq) {
					return fmt.Errorf("listed %v, not yet the later post's %d", got, later.Seq)
				}
				return nil
			}, "the later post to be listed")
			if !slices.IsSorted(got) {
				t.Fatalf("listed out of order: %v", got)
			}
			if slices.Contains(got, held) == abort {
				t.Fatalf("listed %v: the held id %d should be there exactly when it committed (abort=%v)", got, held, abort)
			}
			if _, newest, err := s.EventBounds(ctx); err != nil || newest < later.Seq {
				t.Fatalf("EventBounds newest %d (%v), want at least %d", newest, err, later.Seq)
			}
		})
	}
}

// TestPostsToOneRoomCommitInSeqOrder: two posts to the same room never run side by side, so
// paging a room's transcript "after seq" never skips a message.
func TestPostsToOneRoomCommitInSeqOrder(t *testing.T) {
	t.Parallel()
	s := openTest(t, testdb.PostgresURL(t))
	room := createRoom(t, s, "one")
	join(t, s, room.ID, "alice")
	release := make(chan struct{})
	held, done := heldPost(t, s, room.ID, release, false)

	second := make(chan domain.Message, 1)
	go func() {
		m, err := s.PostMessage(context.Background(), domain.Message{ID: uuid.New(), RoomID: room.ID,
			AuthorKind: domain.ParticipantHuman, AuthorHuman: "alice", Text: "second", CreatedAt: fixtureTime})
		if err != nil {
			t.Error(err)
		}
		second <- m
	}()
	wait.Never(t, 200*time.Millisecond, func() bool { return len(second) > 0 },
		"a second post to the room committing while the first is open")
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if m := <-second; m.Seq <= held {
		t.Fatalf("second post seq %d, first %d", m.Seq, held)
	}
}
