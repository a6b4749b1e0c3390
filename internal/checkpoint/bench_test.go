package checkpoint

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// The checkpoint benchmark of `make bench` (JAM_BENCH=1): a 10,000-file, 1 GiB provider
// state; the first generation against `cp -a` of the same tree, and a second generation after
// 1% of the files changed against the first. It reports to bench/checkpoint.json; it does not
// gate. JAM_BENCH_CHECKPOINT_MIB shrinks the state for a quick look.
func TestCheckpointBenchmark(t *testing.T) {
	if os.Getenv("JAM_BENCH") != "1" {
		t.Skip("benchmark: run with `make bench` (JAM_BENCH=1)")
	}
	const files = 10000
	mib := 1024
	if v := os.Getenv("JAM_BENCH_CHECKPOINT_MIB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("JAM_BENCH_CHECKPOINT_MIB=%q", v)
		}
		mib = n
	}
	size := int64(mib) << 20 / files
	work := t.TempDir()
	src := filepath.Join(work, "state")
	buf := make([]byte, size)
	for i := range files {
		p := filepath.Join(src, fmt.Sprintf("d%02d", i%100), fmt.Sprintf("f%05d.bin", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		_, _ = rand.Read(buf)
		if err := os.WriteFile(p, buf, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	syncAll(t)

	start := time.Now()
	if out, err := exec.Command("cp", "-a", src, filepath.Join(work, "copy")).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v %s", err, out)
	}
	syncAll(t)
	cp := time.Since(start)

	s := Store{Root: filepath.Join(work, "checkpoints")}
	first := request(src, nil)
	start = time.Now()
	if _, err := s.Capture(context.Background(), first); err != nil {
		t.Fatal(err)
	}
	gen1 := time.Since(start)

	// 1% of the files change.
	for i := 0; i < files; i += 100 {
		p := filepath.Join(src, fmt.Sprintf("d%02d", i%100), fmt.Sprintf("f%05d.bin", i))
		_, _ = rand.Read(buf)
		if err := os.WriteFile(p, buf, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	syncAll(t)
	second := request(src, &first.ID)
	start = time.Now()
	m, err := s.Capture(context.Background(), second)
	if err != nil {
		t.Fatal(err)
	}
	gen2 := time.Since(start)
	linked := 0
	for _, f := range m.Files {
		if f.Linked {
			linked++
		}
	}
	report := map[string]any{
		"files": files, "state_mib": mib, "cp_a_ms": cp.Milliseconds(), "first_generation_ms": gen1.Milliseconds(),
		"first_vs_cp_a": ratio(gen1, cp), "second_generation_ms": gen2.Milliseconds(),
		"second_vs_first": ratio(gen2, gen1), "second_linked_files": linked, "target_second_vs_first": 0.1,
		"measured_at": time.Now().UTC().Format(time.RFC3339), "command": "make bench",
	}
	b, _ := json.MarshalIndent(report, "", "  ")
	t.Logf("checkpoint benchmark:\n%s", b)
	if mib == 1024 {
		if err := os.WriteFile(filepath.Join("..", "..", "bench", "checkpoint.json"), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func ratio(a, b time.Duration) float64 {
	return float64(int(float64(a)/float64(b)*1000)) / 1000
}

// syncAll flushes dirty pages so one phase's writeback is not billed to the next.
func syncAll(t *testing.T) {
	t.Helper()
	if err := exec.Command("sync").Run(); err != nil {
		t.Fatal(err)
	}
}
