package store

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/testdb"
)

// BenchmarkWorkspaceOperationLifecycle measures one operation's journaled life (create
// running, then succeed: two validated upserts, two event rows) on each dialect.
//
//	make bench   (Postgres too when JAM_TEST_DATABASE_URL is set)
func BenchmarkWorkspaceOperationLifecycle(b *testing.B) {
	forEachBenchURL(b, benchLifecycle)
}

func benchLifecycle(b *testing.B, url string) {
	ctx := context.Background()
	s := openTest(b, url)
	ws := newWorkspace(b, s)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		op := domain.WorkspaceOperation{
			ID: uuid.New(), WorkspaceID: ws.workspace, RuntimeHostID: ws.host, RuntimeSessionID: ws.session,
			Kind: domain.WorkspaceOpExport, State: domain.OpRunning, StartedAt: time.Now(), UpdatedAt: time.Now(),
		}
		if _, err := s.UpsertWorkspaceOperation(ctx, op); err != nil {
			b.Fatal(err)
		}
		end := time.Now()
		op.State, op.FinishedAt, op.UpdatedAt = domain.OpSucceeded, &end, end
		if _, err := s.UpsertWorkspaceOperation(ctx, op); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConcurrentPosters measures the store's write path under contention: 32 posters,
// each in a room of its own (a human author, one agent recipient: a message row, an inbound
// row and two events per post). b.N is the total number of posts; posts/s is the figure.
//
//	go test -run '^$' -bench ConcurrentPosters -benchtime 3000x -count 3 ./internal/store/
func BenchmarkConcurrentPosters(b *testing.B) {
	forEachBenchURL(b, benchPosters)
}

const benchPosterCount = 32

func benchPosters(b *testing.B, url string) {
	ctx := context.Background()
	s := openTest(b, url)
	rooms := benchRooms(b, s, benchPosterCount)
	var next atomic.Int64
	errs := make(chan error, benchPosterCount)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for _, room := range rooms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				if _, err := s.PostMessage(ctx, domain.Message{ID: uuid.New(), RoomID: room, AuthorKind: domain.ParticipantHuman,
					AuthorHuman: "alice", Text: "hello", CreatedAt: time.Now()}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "posts/s")
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// forEachBenchURL runs a benchmark on SQLite, and on Postgres when JAM_TEST_DATABASE_URL is set.
func forEachBenchURL(b *testing.B, fn func(b *testing.B, url string)) {
	b.Run("sqlite", func(b *testing.B) { fn(b, testdb.SQLiteURL(b)) })
	b.Run("postgres", func(b *testing.B) {
		if os.Getenv(testdb.EnvURL) == "" {
			b.Skip("set " + testdb.EnvURL)
		}
		fn(b, testdb.PostgresURL(b))
	})
}

// BenchmarkPlacementsBesidePosts measures wakes' placements while rooms post: 16 placers
// taking slots on three nodes and 16 posters in rooms of their own, all at once. b.N is the
// number of placements; placements/s and posts/s are the figures.
//
//	go test -run '^$' -bench PlacementsBesidePosts/postgres -benchtime 3000x -count 3 ./internal/store/
func BenchmarkPlacementsBesidePosts(b *testing.B) {
	forEachBenchURL(b, benchPlacements)
}

func benchPlacements(b *testing.B, url string) {
	ctx := context.Background()
	s := openTest(b, url)
	registerNodes(b, s, domain.ProviderACP, 1<<20, "n1", "n2", "n3")
	const placers, posters = 16, 16
	rooms := benchRooms(b, s, posters)
	var placed, posted atomic.Int64
	done := make(chan struct{})
	errs := make(chan error, placers+posters)
	b.ResetTimer()
	start := time.Now()
	var wg, postWG sync.WaitGroup
	for range placers {
		wg.Go(func() {
			for placed.Add(1) <= int64(b.N) {
				pl, err := s.PlaceRuntime(ctx, uuid.New(), domain.PlacementAsk{Provider: domain.ProviderACP})
				if err == nil && pl.Node == "" {
					err = fmt.Errorf("not placed: %s", pl.Waiting)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for _, room := range rooms {
		postWG.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := s.PostMessage(ctx, domain.Message{ID: uuid.New(), RoomID: room, AuthorKind: domain.ParticipantHuman,
					AuthorHuman: "alice", Text: "hello", CreatedAt: time.Now()}); err != nil {
					errs <- err
					return
				}
				posted.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(done)
	postWG.Wait()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "placements/s")
	b.ReportMetric(float64(posted.Load())/elapsed.Seconds(), "posts/s")
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// benchRooms creates n rooms, each with the human alice and an owned agent of its own.
func benchRooms(b *testing.B, s *Store, n int) []uuid.UUID {
	rooms := make([]uuid.UUID, n)
	for i := range rooms {
		agent := createAgent(b, s, fmt.Sprintf("bench-agent-%d", i), domain.AgentOwned, "")
		createTemplate(b, s, agent.ID, "default")
		room := createRoom(b, s, fmt.Sprintf("bench-%d", i))
		join(b, s, room.ID, "alice", agent)
		rooms[i] = room.ID
	}
	return rooms
}
