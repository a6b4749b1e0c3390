package workers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/procgroup"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// judge over one runtime's samples: memory over its ceiling at once; idle CPU only when it
// stays over its ceiling for the whole window between turns (a turn's own CPU never counts);
// a turn without provider events past the wedge bound.
func TestWatchdogJudgesEachBoundOverItsSamples(t *testing.T) {
	const mib = 1 << 20
	t0 := time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)
	lim := domain.WatchdogLimits{MemoryBytes: 100 * mib, IdleCPUPercent: 50, Wedge: time.Minute}
	type sample struct {
		at     time.Duration
		turns  int
		rss    int64
		cpu    time.Duration
		expect domain.RecycleReason
	}
	for _, tc := range []struct {
		name    string
		samples []sample
	}{
		{"memory under then over", []sample{{0, 0, 50 * mib, 0, ""}, {5 * time.Second, 1, 150 * mib, 0, domain.RecycleMemory}}},
		{"idle CPU over for the window", []sample{
			{0, 0, mib, 0, ""}, {30 * time.Second, 0, mib, 27 * time.Second, ""}, {60 * time.Second, 0, mib, 54 * time.Second, domain.RecycleIdleCPU}}},
		{"idle CPU dips under the ceiling and starts over", []sample{
			{0, 0, mib, 0, ""}, {30 * time.Second, 0, mib, 27 * time.Second, ""}, {45 * time.Second, 0, mib, 28 * time.Second, ""},
			{75 * time.Second, 0, mib, 55 * time.Second, ""}, {105 * time.Second, 0, mib, 82 * time.Second, domain.RecycleIdleCPU}}},
		{"CPU during a turn is not idle CPU", []sample{
			{0, 0, mib, 0, ""}, {30 * time.Second, 1, mib, 30 * time.Second, ""}, {59 * time.Second, 1, mib, 59 * time.Second, ""},
			{60 * time.Second, 0, mib, 59 * time.Second, ""}, {70 * time.Second, 0, mib, 60 * time.Second, ""}}},
		{"a quiet turn past the wedge bound", []sample{{30 * time.Second, 1, mib, 0, ""}, {61 * time.Second, 1, mib, 0, domain.RecycleWedged}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &runtimeEntry{watch: &watchState{limits: lim, measureGroup: true, turnStart: t0}}
			for i, s := range tc.samples {
				e.turns = s.turns
				got, measured := judge(e, procgroup.Usage{Processes: 2, RSSBytes: s.rss, CPU: s.cpu}, t0.Add(s.at), time.Minute, true)
				if got != s.expect {
					t.Fatalf("sample %d (%s): %q (%s), want %q", i, s.at, got, measured, s.expect)
				}
				if got != "" && measured == "" {
					t.Fatalf("sample %d: a crossing that says nothing of what was measured", i)
				}
			}
		})
	}
	// A provider event restarts the wedge bound.
	e := &runtimeEntry{turns: 1, watch: &watchState{limits: lim, turnStart: t0}}
	e.watch.lastEvent.Store(t0.Add(50 * time.Second).UnixNano())
	if got, _ := judge(e, procgroup.Usage{}, t0.Add(90*time.Second), time.Minute, false); got != "" {
		t.Fatalf("a turn with an event 40 s ago judged %q", got)
	}
}

// A real provider's process group, measured on /proc by the sampler, crosses a ceiling below
// what it holds; it is reported once for its generation, with what was measured.
func TestWatchdogReportsALiveRuntimeOverItsMemoryCeilingOnce(t *testing.T) {
	r := NewRuntimeRegistry(quietLog(), nil, nil)
	defer r.Shutdown(context.Background())
	session := uuid.New()
	startRuntime(t, r, agentSpec(t, session, 1))
	r.Watch(session, 1, domain.WatchdogLimits{MemoryBytes: 1 << 20}, true)
	cfg := WatchdogConfig{}.withDefaults()
	sample := func() []Crossing {
		var got []Crossing
		r.sampleWatchdog(context.Background(), cfg, time.Now(), func(c Crossing) { got = append(got, c) })
		return got
	}
	got := sample()
	require.Len(t, got, 1)
	c := got[0]
	require.Equal(t, session, c.RuntimeSession)
	require.Equal(t, domain.RecycleMemory, c.Recycle.Reason)
	require.EqualValues(t, 1, c.Recycle.Generation)
	require.True(t, strings.Contains(c.Recycle.Measured, "over the 1 MiB ceiling"), c.Recycle.Measured)
	require.Empty(t, sample(), "reported twice")

	// A runtime with no bounds is not measured at all.
	other := uuid.New()
	startRuntime(t, r, agentSpec(t, other, 1))
	require.Empty(t, sample())
}

// A turn that goes silent past its wedge bound is reported while it still runs, and only then
// interrupted: the session's workflow holds the recycle before the turn's end reaches it, so
// it never runs another turn on the wedged runtime.
func TestWatchdogReportsAWedgedTurnBeforeInterruptingIt(t *testing.T) {
	r := NewRuntimeRegistry(quietLog(), nil, nil)
	defer r.Shutdown(context.Background())
	session := uuid.New()
	startRuntime(t, r, agentSpec(t, session, 1))
	r.Watch(session, 1, domain.WatchdogLimits{Wedge: 200 * time.Millisecond}, true)
	type result struct {
		res provider.TurnResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		msg := provider.Message{ID: uuid.New(), AuthorKind: domain.ParticipantHuman, AuthorName: "alice", Text: "[[wedge]]"}
		res, err := r.RunTurn(context.Background(), session, 1, provider.Turn{ID: "w", Messages: []provider.Message{msg}})
		done <- result{res, err}
	}()
	cfg := WatchdogConfig{}.withDefaults()
	var crossings []Crossing
	running := false
	wait.Eventually(t, 10*time.Second, func() bool {
		r.sampleWatchdog(context.Background(), cfg, time.Now(), func(c Crossing) {
			crossings = append(crossings, c)
			select {
			case <-done:
			default:
				running = true
			}
		})
		return len(crossings) > 0
	}, "the wedged turn to be reported")
	require.True(t, running, "the turn ended before it was reported")
	require.Equal(t, domain.RecycleWedged, crossings[0].Recycle.Reason)
	select {
	case got := <-done:
		require.NoError(t, got.err)
		require.Equal(t, domain.TurnCancelled, got.res.Outcome)
	case <-time.After(10 * time.Second):
		t.Fatal("the wedged turn was not interrupted")
	}
}
