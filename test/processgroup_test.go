package test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/procgroup"
	"github.com/jam-dev/jam/internal/testsupport/testagent"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// providerScript writes an executable provider that, like an agent starting a shell or an MCP
// server, leaves a child of its own (a sleep with the returned, distinctive argv) and then
// becomes the test agent. Paths are baked in: the provider's environment is not the test's.
func providerScript(t *testing.T) (path string, sleepArgv []string) {
	t.Helper()
	dir := t.TempDir()
	duration := fmt.Sprintf("1234.%06d", rand.IntN(1_000_000))
	path = filepath.Join(dir, "provider.sh")
	script := fmt.Sprintf(`#!/bin/sh
# Jam asks for the version first; that probe starts nothing.
case "$1" in --version) exec %[1]s "$@" ;; esac
sleep %[2]s </dev/null >/dev/null 2>&1 &
exec %[1]s --state-dir %[3]s "$@"
`, testagent.Binary(t), duration, filepath.Join(dir, "state"))
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, []string{"sleep", duration}
}

// processesRunning lists the live processes whose argv is exactly argv.
func processesRunning(t *testing.T, argv []string) []procgroup.Stat {
	t.Helper()
	procs, err := procgroup.Host.Processes()
	if err != nil {
		t.Fatal(err)
	}
	want := []byte(strings.Join(argv, "\x00") + "\x00")
	var out []procgroup.Stat
	for _, p := range procs {
		if p.Dead() {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.PID), "cmdline")); err == nil && bytes.Equal(b, want) {
			out = append(out, p)
		}
	}
	return out
}

func stillRunning(p procgroup.Stat) bool {
	st, err := procgroup.ReadStat(p.PID)
	return err == nil && st.Start == p.Start && !st.Dead()
}

// nodeShape is one way of running a node's worker: `jam dev` or `jam worker`.
type nodeShape struct {
	name string
	// start starts (or restarts) the process on the same data directory.
	start func() (*client.Client, *proc)
	home  string
}

// A jam killed with SIGKILL takes its provider with it, but not the provider's own child,
// which init inherits: its process guard kills that child within seconds. With the guard
// gone too (the whole machine's view of the worker lost), the jam restarted on the same data
// directory kills it before serving, and its clean stop leaves none of its own behind. Both
// `jam dev` and `jam worker`, side by side: each has its own data directory, and the
// sleepers and guards each looks for are its own.
func TestAKilledJamsLeftoversAreReapedByItsGuardOrItsRestart(t *testing.T) {
	t.Parallel()
	t.Run("jam dev", func(t *testing.T) {
		t.Parallel()
		home := filepath.Join(t.TempDir(), "jam-home")
		env := ownedEnv(t, t.TempDir())
		reapsAfterKill(t, nodeShape{name: devNode, home: home, start: func() (*client.Client, *proc) {
			d := startDevEnv(t, home, env)
			return d.client, d.proc
		}})
	})
	t.Run("jam worker", func(t *testing.T) {
		t.Parallel()
		p := startProductionServer(t, "reap-test-token")
		home := filepath.Join(t.TempDir(), "node-w1")
		env := append(append(p.base, "JAM_HOME="+home), ownedEnv(t, t.TempDir())...)
		reapsAfterKill(t, nodeShape{name: "w1", home: home, start: func() (*client.Client, *proc) {
			return p.client, startJam(t, env, "worker", "--node", "w1")
		}})
	})
}

func reapsAfterKill(t *testing.T, n nodeShape) {
	ctx := context.Background()
	script, sleepArgv := providerScript(t)
	c, jam := n.start()

	tmpl := domain.TemplateConfig{Alias: "default", Transport: domain.TransportACP, Command: script, Args: []string{}}
	var agent api.AgentBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "forker", Kind: domain.AgentOwned, Template: &tmpl}, &agent))
	room, session := roomWith(t, c, "lab", agent.ID)
	records := filepath.Join(n.home, "nodes", n.name, "process-groups")

	// The guard: the killed jam's leftover dies within seconds, its record with it.
	awaitReply(t, c, postText(t, c, room.ID, "hello"), 90*time.Second)
	sleeper := leftAfterKill(t, c, session, jam, sleepArgv, false)
	wait.Eventually(t, 15*time.Second, func() bool { return !stillRunning(sleeper) },
		"the killed jam's process guard to kill the sleeper %d", sleeper.PID)
	wait.Eventually(t, 10*time.Second, func() error {
		if entries, err := os.ReadDir(records); err != nil || len(entries) != 0 {
			return fmt.Errorf("process group records after the guard: %v %v", entries, err)
		}
		return nil
	}, "the guard to remove the record")

	// The restart: with its guard killed as well, the leftover waits for the next jam.
	c, jam = n.start()
	awaitReply(t, c, postText(t, c, room.ID, "once more"), 90*time.Second)
	sleeper = leftAfterKill(t, c, session, jam, sleepArgv, true)
	c, jam = n.start()
	wait.Eventually(t, 30*time.Second, func() bool { return !stillRunning(sleeper) }, "the restarted jam to reap the sleeper %d", sleeper.PID)
	// The kill comes before the log line and the record's removal: wait for both.
	wait.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(jam.stderrText(), "reaped a process group left by a previous worker") {
			return errors.New("the reap was not logged")
		}
		if entries, err := os.ReadDir(records); err != nil || len(entries) != 0 {
			return fmt.Errorf("process group records after the reap: %v %v", entries, err)
		}
		return nil
	}, "the reap to be logged and its record removed")

	// The restarted jam runs the agent again; its clean stop leaves nothing either.
	awaitReply(t, c, postText(t, c, room.ID, "again"), 90*time.Second)
	if code := jam.interrupt(45 * time.Second); code != 0 {
		t.Fatalf("jam exited %d after Ctrl-C", code)
	}
	wait.Eventually(t, 10*time.Second, func() error {
		if got := processesRunning(t, sleepArgv); len(got) != 0 {
			return fmt.Errorf("still running: %+v", got)
		}
		return nil
	}, "the provider's children to end after a clean stop")
	if g := guardsOf(t, records); len(g) != 0 {
		t.Fatalf("process guards left after a clean stop: %v", g)
	}
}

// leftAfterKill SIGKILLs jam (and first its process guard, when killGuard) while the
// session's provider runs and has its own child: the provider ends with jam, the child is
// left, re-parented. It returns the child.
func leftAfterKill(t *testing.T, c *client.Client, session uuid.UUID, jam *proc, sleepArgv []string, killGuard bool) procgroup.Stat {
	t.Helper()
	provider := getSession(t, c, session).Runtime
	if provider == nil || provider.PID == 0 {
		t.Fatalf("the session has no live runtime after a reply: %+v", provider)
	}
	var sleeper procgroup.Stat
	wait.Eventually(t, 10*time.Second, func() bool {
		got := processesRunning(t, sleepArgv)
		if len(got) == 1 {
			sleeper = got[0]
		}
		return len(got) == 1
	}, "the provider's child %v to run", sleepArgv)
	t.Cleanup(func() {
		// Whatever happened, the test leaves no sleeper behind.
		if stillRunning(sleeper) {
			_ = syscall.Kill(sleeper.PID, syscall.SIGKILL)
		}
	})
	if sleeper.PGRP != provider.PID {
		t.Fatalf("the sleeper %+v is not in the provider's group %d", sleeper, provider.PID)
	}

	found := false
	for _, d := range guardsOf(t, "") {
		if parentOf(d) == jam.cmd.Process.Pid {
			found = true
			if killGuard {
				if err := syscall.Kill(d, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if !found {
		t.Fatalf("jam %d runs no process guard", jam.cmd.Process.Pid)
	}
	if err := jam.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-jam.exited
	wait.Eventually(t, 10*time.Second, func() bool { return !alive(provider.PID) }, "the provider %d to end with its killed jam", provider.PID)
	if killGuard {
		// The leak a guard closes: the provider's own child outlives them both.
		if !stillRunning(sleeper) {
			t.Fatalf("the sleeper %d died with jam: the test no longer exercises the leak", sleeper.PID)
		}
		// The kernel re-parents the orphan as the provider exits; under load /proc may show
		// the old parent a moment longer.
		wait.Eventually(t, 5*time.Second, func() bool { return parentOf(sleeper.PID) != provider.PID },
			"the sleeper %d to be re-parented", sleeper.PID)
	}
	return sleeper
}

// guardsOf lists the running process guards (`jam process-guard`) whose records directory
// is dir ("" any).
func guardsOf(t *testing.T, dir string) []int {
	t.Helper()
	procs, err := procgroup.Host.Processes()
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, p := range procs {
		if p.Dead() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.PID), "cmdline"))
		args := strings.Split(string(b), "\x00")
		if err == nil && slices.Contains(args, "process-guard") && (dir == "" || slices.Contains(args, dir)) {
			out = append(out, p.PID)
		}
	}
	return out
}
