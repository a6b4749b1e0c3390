package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/testsupport/testdb"
	"github.com/jam-dev/jam/internal/testsupport/teststore"
)

// BenchmarkPostToEventStream measures how long a posted message takes to reach 20 event
// stream subscribers, posting at 200 messages per second, all over real HTTP. Each op is one
// message; latency is from sending the POST to a subscriber reading the event.
//
//	make bench    (go test -run '^$' -bench PostToEventStream -benchtime 600x ./api/)
func BenchmarkPostToEventStream(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) { benchStream(b, teststore.SQLite(b)) })
	b.Run("postgres", func(b *testing.B) {
		if os.Getenv(testdb.EnvURL) == "" {
			b.Skip("set " + testdb.EnvURL)
		}
		benchStream(b, teststore.Postgres(b))
	})
}

const (
	benchSubscribers = 20
	benchRate        = 200 // messages per second
)

func benchStream(b *testing.B, st *store.Store) {
	h := newHarnessOn(b, st)
	bd := h.band
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hs := httptest.NewServer(h.srv.Handler())
	defer hs.Close()
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

	room, err := bd.CreateRoom(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := bd.AddHuman(ctx, room.ID, "ada"); err != nil {
		b.Fatal(err)
	}

	var (
		mu       sync.Mutex
		sentAt   = map[uuid.UUID]time.Time{}
		latency  []time.Duration
		received sync.WaitGroup
	)
	received.Add(benchSubscribers * b.N)
	ready := make(chan struct{}, benchSubscribers)
	for i := 0; i < benchSubscribers; i++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+"/v1/events?room="+room.ID.String(), nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := httpc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			defer resp.Body.Close()
			ready <- struct{}{}
			count := 0
			eachEvent(resp, func(e sseEvent) bool {
				if e.kind != string(domain.EventMessagePosted) {
					return true
				}
				now := time.Now()
				var m struct{ ID uuid.UUID }
				_ = json.Unmarshal(e.data.Payload, &m)
				mu.Lock()
				latency = append(latency, now.Sub(sentAt[m.ID]))
				mu.Unlock()
				received.Done()
				count++
				return count < b.N
			})
		}()
	}
	for i := 0; i < benchSubscribers; i++ {
		<-ready
	}

	b.ResetTimer()
	tick := time.NewTicker(time.Second / benchRate)
	defer tick.Stop()
	for i := 0; i < b.N; i++ {
		<-tick.C
		body := fmt.Sprintf(`{"text":"message %d"}`, i)
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/v1/rooms/"+room.ID.String()+"/messages", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		// The id is known only from the answer, so the send time is recorded before the
		// answer is read; subscribers look it up under the lock.
		mu.Lock()
		resp, err := httpc.Do(req)
		if err != nil {
			mu.Unlock()
			b.Fatal(err)
		}
		var m MessageBody
		_ = json.NewDecoder(resp.Body).Decode(&m)
		resp.Body.Close()
		sentAt[m.ID] = start
		mu.Unlock()
	}
	done := make(chan struct{})
	go func() { received.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		b.Fatalf("only %d of %d deliveries arrived", len(latency), benchSubscribers*b.N)
	}
	b.StopTimer()
	slices.Sort(latency)
	pct := func(p float64) float64 {
		return float64(latency[int(p*float64(len(latency)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.95), "p95-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
