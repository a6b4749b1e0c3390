package repo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/jam-dev/jam/internal/domain"
)

// GitEnv is the environment every git and gh call gets (on top of the runner's own): never
// prompt — a call waiting for a password would only run into its timeout.
var GitEnv = []string{"GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS=", "GH_PROMPT_DISABLED=1", "GH_NO_UPDATE_NOTIFIER=1",
	"GIT_SSH_COMMAND=ssh -o BatchMode=yes"}

// gitSafety is passed to every git call: no remote helper that runs commands, no local
// repositories as remotes.
var gitSafety = []string{"-c", "protocol.ext.allow=never", "-c", "protocol.file.allow=never"}

// ghChecksPending is gh's exit code of `pr checks` when some checks have not finished.
const ghChecksPending = 8

// Do runs one repository action in the session workspace ws (an absolute path, the same on
// the host and in a guest) with the request already validated by
// domain.ValidateRepoRequest.
func Do(ctx context.Context, r Runner, ws string, action domain.WorkspaceAction, req domain.RepoRequest) (domain.RepoResult, error) {
	if err := domain.ValidateRepoRequest(action, &req); err != nil {
		return domain.RepoResult{}, err
	}
	o := ops{r: r, ws: ws, dir: filepath.Join(ws, req.Dir), req: req}
	out := domain.RepoResult{Dir: req.Dir}
	var err error
	switch action {
	case domain.WorkspaceActionClone:
		err = o.clone(ctx, &out)
	case domain.WorkspaceActionBranch:
		err = o.branch(ctx, &out)
	case domain.WorkspaceActionCommit:
		err = o.commit(ctx, &out)
	case domain.WorkspaceActionPush:
		err = o.push(ctx, &out)
	case domain.WorkspaceActionPullRequest:
		err = o.pullRequest(ctx, &out)
	case domain.WorkspaceActionChecks:
		err = o.checks(ctx, &out)
	default:
		err = &domain.ValidationError{Field: "action", Detail: fmt.Sprintf("%s is not a repository operation", action)}
	}
	return out, err
}

type ops struct {
	r       Runner
	ws, dir string
	req     domain.RepoRequest
}

func (o ops) run(ctx context.Context, dir string, stdin []byte, timeout time.Duration, argv ...string) ([]byte, error) {
	if argv[0] == "git" {
		argv = append(append([]string{"git"}, gitSafety...), argv[1:]...)
	}
	return o.r.Run(ctx, Cmd{Dir: dir, Argv: argv, Stdin: stdin, Timeout: timeout})
}

func (o ops) head(ctx context.Context, out *domain.RepoResult) error {
	b, err := o.run(ctx, o.dir, nil, ShortTimeout, "git", "rev-parse", "--verify", "--quiet", "HEAD")
	var exit *ExitError
	if errors.As(err, &exit) {
		return nil // an empty repository has no HEAD commit yet
	}
	if err != nil {
		return err
	}
	out.Commit = strings.TrimSpace(string(b))
	return nil
}

// branchOrCurrent is the request's branch, or the one HEAD is on.
func (o ops) branchOrCurrent(ctx context.Context) (string, error) {
	if o.req.Branch != "" {
		return o.req.Branch, nil
	}
	return o.currentBranch(ctx)
}

// currentBranch is the branch HEAD is on; a detached HEAD is refused.
func (o ops) currentBranch(ctx context.Context) (string, error) {
	b, err := o.run(ctx, o.dir, nil, ShortTimeout, "git", "symbolic-ref", "--quiet", "--short", "HEAD")
	var exit *ExitError
	if errors.As(err, &exit) {
		return "", &domain.ValidationError{Field: "branch", Detail: "HEAD is detached: name the branch"}
	}
	if err != nil {
		return "", err
	}
	name := strings.TrimSpace(string(b))
	if err := domain.ValidateBranchName("branch", name); err != nil {
		return "", err
	}
	return name, nil
}

func (o ops) clone(ctx context.Context, out *domain.RepoResult) error {
	argv := []string{"git", "clone", "--no-local"}
	if o.req.Branch != "" {
		argv = append(argv, "--branch="+o.req.Branch)
	}
	argv = append(argv, "--", o.req.URL, o.req.Dir)
	if _, err := o.run(ctx, o.ws, nil, CloneTimeout, argv...); err != nil {
		return err
	}
	if b, err := o.currentBranch(ctx); err == nil {
		out.Branch = b
	}
	return o.head(ctx, out)
}

func (o ops) branch(ctx context.Context, out *domain.RepoResult) error {
	if _, err := o.run(ctx, o.dir, nil, ShortTimeout, "git", "switch", "--create="+o.req.Branch); err != nil {
		return err
	}
	out.Branch = o.req.Branch
	return o.head(ctx, out)
}

func (o ops) commit(ctx context.Context, out *domain.RepoResult) error {
	if _, err := o.run(ctx, o.dir, nil, ShortTimeout, "git", "add", "--all"); err != nil {
		return err
	}
	// The identity goes as config values, the message on stdin: neither is ever parsed as an
	// option.
	argv := []string{"git", "-c", "user.name=" + o.req.AuthorName, "-c", "user.email=" + o.req.AuthorEmail,
		"commit", "--no-verify", "--file=-"}
	if _, err := o.run(ctx, o.dir, []byte(o.req.Message), ShortTimeout, argv...); err != nil {
		return err
	}
	if b, err := o.currentBranch(ctx); err == nil {
		out.Branch = b
	}
	return o.head(ctx, out)
}

func (o ops) push(ctx context.Context, out *domain.RepoResult) error {
	branch, err := o.branchOrCurrent(ctx)
	if err != nil {
		return err
	}
	ref := "refs/heads/" + branch
	if _, err := o.run(ctx, o.dir, nil, PushTimeout, "git", "push", "--porcelain", "--set-upstream", "--", o.req.Remote, ref+":"+ref); err != nil {
		return err
	}
	out.Branch = branch
	return o.head(ctx, out)
}

// pullRequest creates the branch's pull request, or updates its title and body when one is
// open already.
func (o ops) pullRequest(ctx context.Context, out *domain.RepoResult) error {
	branch, err := o.branchOrCurrent(ctx)
	if err != nil {
		return err
	}
	out.Branch = branch
	body := []byte(o.req.Body)
	view, err := o.run(ctx, o.dir, nil, ShortTimeout, "gh", "pr", "view", "--json=url,state", "--", branch)
	var exit *ExitError
	if err != nil && !errors.As(err, &exit) {
		return err
	}
	var pr struct{ URL, State string }
	if err == nil && json.Unmarshal(lastJSON(view), &pr) == nil && pr.URL != "" && pr.State == "OPEN" {
		if _, err := o.run(ctx, o.dir, body, ShortTimeout, "gh", "pr", "edit", "--title="+o.req.Title, "--body-file=-", "--", branch); err != nil {
			return err
		}
		out.PullRequestURL = pr.URL
		return nil
	}
	argv := []string{"gh", "pr", "create", "--head=" + branch, "--title=" + o.req.Title, "--body-file=-"}
	if o.req.Base != "" {
		argv = append(argv, "--base="+o.req.Base)
	}
	b, err := o.run(ctx, o.dir, body, ShortTimeout, argv...)
	if err != nil {
		return err
	}
	out.PullRequestURL = lastURL(b)
	if out.PullRequestURL == "" {
		return fmt.Errorf("gh pr create printed no pull request URL")
	}
	return nil
}

func (o ops) checks(ctx context.Context, out *domain.RepoResult) error {
	branch, err := o.branchOrCurrent(ctx)
	if err != nil {
		return err
	}
	out.Branch = branch
	b, err := o.run(ctx, o.dir, nil, ShortTimeout, "gh", "pr", "checks", "--json=name,state,bucket,link", "--", branch)
	var exit *ExitError
	if errors.As(err, &exit) && exit.Code == ghChecksPending {
		b, err = exit.Stdout, nil
	}
	if err != nil {
		return err
	}
	checks := []domain.RepoCheck{}
	if err := json.Unmarshal(lastJSON(b), &checks); err != nil {
		return fmt.Errorf("read gh pr checks output: %w", err)
	}
	out.Checks = checks
	return nil
}

// lastJSON is the last line of out that starts a JSON value (notices may precede it).
func lastJSON(out []byte) []byte {
	trimmed := bytes.TrimSpace(out)
	if len(trimmed) > 0 && (trimmed[0] == '[' || trimmed[0] == '{') {
		return trimmed
	}
	lines := bytes.Split(trimmed, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		if l := bytes.TrimSpace(lines[i]); len(l) > 0 && (l[0] == '{' || l[0] == '[') {
			return l
		}
	}
	return nil
}

// lastURL is the last https URL gh printed.
func lastURL(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); strings.HasPrefix(l, "https://") && !strings.ContainsAny(l, " \t") {
			return domain.Truncate(l, 2048)
		}
	}
	return ""
}
