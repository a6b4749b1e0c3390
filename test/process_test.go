// Package test holds Jam's cross-process tests: they build the real `jam` binary and drive
// it the way an operator would, through its flags, its REST API and its signals.
package test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

var jamBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "jam-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	jamBinary = filepath.Join(dir, "jam")
	_, thisFile, _, _ := runtime.Caller(0)
	build := exec.Command("go", "build", "-o", jamBinary, "./cmd/jam")
	build.Dir = filepath.Dir(filepath.Dir(thisFile))
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build jam:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running jam process whose output the test can wait on.
type proc struct {
	t       *testing.T
	cmd     *exec.Cmd
	mu      sync.Mutex
	stdout  bytes.Buffer
	stderr  bytes.Buffer
	lines   chan string
	exited  chan struct{}
	waitErr error
}

// startJam starts `jam args...` with env added to a minimal environment.
func startJam(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(jamBinary, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	p := &proc{t: t, cmd: cmd, lines: make(chan string, 256), exited: make(chan struct{})}
	outR, outW := io.Pipe()
	cmd.Stdout = io.MultiWriter(outW, lockedWriter{&p.mu, &p.stdout})
	cmd.Stderr = lockedWriter{&p.mu, &p.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start jam %v: %v", args, err)
	}
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	}()
	go func() {
		p.waitErr = cmd.Wait()
		outW.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = cmd.Process.Kill()
			<-p.exited
		}
		awaitGroupsReaped(cmd.Env)
		if t.Failed() {
			p.mu.Lock()
			t.Logf("jam %v stdout:\n%s\nstderr (last 8 KiB):\n%s", args, p.stdout.String(), tail(p.stderr.String(), 8<<10))
			p.mu.Unlock()
		}
	})
	return p
}

// awaitGroupsReaped waits (10 s at most) until the process groups a killed jam recorded under
// its JAM_HOME are reaped by its process guard: what they started (a provider CLI's first run
// unpacking into HOME) must not write into the test's directories while they are removed.
func awaitGroupsReaped(env []string) {
	home := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "JAM_HOME="); ok {
			home = v
		}
	}
	if home == "" {
		return
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		left, _ := filepath.Glob(filepath.Join(home, "nodes", "*", "process-groups", "*.json"))
		if len(left) == 0 {
			return
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// banner reads stdout until every pattern has matched a line, returning the first group of each.
func (p *proc) banner(timeout time.Duration, patterns ...string) []string {
	p.t.Helper()
	res := make([]*regexp.Regexp, len(patterns))
	for i, pat := range patterns {
		res[i] = regexp.MustCompile(pat)
	}
	out := make([]string, len(patterns))
	found := 0
	deadline := time.After(timeout)
	for found < len(patterns) {
		select {
		case line := <-p.lines:
			for i, re := range res {
				if m := re.FindStringSubmatch(line); m != nil && out[i] == "" {
					out[i] = m[1]
					found++
				}
			}
		case <-p.exited:
			p.t.Fatalf("jam exited before printing its banner: %v", p.waitErr)
		case <-deadline:
			p.t.Fatalf("jam did not print %v within %s", patterns, timeout)
		}
	}
	return out
}

// interrupt sends Ctrl-C and returns the exit code once the process ends.
func (p *proc) interrupt(timeout time.Duration) int {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		p.t.Fatalf("interrupt: %v", err)
	}
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		p.t.Fatalf("jam did not stop within %s of Ctrl-C", timeout)
		return -1
	}
}

// exitCode waits for a process expected to end on its own.
func (p *proc) exitCode(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		p.t.Fatalf("jam did not exit within %s", timeout)
		return -1
	}
}

func (p *proc) stderrText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// runJam runs a short jam command to completion and returns its stdout.
func runJam(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, jamBinary, args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("jam %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// waitHTTP polls url until it answers with want, or fails the test after timeout.
func waitHTTP(t *testing.T, url string, want int, timeout time.Duration) {
	t.Helper()
	wait.Eventually(t, timeout, func() error {
		resp, err := http.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			return errors.New(resp.Status)
		}
		return nil
	}, "%s to answer %d", url, want)
}

func apiClient(base, token string) *client.Client { return client.New(base, token) }

func isStatus(err error, status int) bool { return client.IsStatus(err, status) }
