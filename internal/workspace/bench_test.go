package workspace_test

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sys/unix"

	"github.com/jam-dev/jam/internal/workspace"
)

// The export benchmark of `make bench` (JAM_BENCH=1): a 10,000-file, 1 GiB workspace of
// incompressible bytes exported with Exports.Create against `cp -a` of the same tree (and
// `cp -a --reflink=always` where the filesystem can). Both sides are timed until their bytes
// are durable (`cp` is followed by `sync`, Create syncs itself), the page cache is kept warm
// for both, each is run a few times in alternating order and the medians compared. It reports
// to bench/export.json; it does not gate. JAM_BENCH_EXPORT_MIB shrinks the tree for a quick
// look and JAM_BENCH_EXPORT_RUNS sets the runs (default 5).
func TestExportBenchmark(t *testing.T) {
	t.Parallel()
	if os.Getenv("JAM_BENCH") != "1" {
		t.Skip("benchmark: run with `make bench` (JAM_BENCH=1)")
	}
	const files = 10000
	mib := benchEnvInt(t, "JAM_BENCH_EXPORT_MIB", 1024)
	runs := benchEnvInt(t, "JAM_BENCH_EXPORT_RUNS", 5)
	size := int64(mib) << 20 / files
	work := t.TempDir()
	src := filepath.Join(work, "session")
	buf := make([]byte, size)
	for i := range files {
		p := filepath.Join(src, fmt.Sprintf("pkg%02d", i%20), fmt.Sprintf("sub%d", i/20%5), fmt.Sprintf("f%05d.bin", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		_, _ = rand.Read(buf)
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	benchSync(t)

	timeCp := func(dst string, extra ...string) (time.Duration, time.Duration, error) {
		benchSync(t)
		argv := append(append([]string{"-a"}, extra...), src, dst)
		start := time.Now()
		if out, err := exec.Command("cp", argv...).CombinedOutput(); err != nil {
			first, _, _ := strings.Cut(string(out), "\n")
			return 0, 0, fmt.Errorf("cp %s: %v: %s", strings.Join(argv, " "), err, first)
		}
		copied := time.Since(start)
		benchSync(t)
		return copied, time.Since(start), nil
	}
	exports := workspace.Exports{Root: filepath.Join(work, "exports")}
	owner := workspace.ExportOwner{Workspace: uuid.New(), Host: uuid.New(), Session: uuid.New()}
	var lastExport uuid.UUID
	timeExport := func() time.Duration {
		benchSync(t)
		id := uuid.New()
		start := time.Now()
		if _, err := exports.Create(id, owner, workspace.ExportSource{Workspace: src}); err != nil {
			t.Fatal(err)
		}
		d := time.Since(start)
		lastExport = id
		return d
	}
	clean := func(paths ...string) {
		for _, p := range paths {
			if err := os.RemoveAll(p); err != nil {
				t.Fatal(err)
			}
		}
		if lastExport != uuid.Nil {
			if err := exports.Remove(lastExport); err != nil {
				t.Fatal(err)
			}
			lastExport = uuid.Nil
		}
		benchSync(t)
	}

	var cpCopy, cpTotal, export []time.Duration
	for i := range runs {
		dst := filepath.Join(work, "cp")
		runCp := func() {
			c, total, err := timeCp(dst)
			if err != nil {
				t.Fatal(err)
			}
			cpCopy, cpTotal = append(cpCopy, c), append(cpTotal, total)
			clean(dst)
		}
		runExport := func() {
			export = append(export, timeExport())
			if i == runs-1 {
				return // kept for the verify timing below
			}
			clean()
		}
		if i%2 == 0 {
			runCp()
			runExport()
		} else {
			runExport()
			runCp()
		}
	}
	start := time.Now()
	if _, err := exports.Verify(lastExport); err != nil {
		t.Fatal(err)
	}
	verify := time.Since(start)
	clean()

	report := map[string]any{
		"files": files, "tree_mib": mib, "runs": runs, "gomaxprocs": runtime.GOMAXPROCS(0), "filesystem": fsType(work),
		"cp_a_ms": median(cpTotal).Milliseconds(), "cp_a_before_sync_ms": median(cpCopy).Milliseconds(),
		"export_ms": median(export).Milliseconds(), "export_vs_cp_a": ratio(median(export), median(cpTotal)),
		"target_export_vs_cp_a": 1.3, "verify_ms": verify.Milliseconds(),
		"samples_ms":   map[string]any{"cp_a": millis(cpTotal), "cp_a_before_sync": millis(cpCopy), "export": millis(export)},
		"cp_a_command": "cp -a SRC DST; sync",
		"measured_at":  time.Now().UTC().Format(time.RFC3339), "command": "make bench",
	}
	// A reflink copy, where the filesystem has them.
	var reflink []time.Duration
	for range runs {
		dst := filepath.Join(work, "reflink")
		_, total, err := timeCp(dst, "--reflink=always")
		clean(dst)
		if err != nil {
			t.Logf("reflink: %v", err)
			break
		}
		reflink = append(reflink, total)
	}
	if len(reflink) == runs {
		report["cp_a_reflink_ms"] = median(reflink).Milliseconds()
		report["export_vs_cp_a_reflink"] = ratio(median(export), median(reflink))
	} else {
		report["cp_a_reflink_ms"] = "unsupported"
		report["export_vs_cp_a_reflink"] = "unsupported"
	}
	b, _ := json.MarshalIndent(report, "", "  ")
	t.Logf("export benchmark:\n%s", b)
	if mib == 1024 {
		if err := os.WriteFile(filepath.Join("..", "..", "bench", "export.json"), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func benchEnvInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q", name, v)
	}
	return n
}

// benchSync flushes dirty pages so one phase's writeback is not billed to the next.
func benchSync(t *testing.T) {
	t.Helper()
	if err := exec.Command("sync").Run(); err != nil {
		t.Fatal(err)
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func millis(d []time.Duration) []int64 {
	out := make([]int64, len(d))
	for i, v := range d {
		out[i] = v.Milliseconds()
	}
	return out
}

func ratio(a, b time.Duration) float64 {
	return float64(int(float64(a)/float64(b)*1000)) / 1000
}

func fsType(dir string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "unknown"
	}
	switch st.Type {
	case unix.EXT4_SUPER_MAGIC:
		return "ext4"
	case unix.XFS_SUPER_MAGIC:
		return "xfs"
	case unix.BTRFS_SUPER_MAGIC:
		return "btrfs"
	case unix.TMPFS_MAGIC:
		return "tmpfs"
	case unix.OVERLAYFS_SUPER_MAGIC:
		return "overlayfs"
	}
	return fmt.Sprintf("0x%x", st.Type)
}
