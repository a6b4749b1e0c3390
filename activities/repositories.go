package activities

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/repo"
	"github.com/jam-dev/jam/internal/sandbox"
	"github.com/jam-dev/jam/internal/workspace"
)

// RepoOpInput is one repository operation on a session workspace.
type RepoOpInput struct {
	Ref     contract.WorkspaceRef  `json:"ref"`
	Action  domain.WorkspaceAction `json:"action"`
	Request domain.RepoRequest     `json:"request"`
}

// RunRepoOp runs one repository operation in the session's workspace: sandboxed, as `sbx
// exec` of git or gh in the host's sandbox once its ownership is proven; host-native, git
// or gh on this node with a Jam-owned HOME. It is never retried (the workflow runs it once):
// a push or a pull request cut in the middle is reported failed, never replayed.
func (w *Workspaces) RunRepoOp(ctx context.Context, in RepoOpInput) (domain.RepoResult, error) {
	h, err := w.Store.GetRuntimeHost(ctx, in.Ref.Host)
	if err != nil {
		return domain.RepoResult{}, err
	}
	paths, err := workspace.ManagedPaths(w.Layout, h.ID)
	if err != nil {
		return domain.RepoResult{}, err
	}
	dir := paths.Session(in.Ref.Session)
	if err := liveBytes(dir, in.Ref.Workspace); err != nil {
		return domain.RepoResult{}, err
	}
	stop := heartbeat(ctx)
	defer stop()
	var runner repo.Runner
	if h.Sandboxed {
		if w.Sandbox == nil || h.SandboxName == "" {
			return domain.RepoResult{}, contract.Fail(fmt.Sprintf("runtime host %s has no sandbox", h.ID), domain.ErrTypeNoSandbox, nil)
		}
		m, err := w.Sandbox.manager(ctx)
		if err != nil {
			return domain.RepoResult{}, err
		}
		if err := m.Verify(ctx, OwnerOf(h), h.SandboxName); err != nil {
			return domain.RepoResult{}, classify(err)
		}
		runner = guestRunner{d: m.Driver, name: h.SandboxName}
	} else {
		runner = hostRunner{path: w.PATH, home: paths.Root}
	}
	out, err := repo.Do(ctx, runner, dir, in.Action, in.Request)
	return out, repoError(in.Action, err)
}

// repoError makes a failed call the operation's model- and operator-safe outcome: git's or
// gh's own bounded message, a refusal for a request that did not fit.
func repoError(action domain.WorkspaceAction, err error) error {
	var exit *repo.ExitError
	var verr *domain.ValidationError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &verr):
		return contract.Fail(verr.Error(), domain.ErrTypeValidation, err)
	case errors.As(err, &exit):
		return contract.Fail(fmt.Sprintf("%s failed: %s exited %d: %s", action, exit.Argv[0], exit.Code, exit.Stderr),
			domain.ErrTypeRepoCommandFailed, err)
	case errors.Is(err, repo.ErrTimeout):
		return contract.Fail(fmt.Sprintf("%s did not finish in time", action), domain.ErrTypeRepoCommandFailed, err)
	}
	return err
}

// guestRunner runs a call in the sandbox over `sbx exec`, the workspace mounted at the same
// path; the sandbox's own credentials (Docker service secrets) authenticate git and gh.
type guestRunner struct {
	d    *sandbox.Driver
	name string
}

func (g guestRunner) Run(ctx context.Context, c repo.Cmd) ([]byte, error) {
	argv, err := g.d.ExecArgs(g.name, c.Dir, "", repo.GitEnv, c.Argv)
	if err != nil {
		return nil, err
	}
	if c.Stdin != nil {
		argv = append([]string{argv[0], argv[1]}, append([]string{"-i"}, argv[2:]...)...)
	} else {
		argv = append([]string{argv[0], argv[1]}, argv[3:]...) // no stdin: drop ExecArgs' -i
	}
	out, err := repo.Exec(ctx, argv, "", g.d.Env, c.Stdin, c.Timeout)
	return out, innerArgv(err, c.Argv)
}

// hostRunner runs a call on this node for a host-native workspace: the worker's PATH, a
// Jam-owned HOME (never the operator's configuration or credentials), no other environment.
type hostRunner struct {
	path, home string
}

func (h hostRunner) Run(ctx context.Context, c repo.Cmd) ([]byte, error) {
	exe, err := lookOn(h.path, c.Argv[0])
	if err != nil {
		return nil, contract.Fail(fmt.Sprintf("%s is not installed on this node", c.Argv[0]), domain.ErrTypeRepoCommandFailed, err)
	}
	env := append([]string{"PATH=" + h.path, "HOME=" + h.home, "GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C"}, repo.GitEnv...)
	out, err := repo.Exec(ctx, append([]string{exe}, c.Argv[1:]...), c.Dir, env, c.Stdin, c.Timeout)
	return out, innerArgv(err, c.Argv)
}

// innerArgv names the git or gh call in an exit error rather than its wrapper.
func innerArgv(err error, argv []string) error {
	var exit *repo.ExitError
	if errors.As(err, &exit) {
		exit.Argv = argv
	}
	return err
}

// lookOn finds name on path (absolute entries only).
func lookOn(path, name string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		if p, err := exec.LookPath(filepath.Join(dir, name)); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", name, exec.ErrNotFound)
}
