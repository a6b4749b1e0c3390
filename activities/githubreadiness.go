package activities

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/repo"
	"github.com/jam-dev/jam/internal/workspace"
)

// GitHubReadiness checks, read-only, whether the workspace's guest can reach and
// authenticate to GitHub: whether Docker holds a global GitHub service secret (its
// inventory only, never the secret), git and gh versions, gh's auth status, then each
// repository with `gh api`, eight at a time, 4 s each, all within 12 s. The sandbox's
// ownership is proven before anything runs in it.
func (w *Workspaces) GitHubReadiness(ctx context.Context, in contract.GitHubReadinessInput) (contract.GitHubReadiness, error) {
	out := contract.GitHubReadiness{Repositories: []contract.GitHubRepoStatus{}}
	if err := domain.ValidateGitHubRepos(in.Repos); err != nil {
		return out, contract.Fail(err.Error(), domain.ErrTypeValidation, err)
	}
	h, err := w.Store.GetRuntimeHost(ctx, in.Ref.Host)
	if err != nil {
		return out, err
	}
	if !h.Sandboxed || h.SandboxName == "" || w.Sandbox == nil {
		out.Reason = "the workspace's runtime is not sandboxed: GitHub credentials are the sandbox's Docker service secret"
		return out, nil
	}
	m, err := w.Sandbox.manager(ctx)
	if err != nil {
		out.Reason = "no usable sbx on this node"
		return out, nil
	}
	if stored, err := m.Driver.HasGlobalServiceSecret(ctx, domain.GitHubServiceName); err == nil {
		out.CredentialStored = &stored
	}
	if err := m.Verify(ctx, OwnerOf(h), h.SandboxName); err != nil {
		return out, classify(err)
	}
	paths, err := workspace.ManagedPaths(w.Layout, h.ID)
	if err != nil {
		return out, err
	}
	dir := paths.Session(in.Ref.Session)
	if err := liveBytes(dir, in.Ref.Workspace); err != nil {
		return out, err
	}
	out.Available = true
	g := guestRunner{d: m.Driver, name: h.SandboxName}
	all, cancel := context.WithTimeout(ctx, domain.GitHubReadinessTimeout)
	defer cancel()
	run := func(argv ...string) ([]byte, error) {
		return g.Run(all, repo.Cmd{Dir: dir, Argv: argv, Timeout: domain.GitHubRepoCheckTimeout})
	}
	if b, err := run("git", "--version"); err == nil {
		out.Git = firstLine(b)
	}
	if b, err := run("gh", "--version"); err == nil {
		out.GH = firstLine(b)
	}
	_, err = run("gh", "auth", "status", "--hostname", domain.GitHubHost)
	var exit *repo.ExitError
	switch {
	case err == nil:
		out.Authenticated = true
	case errors.As(err, &exit):
		out.AuthDetail = domain.Truncate(firstLine([]byte(exit.Stderr)), 300)
	default:
		out.AuthDetail = "gh could not run in the guest"
	}
	out.Repositories = make([]contract.GitHubRepoStatus, len(in.Repos))
	sem := make(chan struct{}, domain.GitHubReadinessConcurrency)
	var wg sync.WaitGroup
	for i, r := range in.Repos {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out.Repositories[i] = repoStatus(r, func() error { _, err := run("gh", "api", "--method=GET", "--", "repos/"+r); return err })
		}()
	}
	wg.Wait()
	out.TimedOut = all.Err() != nil
	return out, nil
}

// ghHTTPStatus finds the HTTP status gh api reports on stderr ("gh: Not Found (HTTP 404)").
var ghHTTPStatus = regexp.MustCompile(`\(HTTP ([0-9]{3})\)`)

func repoStatus(r string, check func() error) contract.GitHubRepoStatus {
	err := check()
	st := contract.GitHubRepoStatus{Repo: r, Status: domain.GitHubRepoOK}
	var exit *repo.ExitError
	switch {
	case err == nil:
	case errors.Is(err, repo.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		st.Status = domain.GitHubRepoTimeout
	case errors.As(err, &exit):
		st.Status, st.Detail = domain.GitHubRepoError, domain.Truncate(firstLine([]byte(exit.Stderr)), 300)
		if m := ghHTTPStatus.FindStringSubmatch(exit.Stderr); m != nil {
			code, _ := strconv.Atoi(m[1])
			switch code {
			case 401:
				st.Status = domain.GitHubRepoUnauthorized
			case 403:
				st.Status = domain.GitHubRepoForbidden
			case 404:
				st.Status = domain.GitHubRepoNotFound
			}
		}
	default:
		st.Status, st.Detail = domain.GitHubRepoError, "gh could not run in the guest"
	}
	return st
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return domain.Truncate(s, 200)
}
