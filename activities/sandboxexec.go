package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/sandbox"
	"github.com/jam-dev/jam/internal/workspace"
)

// EnvProviderStateDir names the provider-state directory (on the host root, mounted at the
// same path in the guest) to a sandboxed provider.
const EnvProviderStateDir = "JAM_PROVIDER_STATE_DIR"

// launch is how a provider process is started.
type launch struct {
	exe  string
	args []string
	dir  string
	// envFile is deleted once the provider started (nil host-native).
	envFile *sandbox.EnvFile
	// env is the launched process's environment: a host-native provider's own (never the
	// worker's whole), or the `sbx` client's credential-free one.
	env []string
	// guestEnv is what a sandboxed provider sees in its guest (nil host-native).
	guestEnv []string
	// activation is how the provider state was prepared for an exact resume.
	activation activated
	// stateDir is the session's provider-state directory when the provider keeps its state
	// there (the same path on the host and in a guest); "" otherwise.
	stateDir string
}

func (l launch) release() {
	if l.envFile != nil {
		l.envFile.Release()
	}
}

// sandboxLaunch prepares a sandboxed provider: `sbx exec -i` into the host's sandbox with
// the session's workspace as working directory (mounted at the same path in the guest),
// allowlisted host values through a private env file and the provider-home path as an
// explicit --env. Ambient host environment never crosses into the guest.
func (r *Runtimes) sandboxLaunch(ctx context.Context, hs domain.HostSession, row domain.TransportSpec, in PrepareRuntimeInput, env []string) (launch, error) {
	h, err := r.Store.GetRuntimeHost(ctx, in.Host)
	if err != nil {
		return launch{}, err
	}
	if !hs.Config.Sandbox.Enabled || !h.Sandboxed || h.SandboxName != in.Sandbox || h.AgentID != hs.AgentID {
		return launch{}, contract.Fail(
			fmt.Sprintf("runtime session %s does not run in sandbox %q", hs.RuntimeSessionID, in.Sandbox), domain.ErrTypeValidation, nil)
	}
	if err := ProvisionWorkspace(ctx, r.Store, r.Layout, h, hs); err != nil {
		return launch{}, err
	}
	if err := r.templateRepositories(ctx, h, hs); err != nil {
		return launch{}, err
	}
	act, err := r.activate(ctx, h, hs, row.Provider)
	if err != nil {
		return launch{}, err
	}
	paths, err := workspace.ManagedPaths(r.Layout, h.ID)
	if err != nil {
		return launch{}, err
	}
	dir := paths.Session(hs.RuntimeSessionID)
	if src := hs.Config.Sandbox.WorkspaceSource; src == domain.WorkspaceDirectHost || src == domain.WorkspacePrivateHostClone {
		dir = hs.Config.Sandbox.HostPath
	}
	home, stateDir, err := providerStateEnv(paths, row)
	if err != nil {
		return launch{}, err
	}
	home = append(home, row.Env...)
	lookup := envLookup(env)
	file, explicit, err := sandbox.GuestEnv(hs.Config.EnvAllowlist, func(k string) (string, bool) {
		v := lookup(k)
		return v, v != ""
	}, home)
	if errors.Is(err, sandbox.ErrEnvRefused) {
		return launch{}, contract.Fail(err.Error(), domain.ErrTypeEnvRefused, err)
	}
	if err != nil {
		return launch{}, err
	}
	d, err := r.Sandbox.Driver(ctx)
	if err != nil {
		return launch{}, err
	}
	if err := r.allowToolEndpoint(ctx, d, h.SandboxName); err != nil {
		return launch{}, err
	}
	envDir := r.Layout.RuntimeEnvDir()
	if err := os.MkdirAll(envDir, 0o700); err != nil {
		return launch{}, fmt.Errorf("runtime env directory: %w", err)
	}
	ef, err := sandbox.WriteEnvFile(envDir, file)
	if err != nil {
		return launch{}, err
	}
	command, args := hs.Config.Command, hs.Config.Args
	if command == "" {
		command = row.Command
	}
	if len(args) == 0 {
		args = row.Args
	}
	argv, err := d.ExecArgs(h.SandboxName, dir, ef.Path(), explicit, append([]string{command}, args...))
	if err != nil {
		ef.Release()
		return launch{}, err
	}
	return launch{exe: argv[0], args: argv[1:], dir: dir, envFile: ef, env: sandbox.HostEnv(d.Env), guestEnv: append(file, explicit...),
		activation: act, stateDir: stateDir}, nil
}

// providerStateEnv points a provider's continuity state into the host's provider-state
// directory (a sandbox's mount, where checkpoints capture it): JAM_PROVIDER_STATE_DIR always
// names it, and each state variable of the catalog row its directory there (made now: not
// every provider creates a directory it is pointed at). It returns that directory too.
func providerStateEnv(paths workspace.Paths, row domain.TransportSpec) ([]string, string, error) {
	state, err := paths.ProviderState(row.Provider)
	if err != nil {
		return nil, "", err
	}
	env := []string{EnvProviderStateDir + "=" + state}
	for _, v := range row.State {
		dir := filepath.Join(state, v.Sub)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, "", fmt.Errorf("provider state directory %s: %w", dir, err)
		}
		env = append(env, v.Name+"="+dir)
	}
	return env, state, nil
}

// EnvFiles lists the env files not yet released (tests assert none outlives a spawn).
func EnvFiles(l domain.Layout) ([]string, error) {
	return filepath.Glob(filepath.Join(l.RuntimeEnvDir(), ".jam-env-*"))
}
