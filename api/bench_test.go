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
// stream subscribers while four posters together send 200 messages per second, all over
// real HTTP. Each op is one message; latency is from sending the POST to a subscriber
// reading the event.
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

	// Each subscriber keeps its own arrival times; senders record send times under their own
	// lock. Nothing the measurement does makes a subscriber wait on a sender.
	type arrival struct {
		id uuid.UUID
		at time.Time
	}
	arrivals := make([][]arrival, benchSubscribers)
	var subsDone sync.WaitGroup
	subsDone.Add(benchSubscribers)
	ready := make(chan struct{}, benchSubscribers)
	for i := 0; i < benchSubscribers; i++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+"/v1/events?room="+room.ID.String(), nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := httpc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		go func(i int) {
			defer subsDone.Done()
			defer resp.Body.Close()
			ready <- struct{}{}
			eachEvent(resp, func(e sseEvent) bool {
				if e.kind != string(domain.EventMessagePosted) {
					return true
				}
				now := time.Now()
				var m struct{ ID uuid.UUID }
				_ = json.Unmarshal(e.data.Payload, &m)
				arrivals[i] = append(arrivals[i], arrival{m.ID, now})
				return len(arrivals[i]) < b.N
			})
		}(i)
	}
	for i := 0; i < benchSubscribers; i++ {
		<-ready
	}

	// Posters share the rate: each sends every posters/benchRate seconds.
	const posters = 4
	var (
		sentMu sync.Mutex
		sentAt = make(map[uuid.UUID]time.Time, b.N)
		failed error
	)
	b.ResetTimer()
	var postWG sync.WaitGroup
	for p := 0; p < posters; p++ {
		postWG.Add(1)
		go func(p int) {
			defer postWG.Done()
			tick := time.NewTicker(time.Second * posters / benchRate)
			defer tick.Stop()
			for i := p; i < b.N; i += posters {
				<-tick.C
				req, _ := http.NewRequest(http.MethodPost, hs.URL+"/v1/rooms/"+room.ID.String()+"/messages",
					strings.NewReader(fmt.Sprintf(`{"text":"message %d"}`, i)))
				req.Header.Set("Authorization", "Bearer "+testToken)
				req.Header.Set("Content-Type", "application/json")
				start := time.Now()
				resp, err := httpc.Do(req)
				if err == nil && resp.StatusCode != http.StatusCreated {
					err = fmt.Errorf("post answered %s", resp.Status)
				}
				var m MessageBody
				if err == nil {
					err = json.NewDecoder(resp.Body).Decode(&m)
				}
				if resp != nil {
					resp.Body.Close()
				}
				sentMu.Lock()
				if err != nil && failed == nil {
					failed = err
				}
				sentAt[m.ID] = start
				sentMu.Unlock()
			}
		}(p)
	}
	postWG.Wait()
	if failed != nil {
		b.Fatal(failed)
	}
	done := make(chan struct{})
	go func() { subsDone.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		b.Fatal("not every subscriber received every message")
	}
	b.StopTimer()
	latency := make([]time.Duration, 0, benchSubscribers*b.N)
	for _, as := range arrivals {
		for _, a := range as {
			latency = append(latency, a.at.Sub(sentAt[a.id]))
		}
	}
	slices.Sort(latency)
	pct := func(p float64) float64 {
		return float64(latency[int(p*float64(len(latency)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.95), "p95-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
