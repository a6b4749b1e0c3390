package test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jam-dev/jam/internal/testsupport/testagent"
)

// `jam room post --wait` says at once when nobody will answer: a room whose agent cannot
// start returns within 5 s with the cause, the command that retries it and exit 3; a room
// with no agent exits 5 at once; a room whose agent answers prints the reply and exits 0.
func TestRoomPostWaitReturnsAtOnceWhenNoAgentCanAnswer(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "jam-home")
	startDevEnv(t, home, ownedEnv(t, t.TempDir()))
	env := []string{"JAM_HOME=" + home}
	jam := func(args ...string) string {
		t.Helper()
		out, err := runJam(t, env, args...)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}

	// An agent whose executable is gone by the time its room wakes.
	exe := filepath.Join(t.TempDir(), "my-acp-agent")
	must(t, os.Symlink(testagent.Binary(t), exe))
	broken := jam("agent", "create", "broken", "--transport", "acp", "--command", exe, "-q")
	room := jam("room", "create", "lab", "--human", "ada", "-q")
	jam("room", "add", room, "--agent", broken)
	must(t, os.Remove(exe))
	start := time.Now()
	out, err := runJam(t, env, "room", "post", room, "hello", "--wait", "60s")
	took := time.Since(start)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("post --wait to an agent that cannot start: %v (stdout %q), want exit 3", err, out)
	}
	if took > 5*time.Second {
		t.Fatalf("post --wait took %s to see the failure, want under 5 s", took)
	}
	if msg := err.Error(); !strings.Contains(msg, exe) || !strings.Contains(msg, "jam session restart") {
		t.Fatalf("the failure does not name the executable and the fix: %s", msg)
	}

	empty := jam("room", "create", "empty", "--human", "ada", "-q")
	start = time.Now()
	_, err = runJam(t, env, "room", "post", empty, "hello", "--wait", "60s")
	if !errors.As(err, &exit) || exit.ExitCode() != 5 || time.Since(start) > 5*time.Second {
		t.Fatalf("post --wait to a room with no agent: %v after %s, want exit 5 at once", err, time.Since(start))
	}

	demo := jam("agent", "create", "demo", "-q")
	if again := jam("agent", "create", "demo", "-q"); again != demo {
		t.Fatalf("creating the same agent again gave %q, want %q", again, demo)
	}
	ok := jam("room", "create", "ok", "--human", "ada", "-q")
	jam("room", "add", ok, "--agent", demo)
	if got := jam("room", "post", ok, "hello", "--wait", "60s"); got != "echo: hello" {
		t.Fatalf("post --wait printed %q, want the reply", got)
	}
}
