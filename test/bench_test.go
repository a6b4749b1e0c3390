package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/temporaltest"
	"github.com/jam-dev/jam/internal/testsupport/testagent"
)

// The RoomSession benchmark of `make bench` (JAM_BENCH=1): live turn overhead, wake latency,
// dormant scale and concurrent throughput against a real `jam dev` with the test agent. It
// reports (a JSON file and a table); it does not gate.
func TestRoomSessionBenchmark(t *testing.T) {
	t.Parallel()
	if os.Getenv("JAM_BENCH") != "1" {
		t.Skip("benchmark: run with `make bench` (JAM_BENCH=1)")
	}
	rooms := 10000
	if v := os.Getenv("JAM_BENCH_ROOMS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("JAM_BENCH_ROOMS=%q", v)
		}
		rooms = n
	}
	home := filepath.Join(t.TempDir(), "jam-home")
	exe := testagent.Binary(t)
	var extra []string
	if addr := os.Getenv("JAM_BENCH_PPROF"); addr != "" {
		// Profile jam dev while the bench runs: go tool pprof http://ADDR/debug/pprof/profile
		extra = append(extra, "--pprof-listen", addr)
	}
	d := startDevEnv(t, home, ownedEnv(t, t.TempDir()), extra...)
	c, ctx, pid := d.client, context.Background(), d.proc.cmd.Process.Pid
	var agent api.AgentBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "bench", Kind: domain.AgentOwned}, &agent))
	rep := benchReport{Rooms: rooms}

	// Live turn overhead: post to a live room -> the provider's turn starts.
	room, session := roomWith(t, c, "live", agent.ID)
	awaitReply(t, c, postText(t, c, room.ID, "warm up"), 30*time.Second)
	awaitPresence(t, c, session, domain.PresenceLive, 5*time.Second)
	var live, liveReply []time.Duration
	for range 50 {
		// Measure an idle live room: the previous turn has long returned to the workflow.
		time.Sleep(300 * time.Millisecond)
		m := postText(t, c, room.ID, "ping")
		r := awaitReply(t, c, m, 30*time.Second)
		live = append(live, turnStartedAfter(t, c, room.ID, m))
		liveReply = append(liveReply, r.CreatedAt.Sub(m.CreatedAt))
	}
	rep.Live, rep.LiveReply = summarize(live), summarize(liveReply)

	// Wake: post to a dormant room -> the provider's turn starts.
	var wake []time.Duration
	var woken uuid.UUID
	for i := range 20 {
		r, s := roomWith(t, c, fmt.Sprintf("wake-%d", i), agent.ID)
		m := postText(t, c, r.ID, "wake up")
		awaitReply(t, c, m, 30*time.Second)
		wake = append(wake, turnStartedAfter(t, c, r.ID, m))
		woken = s
	}
	rep.Wake = summarize(wake)
	// What Temporal holds per room: a registration alone, and one with a wake and a turn.
	_, dormant := roomWith(t, c, "history-dormant", agent.ID)
	awaitPresence(t, c, dormant, domain.PresenceDormant, 30*time.Second)
	tc := temporaltest.Dial(t, d.temporal)
	rep.DormantHistory, rep.WokenHistory = roomHistory(t, tc, dormant), roomHistory(t, tc, woken)
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents/"+agent.ID.String()+"/stop", nil, nil))
	awaitChildren(t, pid, exe, 0, 60*time.Second)
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents/"+agent.ID.String()+"/start", nil, nil))

	// Scale and throughput on jam dev (one process: worker, Temporal, API) and, when Postgres
	// is reachable, in the production shape, where the worker is a process of its own.
	out := os.Getenv("JAM_BENCH_OUT")
	if out == "" {
		out = filepath.Join("..", "bench", "roomsession.json")
	}
	// With JAM_BENCH_PPROF, CPU profiles of jam dev's bind and burst land beside the report.
	rep.Dev = scaleAndBurst(t, c, agent.ID, pid, pid, exe, rooms, filepath.Dir(out))
	rep.Dev.WakeRatio = rep.Dev.WakeWithDormant.P50 / rep.Wake.P50
	if os.Getenv("JAM_TEST_DATABASE_URL") != "" {
		c2, agent2, worker, _ := startProduction(t)
		p := scaleAndBurst(t, c2, agent2, worker, worker, exe, rooms, "")
		rep.Production = &p
	}

	raw, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, append(raw, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s\nreport: %s", rep.table(), out)
}

type latency struct {
	P50 float64 `json:"p50_ms"`
	P95 float64 `json:"p95_ms"`
	N   int     `json:"n"`
}

type benchReport struct {
	Live      latency `json:"live_turn_overhead"`
	LiveReply latency `json:"live_post_to_echo_reply"`
	Wake      latency `json:"wake"`
	Rooms     int     `json:"dormant_rooms"`
	// DormantHistory is a bound, never woken room's RoomSession history (none under the lazy
	// lifecycle: no workflow runs until the first message); WokenHistory one that was woken
	// and ran one turn (the runtime still live).
	DormantHistory historyCost `json:"room_history_dormant"`
	WokenHistory   historyCost `json:"room_history_after_wake_and_turn"`
	Dev            scale       `json:"jam_dev"`
	Production     *scale      `json:"production,omitempty"`
}

// scale is the dormant-rooms and burst measure of one deployment shape.
type scale struct {
	BindSeconds     float64 `json:"bind_seconds"`
	SettleSeconds   float64 `json:"registration_settled_seconds"`
	DormantChildren int     `json:"dormant_child_processes"`
	// WorkerRSSMiB is the RSS of the process that runs the worker: under jam dev that
	// process also holds the embedded Temporal server and the API.
	WorkerRSSMiB float64 `json:"worker_rss_mib"`
	// BurstSeconds runs from the first post to the last reply's store timestamp;
	// BurstObservedSeconds until polling saw every reply (up to 100 ms later).
	BurstSeconds         float64 `json:"burst_50_seconds"`
	BurstObservedSeconds float64 `json:"burst_50_observed_seconds"`
	TurnsPerSecond       float64 `json:"burst_turns_per_second"`
	// WakeWithDormant is the wake (dormant post -> turn started) measured with every
	// dormant room bound; WakeRatio divides its p50 by the wake p50 with few rooms.
	WakeWithDormant latency `json:"wake_with_dormant_rooms"`
	WakeRatio       float64 `json:"wake_p50_ratio_vs_few_rooms,omitempty"`
	// BindCPU is the machine's CPU per room from the first bind until registrations
	// settled; BurstCPU per turn of the burst. Near 100% busy, cores / CPU per unit is the
	// throughput ceiling of this machine.
	BindCPU  cpuCost `json:"bind_cpu"`
	BurstCPU cpuCost `json:"burst_cpu"`
}

func (r benchReport) table() string {
	var b strings.Builder
	row := func(name, value, target string) { fmt.Fprintf(&b, "%-50s %-28s %s\n", name, value, target) }
	row("measure (jam dev unless noted)", "value", "target")
	row("live turn overhead (post -> turn started)", fmt.Sprintf("p50 %.1f ms, p95 %.1f ms", r.Live.P50, r.Live.P95), "p50 <= 50 ms")
	row("live post -> echo reply", fmt.Sprintf("p50 %.1f ms, p95 %.1f ms", r.LiveReply.P50, r.LiveReply.P95), "")
	row("wake (dormant post -> turn started)", fmt.Sprintf("p50 %.1f ms, p95 %.1f ms", r.Wake.P50, r.Wake.P95), "p50 <= 100 ms, p95 <= 150 ms")
	row("room history: dormant / after a wake and a turn", fmt.Sprintf("%d events %d B / %d events %d B",
		r.DormantHistory.Events, r.DormantHistory.Bytes, r.WokenHistory.Events, r.WokenHistory.Bytes), "")
	shapes := []struct {
		name string
		s    *scale
	}{{"jam dev", &r.Dev}, {"production", r.Production}}
	for _, sh := range shapes {
		if sh.s == nil {
			continue
		}
		row(fmt.Sprintf("%s: bind %d dormant rooms", sh.name, r.Rooms), fmt.Sprintf("%.1f s (settled %.1f s)", sh.s.BindSeconds, sh.s.SettleSeconds), "")
		row(sh.name+": bind CPU per room", sh.s.BindCPU.String(), "")
		row(sh.name+": burst CPU per turn", sh.s.BurstCPU.String(), "")
		row(sh.name+": child processes while dormant", strconv.Itoa(sh.s.DormantChildren), "0")
		rssName := sh.name + ": worker RSS"
		if sh.name == "jam dev" {
			rssName = "jam dev RSS (worker + Temporal + API)"
		}
		row(rssName, fmt.Sprintf("%.0f MiB", sh.s.WorkerRSSMiB), "worker <= 300 MB")
		row(sh.name+": 50 rooms messaged at once", fmt.Sprintf("%.2f turns/s (%.2f s; polling saw it at %.2f s)", sh.s.TurnsPerSecond, sh.s.BurstSeconds, sh.s.BurstObservedSeconds), ">= 40 turns/s")
		wake := fmt.Sprintf("p50 %.1f ms, p95 %.1f ms", sh.s.WakeWithDormant.P50, sh.s.WakeWithDormant.P95)
		if sh.s.WakeRatio > 0 {
			wake += fmt.Sprintf(" (x%.2f)", sh.s.WakeRatio)
		}
		row(sh.name+": wake with the dormant rooms bound", wake, "ratio <= 1.2")
	}
	return b.String()
}

// scaleAndBurst binds rooms dormant rooms to agent, waits until their registrations have
// settled, counts provider children of parent and the RSS of worker, then messages 50 fresh
// rooms at once.
func scaleAndBurst(t *testing.T, c *client.Client, agent uuid.UUID, parent, worker int, exe string, rooms int, profDir string) scale {
	t.Helper()
	ctx := context.Background()
	var out scale
	cpu0 := sampleCPU(t)
	bindProfile := profileCPU(t, profDir, "bind", 10)
	start := time.Now()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		last uuid.UUID
	)
	sem := make(chan struct{}, 16)
	for i := range rooms {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			var rb api.RoomBody
			must(t, c.Do(ctx, http.MethodPost, "/v1/rooms", api.CreateRoomRequest{Name: fmt.Sprintf("dormant-%d", i)}, &rb))
			var p api.ParticipantBody
			must(t, c.Do(ctx, http.MethodPost, "/v1/rooms/"+rb.ID.String()+"/participants", map[string]string{"agent_id": agent.String()}, &p))
			mu.Lock()
			last = p.Session.RuntimeSessionID
			mu.Unlock()
		}()
	}
	wg.Wait()
	out.BindSeconds = time.Since(start).Seconds()
	// The last registration to be bound has loaded its session: the queue has drained.
	awaitPresence(t, c, last, domain.PresenceDormant, 10*time.Minute)
	out.SettleSeconds = time.Since(start).Seconds()
	out.BindCPU = cpu0.costUntil(sampleCPU(t), rooms)
	bindProfile()
	out.DormantChildren = len(providerChildren(t, parent, exe))
	out.WorkerRSSMiB = rssMiB(t, worker)
	saveHeap(t, profDir)

	// Waking one room costs the same with every dormant room bound.
	var wake []time.Duration
	for i := range 20 {
		r, _ := roomWith(t, c, fmt.Sprintf("wake-dormant-%d", i), agent)
		m := postText(t, c, r.ID, "wake up")
		awaitReply(t, c, m, 30*time.Second)
		wake = append(wake, turnStartedAfter(t, c, r.ID, m))
	}
	out.WakeWithDormant = summarize(wake)

	const burst = 50
	targets := make([]api.RoomBody, burst)
	for i := range targets {
		targets[i], _ = roomWith(t, c, fmt.Sprintf("burst-%d", i), agent)
	}
	cpu0 = sampleCPU(t)
	burstProfile := profileCPU(t, profDir, "burst", 3)
	start = time.Now()
	msgs := make([]api.MessageBody, burst)
	for i := range targets {
		wg.Add(1)
		go func() { defer wg.Done(); msgs[i] = postText(t, c, targets[i].ID, "all at once") }()
	}
	wg.Wait()
	var lastReply time.Time
	for _, m := range msgs {
		if r := awaitReply(t, c, m, 5*time.Minute); r.CreatedAt.After(lastReply) {
			lastReply = r.CreatedAt
		}
	}
	out.BurstObservedSeconds = time.Since(start).Seconds()
	out.BurstCPU = cpu0.costUntil(sampleCPU(t), burst)
	burstProfile()
	// The burst ends when the last reply was stored (the store's clock is this machine's),
	// not when polling noticed it: the poll backs off to 100 ms between looks.
	out.BurstSeconds = lastReply.Sub(start).Seconds()
	out.TurnsPerSecond = burst / out.BurstSeconds
	return out
}

// startProduction runs `jam migrate up`, `jam server` and one `jam worker` against Postgres
// and an in-process Temporal; it returns an operator client, an owned agent, and the
// worker's and server's pids.
func startProduction(t *testing.T) (*client.Client, uuid.UUID, int, int) {
	t.Helper()
	p := startProductionServer(t, "bench-token")
	worker := startJam(t, append(append(p.base, "JAM_HOME="+t.TempDir()), ownedEnv(t, t.TempDir())...), "worker", "--node", "bench",
		"--max-runtimes", "0") // the burst measures throughput, not a capacity limit
	var agent api.AgentBody
	must(t, p.client.Do(context.Background(), http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "bench", Kind: domain.AgentOwned}, &agent))
	return p.client, agent.ID, worker.cmd.Process.Pid, p.server.cmd.Process.Pid
}

func summarize(ds []time.Duration) latency {
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) float64 {
		return float64(s[min(len(s)-1, int(q*float64(len(s))))].Microseconds()) / 1000
	}
	return latency{P50: at(0.5), P95: at(0.95), N: len(s)}
}

// turnStartedAfter is how long after m was posted the room's runtime reported the turn that
// carries it started (both timestamps are the store's).
func turnStartedAfter(t *testing.T, c *client.Client, room uuid.UUID, m api.MessageBody) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var at time.Time
	err := c.Stream(ctx, "/v1/events?room="+room.String(), "0", func(e client.Event) error {
		if e.Data.Kind != domain.EventRuntimeActivity || e.Data.CreatedAt.Before(m.CreatedAt) {
			return nil
		}
		var p struct {
			Kind domain.AgentEventKind `json:"kind"`
		}
		if json.Unmarshal(e.Data.Payload, &p) == nil && p.Kind == domain.AgentTurnStarted {
			at = e.Data.CreatedAt
			return errFound
		}
		return nil
	})
	if at.IsZero() {
		t.Fatalf("no turn_started after %s in room %s: %v", m.ID, room, err)
	}
	return at.Sub(m.CreatedAt)
}

func rssMiB(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return float64(kb) / 1024
		}
	}
	return 0
}
