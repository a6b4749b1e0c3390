package test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	historypb "go.temporal.io/api/history/v1"
	temporalclient "go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"

	"github.com/jam-dev/jam/internal/contract"
)

// clockTicks is USER_HZ, the unit of /proc's CPU times (100 on every Linux Jam runs on).
const clockTicks = 100

// cpuSample is the machine's CPU time and each process's own and reaped children's CPU
// time at one moment: two samples bracket a phase of the bench and say what it cost.
type cpuSample struct {
	at        time.Time
	busy, all float64 // machine-wide CPU seconds (all cores) since boot
	byProcess map[int]procCPU
	cores     int
}

type procCPU struct {
	comm string
	secs float64 // utime+stime+cutime+cstime
}

func sampleCPU(t *testing.T) cpuSample {
	t.Helper()
	s := cpuSample{at: time.Now(), byProcess: map[int]procCPU{}}
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 {
			continue
		}
		if f[0] == "cpu" {
			for i, v := range f[1:] {
				n, _ := strconv.ParseFloat(v, 64)
				s.all += n / clockTicks
				if i != 3 && i != 4 { // idle, iowait
					s.busy += n / clockTicks
				}
			}
		} else if strings.HasPrefix(f[0], "cpu") {
			s.cores++
		}
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // exited
		}
		// pid (comm) state ...: comm may hold spaces; the fields after its ')' are fixed.
		open, end := strings.IndexByte(string(b), '('), strings.LastIndexByte(string(b), ')')
		if open < 0 || end < open {
			continue
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b[:open])))
		f := strings.Fields(string(b[end+1:]))
		if len(f) < 15 {
			continue
		}
		var secs float64
		for _, v := range f[11:15] { // utime stime cutime cstime
			n, _ := strconv.ParseFloat(v, 64)
			secs += n / clockTicks
		}
		s.byProcess[pid] = procCPU{comm: string(b[open+1 : end]), secs: secs}
	}
	return s
}

// cpuCost is what one bench phase cost the machine.
type cpuCost struct {
	// BusyPercent is the share of all cores that was busy: near 100 the phase is CPU-bound.
	BusyPercent float64 `json:"machine_busy_percent"`
	// CPUMsPerUnit is the machine's busy CPU time divided by the units (rooms bound, turns).
	CPUMsPerUnit float64 `json:"cpu_ms_per_unit"`
	// ByProcess splits the busy time by process name (children a process reaped count as
	// its own; processes that started and exited unreaped are in "other").
	ByProcess map[string]float64 `json:"cpu_ms_per_unit_by_process"`
}

func (a cpuSample) costUntil(b cpuSample, units int) cpuCost {
	busy := b.busy - a.busy
	out := cpuCost{ByProcess: map[string]float64{}}
	if all := b.all - a.all; all > 0 {
		out.BusyPercent = 100 * busy / all
	}
	u := float64(max(units, 1))
	out.CPUMsPerUnit = 1000 * busy / u
	var named float64
	for pid, p := range b.byProcess {
		d := p.secs
		if old, ok := a.byProcess[pid]; ok && old.comm == p.comm {
			d -= old.secs
		}
		if d <= 0 {
			continue
		}
		named += d
		out.ByProcess[p.comm] += 1000 * d / u
	}
	if rest := busy - named; rest > 0 {
		out.ByProcess["other"] += 1000 * rest / u
	}
	for k, v := range out.ByProcess {
		if v < 0.05 {
			delete(out.ByProcess, k)
		}
	}
	return out
}

func (c cpuCost) String() string {
	names := make([]string, 0, len(c.ByProcess))
	for k := range c.ByProcess {
		names = append(names, k)
	}
	slices.SortFunc(names, func(x, y string) int { return int(c.ByProcess[y]*100 - c.ByProcess[x]*100) })
	parts := make([]string, 0, len(names))
	for _, k := range names[:min(len(names), 4)] {
		parts = append(parts, fmt.Sprintf("%s %.1f", k, c.ByProcess[k]))
	}
	return fmt.Sprintf("%.1f CPU-ms each, %.0f%% busy (%s)", c.CPUMsPerUnit, c.BusyPercent, strings.Join(parts, ", "))
}

// profileCPU fetches a CPU profile of the process serving pprof at JAM_BENCH_PPROF for the
// next secs seconds into dir/name.pprof, in the background; the returned func waits for it.
// Without JAM_BENCH_PPROF it does nothing.
func profileCPU(t *testing.T, dir, name string, secs int) func() {
	t.Helper()
	addr := os.Getenv("JAM_BENCH_PPROF")
	if addr == "" || dir == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs))
		if err != nil {
			t.Logf("profile %s: %v", name, err)
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name+".pprof"), b, 0o644)
		}
		if err != nil {
			t.Logf("profile %s: %v", name, err)
		}
	}()
	return func() { <-done }
}

// historyCost is a RoomSession workflow's history: its events and their encoded size, what
// Temporal stores and replays for it.
type historyCost struct {
	Events int `json:"events"`
	Bytes  int `json:"bytes"`
}

func roomHistory(t *testing.T, tc temporalclient.Client, session uuid.UUID) historyCost {
	t.Helper()
	var out historyCost
	// A bound room that was never messaged has no workflow (roomctl.Starter.RoomBound).
	if _, err := tc.DescribeWorkflowExecution(context.Background(), contract.RoomSessionID(session), ""); contract.IsNotFound(err) {
		return out
	}
	countHistory(t, tc, session, func(e *historypb.HistoryEvent) bool {
		out.Events++
		out.Bytes += proto.Size(e)
		return false
	})
	return out
}

// saveHeap writes the heap profile, the runtime's memory statistics (debug=1: the profile
// in text, ending with runtime.MemStats) and the goroutines (their stacks are RSS outside
// the heap) of the process serving pprof at JAM_BENCH_PPROF into dir: what the Go heap
// holds against the process's RSS.
func saveHeap(t *testing.T, dir string) {
	t.Helper()
	addr := os.Getenv("JAM_BENCH_PPROF")
	if addr == "" || dir == "" {
		return
	}
	for name, query := range map[string]string{"heap.pprof": "heap", "heap.txt": "heap?debug=1", "goroutine.txt": "goroutine?debug=1"} {
		resp, err := http.Get("http://" + addr + "/debug/pprof/" + query)
		if err != nil {
			t.Logf("heap profile: %v", err)
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), b, 0o644)
		}
		if err != nil {
			t.Logf("heap profile: %v", err)
		}
	}
}
