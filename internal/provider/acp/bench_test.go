package acp_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/jam-dev/jam/internal/domain"
)

// BenchmarkEchoTurn measures one complete turn through the adapter: envelope, session/prompt,
// streamed updates, settlement plan, against the real jam-testagent process.
// Run: go test -run '^$' -bench EchoTurn -benchtime 200x ./internal/provider/acp/
func BenchmarkEchoTurn(b *testing.B) {
	f := newFixture(b)
	rt, _ := f.start(b)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		res, err := rt.RunTurn(context.Background(), turnOf("ping"))
		if err != nil || res.Outcome != domain.TurnComplete {
			b.Fatalf("turn: %v %v", res.Outcome, err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
}
