// Package repo runs Jam's repository operations — clone, branch, commit, push, pull request,
// checks — as fixed argv calls of git and gh in a session's workspace: no shell, "--" or an
// attached "--flag=value" before every user value, bounded time and output. Where the argv
// runs (host-native, or `sbx exec` in the guest) is the Runner's business.
package repo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// Bounds of one git or gh call.
const (
	// MaxOutput is what is kept of a call's stdout and of its stderr; the rest is drained.
	MaxOutput = 256 << 10
	// MaxErrorText is what of a failed call's stderr reaches the operation's error.
	MaxErrorText = 1024
	CloneTimeout = 10 * time.Minute
	PushTimeout  = 5 * time.Minute
	ShortTimeout = time.Minute
)

// Cmd is one call: argv run in Dir (the same absolute path on the host and in a guest).
type Cmd struct {
	Dir     string
	Argv    []string
	Stdin   []byte
	Timeout time.Duration
}

// Runner runs a Cmd and returns its stdout; a call that ran and failed is an *ExitError.
type Runner interface {
	Run(ctx context.Context, c Cmd) ([]byte, error)
}

// ExitError is a git or gh call that ran and exited non-zero.
type ExitError struct {
	Argv   []string
	Code   int
	Stdout []byte
	Stderr string
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("%s exited %d: %s", e.Argv[0], e.Code, e.Stderr)
}

// ErrTimeout: the call outlived its bound and was killed.
var ErrTimeout = errors.New("repository command timed out")

// Capped keeps the first n bytes written to it and drops (but accepts) the rest, so a
// chatty child never blocks and never grows memory.
type Capped struct {
	N   int
	buf bytes.Buffer
}

func (c *Capped) Write(p []byte) (int, error) {
	if room := c.N - c.buf.Len(); room > 0 {
		if len(p) > room {
			c.buf.Write(p[:room])
		} else {
			c.buf.Write(p)
		}
	}
	return len(p), nil
}

// Bytes is what was kept.
func (c *Capped) Bytes() []byte { return c.buf.Bytes() }

// ErrorText is a failed call's stderr made fit for an operation record: trimmed, bounded,
// control characters dropped.
func ErrorText(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > MaxErrorText {
		b = append(b[:MaxErrorText:MaxErrorText], "…"...)
	}
	return string(bytes.Map(func(r rune) rune {
		if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f {
			return -1
		}
		return r
	}, b))
}

// Exec runs name+args (resolved by the caller) bounded by timeout, in its own process group
// killed whole on timeout or cancellation, with exactly env. It is the host side of every
// Runner: host-native it runs git itself, sandboxed it runs `sbx exec`.
func Exec(ctx context.Context, argv []string, dir string, env []string, stdin []byte, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	stdout, stderr := &Capped{N: MaxOutput}, &Capped{N: MaxOutput}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", argv[0], err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return stdout.Bytes(), &ExitError{Argv: argv, Code: exit.ExitCode(), Stdout: stdout.Bytes(), Stderr: ErrorText(stderr.Bytes())}
		}
		if err != nil {
			return stdout.Bytes(), fmt.Errorf("run %s: %w", argv[0], err)
		}
		return stdout.Bytes(), nil
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("%s after %s: %w", argv[0], timeout, ErrTimeout)
		}
		return nil, fmt.Errorf("%s: %w", argv[0], ctx.Err())
	}
}
