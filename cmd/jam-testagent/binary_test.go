package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"

	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// These tests run the real executable, for what only a process shows:
// exit codes, --version, env defaults and restarts across processes.

// buildBinary compiles the agent into a per-test temp dir.
func buildBinary(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go tool not available")
	}
	bin := filepath.Join(t.TempDir(), "jam-testagent")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

type procHarness struct {
	harness
	cmd    *exec.Cmd
	exited chan error
}

func startBinary(t *testing.T, bin string, args ...string) *procHarness {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &procHarness{cmd: cmd, exited: make(chan error, 1)}
	go func() { p.exited <- cmd.Wait() }()
	p.client = &testClient{}
	p.conn = acp.NewClientSideConnection(p.client, stdin, stdout)
	p.conn.SetLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	p.stop = sync.OnceFunc(func() { _ = stdin.Close() })
	t.Cleanup(func() {
		p.stop()
		select {
		case <-p.exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("agent did not exit after stdin closed; stderr:\n%s", stderr.String())
		}
	})
	return p
}

func (p *procHarness) wait(t *testing.T) int {
	t.Helper()
	select {
	case err := <-p.exited:
		p.exited <- err // keep it available for cleanup
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatalf("wait: %v", err)
		}
		return 0
	case <-time.After(5 * time.Second):
		t.Fatal("agent did not exit")
		return -1
	}
}

func TestBinary(t *testing.T) {
	bin := buildBinary(t)

	t.Run("version", func(t *testing.T) {
		out, err := exec.Command(bin, "--version").Output()
		if err != nil || string(out) != "jam-testagent 0.1.0\n" {
			t.Errorf("--version = %q, %v", out, err)
		}
	})

	t.Run("restart and load", func(t *testing.T) {
		ctx := testCtx(t)
		state := t.TempDir()
		p := startBinary(t, bin, "--state-dir", state)
		sid := p.newSession(t, ctx)
		p.mustReply(t, ctx, sid, "one")
		p.stop()
		if code := p.wait(t); code != 0 {
			t.Fatalf("exit code after stdin close = %d", code)
		}

		t.Setenv("JAM_TESTAGENT_STATE_DIR", state) // default comes from the env
		p2 := startBinary(t, bin)
		p2.initialize(t, ctx)
		if _, err := p2.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: sid, Cwd: "/", McpServers: []acp.McpServer{}}); err != nil {
			t.Fatalf("load: %v", err)
		}
		p2.client.take()
		if got := p2.mustReply(t, ctx, sid, "[[count]]"); got != "turns remembered: 1" {
			t.Errorf("count after restart = %q", got)
		}
	})

	t.Run("crash", func(t *testing.T) {
		ctx := testCtx(t)
		p := startBinary(t, bin, "--state-dir", t.TempDir())
		sid := p.newSession(t, ctx)
		if _, err := p.prompt(ctx, sid, "[[crash]]"); err == nil {
			t.Error("prompt succeeded despite crash")
		}
		if code := p.wait(t); code != 3 {
			t.Errorf("exit code = %d, want 3", code)
		}
		// The chunk was written before exit; the client may still be draining it.
		var got []string
		wait.Eventually(t, 2*time.Second, func() bool {
			got = append(got, agentChunks(p.client.take())...)
			return len(got) > 0
		}, "the chunk written before the crash")
		if strings.Join(got, "") != "about to crash" {
			t.Errorf("chunks before crash = %q", got)
		}
	})
}
