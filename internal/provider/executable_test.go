package provider

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jam-dev/jam/internal/procgroup"
)

// Tests here do not run in parallel: writing an executable while another test forks can
// make exec fail with ETXTBSY.

const testCommand = "jam-testagent"

// writeTool writes an executable shell script named name into dir and returns its path.
func writeTool(t *testing.T, dir, name, body string) string {
	t.Helper()
	return writeFile(t, dir, name, "#!/bin/sh\n"+body+"\n", 0o755)
}

func writeFile(t *testing.T, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// toolDir makes a fresh directory holding testCommand with the given script body.
func toolDir(t *testing.T, body string) string {
	t.Helper()
	dir := t.TempDir()
	writeTool(t, dir, testCommand, body)
	return dir
}

func pathList(dirs ...string) string { return strings.Join(dirs, string(os.PathListSeparator)) }

func noEnv(string) string { return "" }

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// requireRefusal asserts err is a typed refusal and returns it.
func requireRefusal(t *testing.T, err error) *ResolutionRefusal {
	t.Helper()
	if err == nil {
		t.Fatal("expected a refusal, got nil error")
	}
	if !errors.Is(err, ErrExecutableRefused) {
		t.Fatalf("errors.Is(err, ErrExecutableRefused) = false for %v", err)
	}
	var r *ResolutionRefusal
	if !errors.As(err, &r) {
		t.Fatalf("errors.As(err, *ResolutionRefusal) = false for %T %v", err, err)
	}
	if r.Command != testCommand {
		t.Fatalf("refusal command = %q, want %q", r.Command, testCommand)
	}
	return r
}

func TestResolveExecutableChosenSources(t *testing.T) {
	t.Parallel()
	newer := toolDir(t, `echo "agent 9.9.9"`)
	chosen := writeTool(t, t.TempDir(), "agent-custom", `echo "agent 1.0.0"`)
	silent := writeTool(t, t.TempDir(), "agent-silent", `echo "usage: agent" >&2; exit 2`)

	tests := []struct {
		name        string
		req         ExecutableRequest
		wantPath    string
		wantVersion string
		wantSource  ExecutableSource
	}{
		{
			name:        "explicit wins over newer copy on PATH",
			req:         ExecutableRequest{Explicit: chosen, Env: envOf(map[string]string{EnvVarFor(testCommand): silent}), Pins: map[string]string{testCommand: silent}},
			wantPath:    chosen,
			wantVersion: "1.0.0",
			wantSource:  SourceExplicit,
		},
		{
			name:       "explicit with failing version probe is still used",
			req:        ExecutableRequest{Explicit: silent},
			wantPath:   silent,
			wantSource: SourceExplicit,
		},
		{
			name:        "environment default via derived variable",
			req:         ExecutableRequest{Env: envOf(map[string]string{"JAM_JAM_TESTAGENT_BIN": chosen}), Pins: map[string]string{testCommand: silent}},
			wantPath:    chosen,
			wantVersion: "1.0.0",
			wantSource:  SourceEnvironment,
		},
		{
			name:        "environment default via named variable",
			req:         ExecutableRequest{EnvVar: "CUSTOM_BIN", Env: envOf(map[string]string{"CUSTOM_BIN": chosen, "JAM_JAM_TESTAGENT_BIN": silent})},
			wantPath:    chosen,
			wantVersion: "1.0.0",
			wantSource:  SourceEnvironment,
		},
		{
			name:        "pin table",
			req:         ExecutableRequest{Pins: map[string]string{testCommand: chosen, "other": silent}},
			wantPath:    chosen,
			wantVersion: "1.0.0",
			wantSource:  SourcePin,
		},
		{
			name:        "PATH when nothing is chosen",
			req:         ExecutableRequest{Pins: map[string]string{"other": silent}},
			wantPath:    filepath.Join(newer, testCommand),
			wantVersion: "9.9.9",
			wantSource:  SourcePath,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.req
			req.Command = testCommand
			req.PATH = newer
			if req.Env == nil {
				req.Env = noEnv
			}
			got, err := ResolveExecutable(context.Background(), req)
			if err != nil {
				t.Fatalf("ResolveExecutable: %v", err)
			}
			want := ResolvedExecutable{Path: tt.wantPath, Version: tt.wantVersion, Source: tt.wantSource}
			if got != want {
				t.Fatalf("got %+v, want %+v", got, want)
			}
		})
	}
}

func TestResolveExecutableChosenSourceRefusedNeverFallsThrough(t *testing.T) {
	t.Parallel()
	good := toolDir(t, `echo "agent 2.0.0"`)
	goodPath := filepath.Join(good, testCommand)
	scratch := t.TempDir()
	missing := filepath.Join(scratch, "gone", testCommand)
	notExec := writeFile(t, scratch, "plain", "#!/bin/sh\necho 1.0.0\n", 0o644)
	dirPath := filepath.Join(scratch, "adir")
	if err := os.Mkdir(dirPath, 0o755); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		req        ExecutableRequest
		wantPath   string
		wantSource ExecutableSource
		wantReason string
	}{
		{
			name:       "explicit missing",
			req:        ExecutableRequest{Explicit: missing},
			wantPath:   missing,
			wantSource: SourceExplicit,
			wantReason: "does not exist",
		},
		{
			name:       "explicit relative",
			req:        ExecutableRequest{Explicit: "bin/" + testCommand},
			wantPath:   "bin/" + testCommand,
			wantSource: SourceExplicit,
			wantReason: "not absolute",
		},
		{
			name:       "explicit directory",
			req:        ExecutableRequest{Explicit: dirPath},
			wantPath:   dirPath,
			wantSource: SourceExplicit,
			wantReason: "directory",
		},
		{
			name:       "environment default not executable",
			req:        ExecutableRequest{Env: envOf(map[string]string{EnvVarFor(testCommand): notExec})},
			wantPath:   notExec,
			wantSource: SourceEnvironment,
			wantReason: "not executable",
		},
		{
			name:       "environment default relative",
			req:        ExecutableRequest{Env: envOf(map[string]string{EnvVarFor(testCommand): testCommand})},
			wantPath:   testCommand,
			wantSource: SourceEnvironment,
			wantReason: "not absolute",
		},
		{
			name:       "pin missing",
			req:        ExecutableRequest{Pins: map[string]string{testCommand: missing}},
			wantPath:   missing,
			wantSource: SourcePin,
			wantReason: "does not exist",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.req
			req.Command = testCommand
			req.PATH = good // a good copy that must not be used
			if req.Env == nil {
				req.Env = noEnv
			}
			got, err := ResolveExecutable(context.Background(), req)
			r := requireRefusal(t, err)
			if got != (ResolvedExecutable{}) {
				t.Fatalf("refusal returned a result %+v", got)
			}
			if len(r.Candidates) != 1 {
				t.Fatalf("candidates = %+v, want exactly the chosen one", r.Candidates)
			}
			c := r.Candidates[0]
			if c.Path != tt.wantPath || c.Source != tt.wantSource || !strings.Contains(c.Reason, tt.wantReason) {
				t.Fatalf("candidate = %+v, want path %q source %q reason containing %q", c, tt.wantPath, tt.wantSource, tt.wantReason)
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.wantPath) || !strings.Contains(msg, tt.wantReason) {
				t.Fatalf("error %q does not name the candidate and its reason", msg)
			}
			if strings.Contains(msg, goodPath) {
				t.Fatalf("error %q mentions the PATH copy it must not consider", msg)
			}
		})
	}
}

func TestResolveExecutablePathSelection(t *testing.T) {
	t.Parallel()
	type tool struct {
		body string
		mode os.FileMode // 0 means 0o755
	}
	tests := []struct {
		name        string
		tools       []tool // one PATH directory each, in order
		wantIndex   int    // which directory wins
		wantVersion string
	}{
		{
			name:        "highest version wins over first",
			tools:       []tool{{body: `echo "agent 1.2.3"`}, {body: `echo "agent v1.10.0 (build 2024.01)"`}, {body: `echo "agent 1.9.9"`}},
			wantIndex:   1,
			wantVersion: "1.10.0",
		},
		{
			name:        "tie keeps the earlier PATH entry",
			tools:       []tool{{body: `echo 2.0`}, {body: `echo 2.0.0`}},
			wantIndex:   0,
			wantVersion: "2.0",
		},
		{
			name:        "version on stderr counts",
			tools:       []tool{{body: `echo "agent 0.1.0"`}, {body: `echo "agent 0.2.0" >&2`}},
			wantIndex:   1,
			wantVersion: "0.2.0",
		},
		{
			name:        "failing and silent candidates lose to a working one",
			tools:       []tool{{body: `echo "agent 5.0.0"; exit 1`}, {body: `echo hello`}, {body: `echo "agent 0.0.1"`}},
			wantIndex:   2,
			wantVersion: "0.0.1",
		},
		{
			name:        "non-executable file is skipped",
			tools:       []tool{{body: `echo "agent 7.0.0"`, mode: 0o644}, {body: `echo "agent 1.0.0"`}},
			wantIndex:   1,
			wantVersion: "1.0.0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dirs []string
			for _, tl := range tt.tools {
				dir := t.TempDir()
				mode := tl.mode
				if mode == 0 {
					mode = 0o755
				}
				writeFile(t, dir, testCommand, "#!/bin/sh\n"+tl.body+"\n", mode)
				dirs = append(dirs, dir)
			}
			got, err := ResolveExecutable(context.Background(), ExecutableRequest{
				Command: testCommand, Env: noEnv, PATH: pathList(dirs...),
			})
			if err != nil {
				t.Fatalf("ResolveExecutable: %v", err)
			}
			want := ResolvedExecutable{Path: filepath.Join(dirs[tt.wantIndex], testCommand), Version: tt.wantVersion, Source: SourcePath}
			if got != want {
				t.Fatalf("got %+v, want %+v", got, want)
			}
		})
	}
}

func TestResolveExecutablePathRefusalQuotesEveryCandidate(t *testing.T) {
	t.Parallel()
	failing := toolDir(t, `echo "fatal: broken install"; exit 1`)
	silent := toolDir(t, `echo "hello there"`)
	empty := toolDir(t, `exit 0`)
	plainDir := t.TempDir()
	plain := writeFile(t, plainDir, testCommand, "#!/bin/sh\necho 1.0.0\n", 0o644)

	_, err := ResolveExecutable(context.Background(), ExecutableRequest{
		Command: testCommand, Env: noEnv, PATH: pathList(failing, silent, empty, plainDir),
	})
	r := requireRefusal(t, err)
	t.Log(err)
	want := []struct {
		path, reason, output string
	}{
		{filepath.Join(failing, testCommand), "exit status 1", "fatal: broken install"},
		{filepath.Join(silent, testCommand), "no version", "hello there"},
		{filepath.Join(empty, testCommand), "printed nothing", ""},
		{plain, "not executable", ""},
	}
	if len(r.Candidates) != len(want) {
		t.Fatalf("candidates = %+v, want %d", r.Candidates, len(want))
	}
	msg := err.Error()
	for i, w := range want {
		c := r.Candidates[i]
		if c.Path != w.path || c.Source != SourcePath || !strings.Contains(c.Reason, w.reason) || c.Output != w.output || c.Version != "" {
			t.Errorf("candidate %d = %+v, want path %q reason containing %q output %q", i, c, w.path, w.reason, w.output)
		}
		if !strings.Contains(msg, w.path) || !strings.Contains(msg, w.reason) {
			t.Errorf("error %q does not name %s with its reason", msg, w.path)
		}
		if w.output != "" && !strings.Contains(msg, `"`+w.output+`"`) {
			t.Errorf("error %q does not quote output %q", msg, w.output)
		}
	}
}

func TestResolveExecutableNotFound(t *testing.T) {
	t.Parallel()
	a, b := t.TempDir(), t.TempDir()
	_, err := ResolveExecutable(context.Background(), ExecutableRequest{
		Command: testCommand, Env: noEnv, PATH: pathList(a, "", b, filepath.Join(a, "missing")),
	})
	r := requireRefusal(t, err)
	if len(r.Candidates) != 0 || r.Searched != 3 {
		t.Fatalf("refusal = %+v, want no candidates and 3 directories searched", r)
	}
	if msg := err.Error(); !strings.Contains(msg, "not found on PATH") || !strings.Contains(msg, "3 directories") {
		t.Fatalf("error %q does not say the command was not found and how much was searched", msg)
	}
}

func TestResolveExecutableRelativePathEntriesIgnored(t *testing.T) {
	wd := t.TempDir()
	writeTool(t, filepath.Join(wd, "bin"), testCommand, `echo "agent 1.0.0"`)
	writeTool(t, wd, testCommand, `echo "agent 1.0.0"`)
	t.Chdir(wd)

	_, err := ResolveExecutable(context.Background(), ExecutableRequest{
		Command: testCommand, Env: noEnv, PATH: pathList("bin", ".", "", "./bin"),
	})
	r := requireRefusal(t, err)
	if len(r.Candidates) != 0 || r.Searched != 0 {
		t.Fatalf("refusal = %+v, want relative entries ignored", r)
	}
}

func TestResolveExecutableDedupesLinkedDirectories(t *testing.T) {
	t.Parallel()
	real := toolDir(t, `echo boom; exit 3`)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	_, err := ResolveExecutable(context.Background(), ExecutableRequest{
		Command: testCommand, Env: noEnv, PATH: pathList(real, link, real),
	})
	r := requireRefusal(t, err)
	if len(r.Candidates) != 1 || r.Searched != 1 {
		t.Fatalf("refusal = %+v, want one candidate from one directory", r)
	}
}

func TestResolveExecutableFollowsSymlinkedExplicit(t *testing.T) {
	t.Parallel()
	target := writeTool(t, t.TempDir(), "agent-real", `echo "agent 3.1.4"`)
	link := filepath.Join(t.TempDir(), testCommand)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	got, err := ResolveExecutable(context.Background(), ExecutableRequest{Command: testCommand, Explicit: link, Env: noEnv})
	if err != nil {
		t.Fatalf("ResolveExecutable: %v", err)
	}
	// Verified only: the path is returned as given, not replaced by its target.
	if want := (ResolvedExecutable{Path: link, Version: "3.1.4", Source: SourceExplicit}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestResolveExecutableVersionArgs(t *testing.T) {
	t.Parallel()
	dir := toolDir(t, `if [ "$#" = 1 ] && [ "$1" = "-V" ]; then echo "agent 4.5.6"; else echo "bad args: $*"; exit 2; fi`)
	got, err := ResolveExecutable(context.Background(), ExecutableRequest{
		Command: testCommand, Env: noEnv, PATH: dir, VersionArgs: []string{"-V"},
	})
	if err != nil {
		t.Fatalf("ResolveExecutable: %v", err)
	}
	if got.Version != "4.5.6" {
		t.Fatalf("version = %q, want 4.5.6", got.Version)
	}
	// The default probe argument is --version, which this tool rejects.
	_, err = ResolveExecutable(context.Background(), ExecutableRequest{Command: testCommand, Env: noEnv, PATH: dir})
	r := requireRefusal(t, err)
	if len(r.Candidates) != 1 || r.Candidates[0].Output != "bad args: --version" {
		t.Fatalf("candidates = %+v, want the --version probe output", r.Candidates)
	}
}

func TestResolveExecutableProbeTimeout(t *testing.T) {
	t.Parallel()
	// The sleep is a grandchild holding the output pipe: the whole group must be killed.
	dir := toolDir(t, `echo "agent 1.0.0"; /bin/sleep 30`)
	start := time.Now()
	_, err := ResolveExecutable(context.Background(), ExecutableRequest{
		Command: testCommand, Env: noEnv, PATH: dir, ProbeTimeout: 200 * time.Millisecond,
	})
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Fatalf("resolution took %s despite a 200ms probe timeout", elapsed)
	}
	r := requireRefusal(t, err)
	if len(r.Candidates) != 1 || !strings.Contains(r.Candidates[0].Reason, "timed out") || r.Candidates[0].Output != "agent 1.0.0" {
		t.Fatalf("candidates = %+v, want one timed-out candidate with its output", r.Candidates)
	}
}

func TestResolveExecutableBoundsOutput(t *testing.T) {
	t.Parallel()
	dir := toolDir(t, `i=0; while [ $i -lt 2000 ]; do printf 'xxxxxxxxxx'; i=$((i+1)); done; exit 1`)
	_, err := ResolveExecutable(context.Background(), ExecutableRequest{Command: testCommand, Env: noEnv, PATH: dir})
	r := requireRefusal(t, err)
	if n := len(r.Candidates[0].Output); n != probeOutputLimit {
		t.Fatalf("kept %d bytes of output, want %d", n, probeOutputLimit)
	}
	longest := 0
	for _, run := range strings.FieldsFunc(err.Error(), func(r rune) bool { return r != 'x' }) {
		longest = max(longest, len(run))
	}
	if n := longest; n > refusalQuoteLimit || n < refusalQuoteLimit-10 {
		t.Fatalf("error quotes %d bytes of output, want about %d", n, refusalQuoteLimit)
	}
	if !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("error %q does not say the output was truncated", err)
	}
}

func TestResolveExecutableCancelled(t *testing.T) {
	t.Parallel()
	dir := toolDir(t, `echo "agent 1.0.0"`)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := ResolveExecutable(ctx, ExecutableRequest{Command: testCommand, Env: noEnv, PATH: dir})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrExecutableRefused) {
		t.Fatalf("err = %v, want context.Canceled and no refusal", err)
	}
}

func TestResolveExecutableInvalidCommand(t *testing.T) {
	t.Parallel()
	for _, cmd := range []string{"", ".", "..", "bin/agent", "/usr/bin/agent"} {
		_, err := ResolveExecutable(context.Background(), ExecutableRequest{Command: cmd, Env: noEnv, PATH: t.TempDir()})
		if !errors.Is(err, ErrInvalidCommand) {
			t.Errorf("command %q: err = %v, want ErrInvalidCommand", cmd, err)
		}
	}
}

func TestEnvVarForExecutable(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"opencode":      "JAM_OPENCODE_BIN",
		"jam-testagent": "JAM_JAM_TESTAGENT_BIN",
		"claude.code":   "JAM_CLAUDE_CODE_BIN",
		"Gemini2":       "JAM_GEMINI2_BIN",
	}
	for cmd, want := range tests {
		if got := EnvVarFor(cmd); got != want {
			t.Errorf("EnvVarFor(%q) = %q, want %q", cmd, got, want)
		}
	}
}

func TestCompareVersionsExecutable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want int
	}{
		{"1.2.3", "1.2.3", 0},
		{"1.10.0", "1.9.9", 1},
		{"1.2", "1.2.0", 0},
		{"1.2", "1.2.1", -1},
		{"2.0", "10.0", -1},
		{"01.2", "1.2", 0},
		{"99999999999999999999.1", "99999999999999999998.9", 1},
		{"0.0.1", "0.0.0.9", 1},
	}
	for _, tt := range tests {
		if got := compareVersions(tt.a, tt.b); got != tt.want {
			t.Errorf("compareVersions(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := compareVersions(tt.b, tt.a); got != -tt.want {
			t.Errorf("compareVersions(%q, %q) = %d, want %d", tt.b, tt.a, got, -tt.want)
		}
	}
}

// npm installs CLIs as "#!/usr/bin/env node" shims: the probe must run with the PATH it
// searched, or a candidate whose interpreter sits beside it looks broken.
func TestResolveExecutableProbesWithTheSearchedPATH(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTool(t, dir, "jam-fake-interpreter", `echo "agent 3.1.4"`)
	writeFile(t, dir, testCommand, "#!/usr/bin/env jam-fake-interpreter\n", 0o755)
	got, err := ResolveExecutable(context.Background(), ExecutableRequest{
		Command: testCommand, Env: noEnv, PATH: pathList(dir, "/usr/bin", "/bin"),
	})
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	if got.Version != "3.1.4" {
		t.Fatalf("version = %q, want 3.1.4", got.Version)
	}
}

// TestAnUnchangedExecutableIsProbedOnceAndAReplacedOneAgain: every wake resolves its
// provider's executable; asking the same file for its version each time spawned a CLI per
// wake. A replaced file (an upgrade) is asked again at once.
func TestAnUnchangedExecutableIsProbedOnceAndAReplacedOneAgain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	count := filepath.Join(dir, "probes")
	bin := filepath.Join(dir, "bin")
	writeTool(t, bin, testCommand, `echo x >> `+count+`; echo "agent 1.2.3"`)
	resolve := func() string {
		t.Helper()
		got, err := ResolveExecutable(context.Background(), ExecutableRequest{Command: testCommand, Env: noEnv, PATH: bin})
		if err != nil {
			t.Fatalf("ResolveExecutable: %v", err)
		}
		return got.Version
	}
	probed := func() int {
		b, _ := os.ReadFile(count)
		return strings.Count(string(b), "x")
	}
	for range 3 {
		if v := resolve(); v != "1.2.3" {
			t.Fatalf("version %q", v)
		}
	}
	if n := probed(); n != 1 {
		t.Fatalf("probed %d times for three resolutions of one unchanged file, want 1", n)
	}
	// An upgrade replaces the file: a new inode, new contents.
	if err := os.Remove(filepath.Join(bin, testCommand)); err != nil {
		t.Fatal(err)
	}
	writeTool(t, bin, testCommand, `echo x >> `+count+`; echo "agent 1.3.0"`)
	if v := resolve(); v != "1.3.0" {
		t.Fatalf("after the upgrade: version %q, want 1.3.0", v)
	}
	if n := probed(); n != 2 {
		t.Fatalf("probed %d times, want a second probe after the upgrade", n)
	}
}

// groupLog records what a probe records (a fake procgroup.Recorder).
type groupLog struct {
	mu              sync.Mutex
	added, removed  []int
	aliveWhileAdded bool
}

func (g *groupLog) Add(pid int, _ string) (procgroup.Record, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.added = append(g.added, pid)
	g.aliveWhileAdded = syscall.Kill(-pid, 0) == nil // its group exists: recorded while it runs
	return procgroup.Record{PGID: pid, LeaderPID: pid}, nil
}

func (g *groupLog) Remove(rec procgroup.Record) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.removed = append(g.removed, rec.PGID)
	return nil
}

// TestAVersionProbeIsRecordedWhileItRuns: a worker killed mid-probe must leave its reaper a
// record of the probe's process group (a CLI's first run may start children that outlive
// the probe's Pdeathsig), and the record goes once the group is killed.
func TestAVersionProbeIsRecordedWhileItRuns(t *testing.T) {
	dir := toolDir(t, `sleep 0.2; echo "agent 1.2.3"`)
	g := &groupLog{}
	if _, err := ResolveExecutable(context.Background(), ExecutableRequest{Command: testCommand, Env: noEnv, PATH: dir,
		Groups: g}); err != nil {
		t.Fatalf("ResolveExecutable: %v", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.added) != 1 || !g.aliveWhileAdded || len(g.removed) != 1 || g.removed[0] != g.added[0] {
		t.Fatalf("recorded %v (alive %v), removed %v: want one group recorded while it ran, then removed", g.added, g.aliveWhileAdded, g.removed)
	}
	if err := syscall.Kill(-g.added[0], 0); err == nil {
		t.Fatal("the probe's group outlived it")
	}
}
