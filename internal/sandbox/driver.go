// Package sandbox is Jam's driver for Docker Sandboxes (`sbx`): fixed argv and no shell,
// bounded by the reference's timeouts, output parsed defensively, the installed release
// probed so the right flag syntax is used, and a classified support probe that never fails
// Jam's startup (host-native runtimes need no `sbx` at all).
package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/jam-dev/jam/internal/domain"
)

// Timeouts of `sbx` commands (docs/architecture.md §5, "Bounds").
const (
	ReadOnlyTimeout  = 12 * time.Second
	CreateTimeout    = 600 * time.Second
	LifecycleTimeout = 300 * time.Second
)

// MinVersion is the oldest `sbx` release the driver speaks to: v0.31.0 replaced --branch
// with --clone, which private host clones need.
var MinVersion = Version{0, 31, 0}

// policySandboxFlagSince: from v0.32 policy commands take --sandbox NAME instead of a
// positional sandbox (or -g for the global policy).
var policySandboxFlagSince = Version{0, 32, 0}

// Driver runs one `sbx` executable.
type Driver struct {
	// Path is the resolved absolute path of `sbx`.
	Path string
	// Env is the environment `sbx` runs with (nil: the worker's own).
	Env []string
	// Version, once probed, selects the flag syntax.
	Version Version
}

// CommandError is a `sbx` command that ran and failed.
type CommandError struct {
	Args     []string
	ExitCode int
	Stderr   string
}

func (e *CommandError) Error() string {
	return fmt.Sprintf("sbx %v: exit %d: %s", e.Args, e.ExitCode, e.Stderr)
}

// ErrTimeout: the command outlived its bound and was killed.
var ErrTimeout = errors.New("sbx command timed out")

// run executes `sbx args...` with stdin, bounded by timeout. The command leads its own
// process group, which is killed whole on timeout or cancellation.
func (d *Driver) run(ctx context.Context, timeout time.Duration, stdin io.Reader, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.Command(d.Path, args...)
	cmd.Env = d.Env
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start sbx %v: %w", args, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return finish(args, stdout.Bytes(), stderr.Bytes(), err)
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("sbx %v after %s: %w", args, timeout, ErrTimeout)
		}
		return nil, fmt.Errorf("sbx %v: %w", args, ctx.Err())
	}
}

func finish(args []string, stdout, stderr []byte, err error) ([]byte, error) {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return stdout, &CommandError{Args: args, ExitCode: exit.ExitCode(), Stderr: truncate(bytes.TrimSpace(stderr))}
	}
	if err != nil {
		return stdout, fmt.Errorf("sbx %v: %w", args, err)
	}
	return stdout, nil
}

// ProbeVersion runs `sbx version` and remembers the release for the flag syntax.
func (d *Driver) ProbeVersion(ctx context.Context) (Version, error) {
	out, err := d.run(ctx, ReadOnlyTimeout, nil, "version")
	if err != nil {
		return Version{}, err
	}
	v, err := ParseVersion(out)
	if err != nil {
		return Version{}, err
	}
	d.Version = v
	return v, nil
}

// List runs `sbx ls --json`.
func (d *Driver) List(ctx context.Context) ([]Sandbox, error) {
	out, err := d.run(ctx, ReadOnlyTimeout, nil, "ls", "--json")
	if err != nil {
		return nil, err
	}
	return ParseList(out)
}

// Stop stops a sandbox (it keeps its disk).
func (d *Driver) Stop(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	_, err := d.run(ctx, LifecycleTimeout, nil, "stop", name)
	return err
}

// Remove deletes a sandbox without prompting.
func (d *Driver) Remove(ctx context.Context, name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	_, err := d.run(ctx, LifecycleTimeout, nil, "rm", "-f", name)
	return err
}

// CreateSpec is what `sbx create` is given; it comes from a validated plan.
type CreateSpec struct {
	Name  string
	Agent string
	// Workspace is mounted at the same absolute path in the guest; Extra are further mounts
	// (":ro" appended for read-only ones by the caller's plan).
	Workspace string
	Extra     []string
	Clone     bool
	Kits      []string
}

// Create creates a sandbox.
func (d *Driver) Create(ctx context.Context, s CreateSpec) error {
	if err := ValidateName(s.Name); err != nil {
		return err
	}
	args := []string{"create", "--name", s.Name}
	if s.Clone {
		args = append(args, "--clone")
	}
	for _, k := range s.Kits {
		args = append(args, "--kit", k)
	}
	args = append(args, s.Agent)
	if s.Workspace != "" {
		args = append(args, s.Workspace)
	}
	args = append(args, s.Extra...)
	_, err := d.run(ctx, CreateTimeout, nil, args...)
	return err
}

// PolicySandboxArgs are the arguments that scope a policy command to one sandbox, in the
// syntax of the probed release.
func (d *Driver) PolicySandboxArgs(name string) []string {
	if d.Version.Less(policySandboxFlagSince) {
		return []string{name}
	}
	return []string{"--sandbox", name}
}

// ownerMarkerScript writes stdin to the guest's owner-marker file, private to the agent user.
// It is a constant: no value of Jam's or a user's is ever spliced into it.
const ownerMarkerScript = `umask 077 && cat > "$HOME/.jam-sandbox-owner.json"`

// readOwnerMarkerScript prints the guest's owner-marker file.
const readOwnerMarkerScript = `cat "$HOME/.jam-sandbox-owner.json"`

// WriteGuestNonce pipes the nonce document into the guest over stdin.
func (d *Driver) WriteGuestNonce(ctx context.Context, name string, doc []byte) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	_, err := d.run(ctx, LifecycleTimeout, bytes.NewReader(doc), "exec", "-i", name, "sh", "-c", ownerMarkerScript)
	return err
}

// ReadGuestNonce reads the guest's owner-marker document.
func (d *Driver) ReadGuestNonce(ctx context.Context, name string) ([]byte, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	return d.run(ctx, LifecycleTimeout, nil, "exec", name, "sh", "-c", readOwnerMarkerScript)
}

// ExecArgs is the argv prefix that runs a long-lived provider in the sandbox over stdio:
// `sbx exec -i [-w DIR] [--env-file F] [-e K=V]... NAME`, followed by the provider's argv.
func (d *Driver) ExecArgs(name, dir, envFile string, env []string, argv []string) ([]string, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	args := []string{d.Path, "exec", "-i"}
	if dir != "" {
		args = append(args, "-w", dir)
	}
	if envFile != "" {
		args = append(args, "--env-file", envFile)
	}
	for _, kv := range env {
		args = append(args, "-e", kv)
	}
	args = append(args, name)
	return append(args, argv...), nil
}

// HasGlobalServiceSecret reports whether Docker holds a global credential for service
// (`sbx secret ls -g --service S`). Only the scope and service columns are read; the secret
// column is never retained.
func (d *Driver) HasGlobalServiceSecret(ctx context.Context, service string) (bool, error) {
	if !serviceName.MatchString(service) {
		return false, &domain.ValidationError{Field: "service", Detail: "want a lowercase service name"}
	}
	out, err := d.run(ctx, ReadOnlyTimeout, nil, "secret", "ls", "-g", "--service", service)
	if err != nil {
		return false, err
	}
	for _, line := range bytes.Split(out, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) >= 2 && f[0] == "global" && f[1] == service {
			return true, nil
		}
	}
	return false, nil
}

var serviceName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// PolicyCheckTimeout bounds one network policy check (docs/architecture.md §5, "Bounds").
const PolicyCheckTimeout = 15 * time.Second

// networkTarget is a host name, optionally with a port: nothing a shell or the CLI could read
// as a flag.
var networkTarget = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,252})(:[0-9]{1,5})?$`)

func validTargets(targets []string) error {
	if len(targets) == 0 {
		return &domain.ValidationError{Field: "targets", Detail: "at least one network target"}
	}
	for _, t := range targets {
		if !networkTarget.MatchString(t) {
			return &domain.ValidationError{Field: "targets", Detail: fmt.Sprintf("%q is not a host[:port]", domain.Truncate(t, 80))}
		}
	}
	return nil
}

// policyArgs is `policy VERB network` scoped to one sandbox in the probed release's syntax.
func (d *Driver) policyArgs(verb, name string, rest ...string) ([]string, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	args := append([]string{"policy", verb, "network"}, d.PolicySandboxArgs(name)...)
	return append(args, rest...), nil
}

// PolicyAllowNetwork allows the sandbox to reach targets (`sbx policy allow network`).
func (d *Driver) PolicyAllowNetwork(ctx context.Context, name string, targets []string) error {
	if err := validTargets(targets); err != nil {
		return err
	}
	args, err := d.policyArgs("allow", name, strings.Join(targets, ","))
	if err != nil {
		return err
	}
	_, err = d.run(ctx, LifecycleTimeout, nil, args...)
	return err
}

// PolicyRemoveNetwork removes the sandbox's rule for one target (`sbx policy rm network
// --resource`); Jam removes only rules it proved it created.
func (d *Driver) PolicyRemoveNetwork(ctx context.Context, name, target string) error {
	if err := validTargets([]string{target}); err != nil {
		return err
	}
	args, err := d.policyArgs("rm", name, "--resource", target)
	if err != nil {
		return err
	}
	_, err = d.run(ctx, LifecycleTimeout, nil, args...)
	return err
}

// PolicyCheckNetwork reports whether the sandbox may reach target under the effective
// policy (`sbx policy check network --json`).
func (d *Driver) PolicyCheckNetwork(ctx context.Context, name, target string) (bool, error) {
	dec, err := d.PolicyCheck(ctx, name, target)
	return dec.Allowed, err
}

// lastJSONLine is the last line of out that starts a JSON object (notices may precede it).
func lastJSONLine(out []byte) []byte {
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		if l := bytes.TrimSpace(lines[i]); len(l) > 0 && l[0] == '{' {
			return l
		}
	}
	return nil
}
