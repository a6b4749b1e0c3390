package provider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// ChildShutdownGrace is how long a child's process group gets between SIGTERM and SIGKILL.
const ChildShutdownGrace = 3 * time.Second

// childIODelay bounds how long reaping waits for the child's stdio to drain after the leader
// exited: a grandchild that inherited stderr would otherwise keep Wait (and so Exited and
// Kill) blocked for as long as it lives.
const childIODelay = 2 * time.Second

// Command is a fixed argv to start; there is never a shell.
type Command struct {
	Path string
	Args []string
	Env  []string
	Dir  string
	// Stderr receives the child's stderr; nil discards it.
	Stderr io.Writer
}

// Spawner starts provider children. The node runtime registry supplies one that tracks
// every process group it started so none outlives the worker.
type Spawner interface {
	Spawn(ctx context.Context, c Command) (*Child, error)
}

// DefaultSpawner starts children in their own process group, untracked.
var DefaultSpawner Spawner = SpawnFunc(Spawn)

// SpawnFunc adapts a function to Spawner.
type SpawnFunc func(ctx context.Context, c Command) (*Child, error)

func (f SpawnFunc) Spawn(ctx context.Context, c Command) (*Child, error) { return f(ctx, c) }

// Child is a running provider process, leader of its own process group, with its stdio.
type Child struct {
	cmd    *exec.Cmd
	Stdin  io.WriteCloser
	Stdout io.ReadCloser
	exited chan struct{}
	err    error

	killOnce sync.Once
	onExit   []func()
	mu       sync.Mutex
}

// Spawn starts c as the leader of a new process group. ctx bounds only the start: the
// child lives until Kill.
func Spawn(ctx context.Context, c Command) (*Child, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var (
		stdin  io.WriteCloser
		stdout io.ReadCloser
	)
	cmd, err := startRetryingBusy(ctx, func() (*exec.Cmd, error) {
		cmd := exec.Command(c.Path, c.Args...)
		cmd.Env, cmd.Dir = c.Env, c.Dir
		// Its own group, so teardown reaches every process the provider starts.
		// Pdeathsig fires when the thread that forked the child exits, not the process; Go
		// does not retire threads that ran a plain fork, and the registry kills every tracked
		// group on shutdown, so it is a backstop for a worker killed outright.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		cmd.WaitDelay = childIODelay
		var err error
		if stdin, err = cmd.StdinPipe(); err != nil {
			return nil, fmt.Errorf("stdin of %s: %w", c.Path, err)
		}
		if stdout, err = cmd.StdoutPipe(); err != nil {
			return nil, fmt.Errorf("stdout of %s: %w", c.Path, err)
		}
		if c.Stderr != nil {
			cmd.Stderr = c.Stderr
		}
		return cmd, nil
	})
	if err != nil {
		if notStartable(err) {
			err = fmt.Errorf("%w: %w", ErrSpawn, err)
		}
		return nil, fmt.Errorf("start %s: %w", c.Path, err)
	}
	ch := &Child{cmd: cmd, Stdin: stdin, Stdout: stdout, exited: make(chan struct{})}
	go func() {
		ch.err = cmd.Wait()
		close(ch.exited)
		ch.mu.Lock()
		fns := ch.onExit
		ch.mu.Unlock()
		for _, fn := range fns {
			fn()
		}
	}()
	return ch, nil
}

// PID is the child's pid, which is also its process group id.
func (c *Child) PID() int { return c.cmd.Process.Pid }

// Exited is closed once the child has exited and been reaped.
func (c *Child) Exited() <-chan struct{} { return c.exited }

// ExitErr is the child's wait error once it exited.
func (c *Child) ExitErr() error {
	select {
	case <-c.exited:
		return c.err
	default:
		return nil
	}
}

// Alive reports whether the child has not exited.
func (c *Child) Alive() bool {
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// OnExit registers fn to run after the child exits (immediately if it already has).
func (c *Child) OnExit(fn func()) {
	c.mu.Lock()
	select {
	case <-c.exited:
		c.mu.Unlock()
		fn()
		return
	default:
	}
	c.onExit = append(c.onExit, fn)
	c.mu.Unlock()
}

// Kill ends the whole process group: stdin closes (many agents exit on EOF), SIGTERM, and
// SIGKILL after grace. It returns once the leader is reaped and the group is gone or killed.
func (c *Child) Kill(grace time.Duration) {
	c.killOnce.Do(func() {
		_ = c.Stdin.Close()
		pgid := c.PID()
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-c.exited:
		case <-t.C:
		}
		// Always sweep the group: grandchildren may ignore SIGTERM or outlive the leader.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-c.exited
	})
}

// GroupAlive reports whether any process of the group pgid still exists.
func GroupAlive(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// ProcessGroupMembers counts live (non-zombie) processes whose process group is pgid, by
// reading /proc. Tests use it to prove teardown leaves nothing behind.
func ProcessGroupMembers(pgid int) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		pid := 0
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid <= 0 {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the parenthesised command: state ppid pgrp ...
		i := lastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		var state byte
		var ppid, pgrp int
		if _, err := fmt.Sscanf(string(stat[i+1:]), " %c %d %d", &state, &ppid, &pgrp); err != nil {
			continue
		}
		if pgrp == pgid && state != 'Z' && state != 'X' {
			n++
		}
	}
	return n, nil
}

func lastIndexByte(b []byte, c byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == c {
			return i
		}
	}
	return -1
}

// notStartable reports a start failure that trying again cannot fix: the executable is
// missing, not executable, or not a program this machine runs (a fork that failed for want
// of resources is not among them).
func notStartable(err error) bool {
	return errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) ||
		errors.Is(err, syscall.ENOEXEC) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTDIR)
}

// startBusyRetries bounds the starts of one command refused as "text file busy".
const startBusyRetries = 5

// startRetryingBusy starts the command build makes, building and starting it again when the
// kernel refuses the executable as text file busy: it was open for writing at that instant
// (an install replacing it, or a file this process was writing when another goroutine
// forked and the child had not yet exec'd), which passes within milliseconds. build runs
// once per attempt: a failed start closes the pipes it made.
func startRetryingBusy(ctx context.Context, build func() (*exec.Cmd, error)) (*exec.Cmd, error) {
	for attempt := 1; ; attempt++ {
		cmd, err := build()
		if err != nil {
			return nil, err
		}
		err = cmd.Start()
		if err == nil || !errors.Is(err, syscall.ETXTBSY) || attempt == startBusyRetries {
			return cmd, err
		}
		select {
		case <-ctx.Done():
			return cmd, err
		case <-time.After(time.Duration(attempt) * 20 * time.Millisecond):
		}
	}
}

// LivenessOf reports child and whether its transport is open (nil child: nothing started);
// the transport of a process that is gone is closed whatever its reader says.
func LivenessOf(child *Child, transportOpen bool) Liveness {
	if child == nil {
		return Liveness{}
	}
	alive := child.Alive()
	return Liveness{PID: child.PID(), ProcessAlive: alive, TransportOpen: alive && transportOpen}
}
