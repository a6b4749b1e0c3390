package domain

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// Repository operation limits.
const (
	MaxRepoURL           = 2048
	MaxCommitMessage     = 64 << 10
	MaxPullRequestTitle  = 256
	MaxPullRequestBody   = 64 << 10
	MaxRefLen            = 255
	MaxRepoDirLen        = 100
	MaxTemplateRepos     = 16
	DefaultRemote        = "origin"
	repoAuthorMailDomain = "agents.jam.invalid"
)

// RepoRequest is a repository operation's immutable request, validated and canonicalized
// before anything is recorded or run. Each action reads only its own fields.
type RepoRequest struct {
	// URL is the clone source (clone only).
	URL string `json:"url,omitempty"`
	// Dir is the repository's directory: one path element under the session workspace (the
	// clone destination; the repository every other action acts in).
	Dir string `json:"dir"`
	// Branch is the branch to create (branch), push (push; "" is the current one), or the
	// pull request's head (pull_request, checks; "" is the current one).
	Branch string `json:"branch,omitempty"`
	// Base is a pull request's base branch ("" lets gh pick the default branch).
	Base    string `json:"base,omitempty"`
	Remote  string `json:"remote,omitempty"`
	Message string `json:"message,omitempty"`
	Title   string `json:"title,omitempty"`
	Body    string `json:"body,omitempty"`
	// Author is who a commit is by (the agent the workspace belongs to); set by Jam.
	AuthorName  string `json:"author_name,omitempty"`
	AuthorEmail string `json:"author_email,omitempty"`
}

// RepoResult is what a finished repository operation produced.
type RepoResult struct {
	Dir    string `json:"dir"`
	Branch string `json:"branch,omitempty"`
	// Commit is HEAD after the operation (clone, branch, commit, push).
	Commit         string      `json:"commit,omitempty"`
	PullRequestURL string      `json:"pull_request_url,omitempty"`
	Checks         []RepoCheck `json:"checks,omitempty"`
}

// RepoCheck is one check of a pull request, as gh reports it.
type RepoCheck struct {
	Name  string `json:"name"`
	State string `json:"state"`
	// Bucket is gh's classification: pass, fail, pending, skipping or cancel.
	Bucket string `json:"bucket,omitempty"`
	Link   string `json:"link,omitempty"`
}

// TemplateRepository is a repository a template's rooms start with: cloned into each new
// session workspace before the room's first turn.
type TemplateRepository struct {
	URL string `json:"url"`
	Dir string `json:"dir,omitempty"`
}

// IsRepoAction reports whether a workspace action is a repository operation.
func (a WorkspaceAction) IsRepoAction() bool {
	switch a {
	case WorkspaceActionClone, WorkspaceActionBranch, WorkspaceActionCommit, WorkspaceActionPush,
		WorkspaceActionPullRequest, WorkspaceActionChecks:
		return true
	}
	return false
}

var (
	repoDirPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]*$`)
	remotePattern  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$`)
	// scp-like `user@host:path` (no scheme): the only form without "://".
	scpURLPattern = regexp.MustCompile(`^([A-Za-z0-9_][A-Za-z0-9._-]{0,63})@([A-Za-z0-9][A-Za-z0-9.-]{0,252}):([A-Za-z0-9._~/-]+)$`)
	hostPattern   = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]{0,252})$|^\[[0-9a-fA-F:]+\]$`)
)

// ValidateRepoDir checks a repository directory: one path element, nothing git or a shell
// could read as an option or a parent.
func ValidateRepoDir(field, dir string) error {
	if len(dir) > MaxRepoDirLen || !repoDirPattern.MatchString(dir) || strings.HasSuffix(dir, ".lock") {
		return &ValidationError{Field: field, Detail: fmt.Sprintf(
			"must be one directory name of at most %d letters, digits, '.', '_' or '-', not starting with '.' or '-'", MaxRepoDirLen)}
	}
	return nil
}

// ValidateCloneURL accepts only https://, ssh://, git:// and scp-like user@host:path
// sources: never ext:: or another remote helper, file:// or a local path, credentials in
// the URL, or anything starting with '-'.
func ValidateCloneURL(raw string) error {
	bad := func(detail string) error { return &ValidationError{Field: "url", Detail: detail} }
	switch {
	case raw == "":
		return bad("required")
	case len(raw) > MaxRepoURL:
		return bad(fmt.Sprintf("at most %d characters", MaxRepoURL))
	case strings.HasPrefix(raw, "-"):
		return bad("must not start with '-'")
	case strings.ContainsFunc(raw, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '\\' }):
		return bad("must not contain spaces, control characters or backslashes")
	case strings.Contains(raw, "::"):
		return bad("remote helpers (transport::address) are not allowed")
	}
	if m := scpURLPattern.FindStringSubmatch(raw); m != nil {
		if strings.Contains(m[3], "..") || strings.HasPrefix(m[3], "-") {
			return bad("the path must not contain '..' or start with '-'")
		}
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || !strings.Contains(raw, "://") {
		return bad("want https://host/path, ssh://[user@]host/path, git://host/path or user@host:path")
	}
	switch u.Scheme {
	case "https", "git":
		if u.User != nil {
			return bad("credentials do not belong in the URL: the sandbox's GitHub service secret authenticates")
		}
	case "ssh":
		if _, has := u.User.Password(); has {
			return bad("a password does not belong in the URL")
		}
	default:
		return bad(fmt.Sprintf("scheme %q is not allowed: use https, ssh or git", u.Scheme))
	}
	if !hostPattern.MatchString(u.Hostname()) {
		return bad("want a host name")
	}
	if u.Path == "" || u.Path == "/" || strings.Contains(u.Path, "..") || u.RawQuery != "" || u.Fragment != "" {
		return bad("want a repository path, without '..', a query or a fragment")
	}
	return nil
}

// DefaultRepoDir is the directory a clone of raw goes to when none is named: the last path
// element without ".git" ("" when that is not a valid directory).
func DefaultRepoDir(raw string) string {
	s := strings.TrimRight(raw, "/")
	if i := strings.LastIndexAny(s, "/:"); i >= 0 {
		s = s[i+1:]
	}
	s = strings.TrimSuffix(s, ".git")
	if ValidateRepoDir("dir", s) != nil {
		return ""
	}
	return s
}

// ValidateBranchName applies git's own ref rules (git check-ref-format --branch) and refuses
// what an argv could read as an option.
func ValidateBranchName(field, name string) error {
	bad := func(detail string) error {
		return &ValidationError{Field: field, Detail: fmt.Sprintf("%q is not a valid branch name: %s", Truncate(name, 80), detail)}
	}
	switch {
	case name == "":
		return bad("empty")
	case len(name) > MaxRefLen:
		return bad(fmt.Sprintf("longer than %d bytes", MaxRefLen))
	case !utf8.ValidString(name):
		return bad("not UTF-8")
	case strings.HasPrefix(name, "-"):
		return bad("starts with '-'")
	case name == "@" || name == "HEAD":
		return bad("reserved")
	case strings.Contains(name, ".."):
		return bad("contains '..'")
	case strings.Contains(name, "@{"):
		return bad("contains '@{'")
	case strings.Contains(name, "//") || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/"):
		return bad("empty path component")
	case strings.HasSuffix(name, "."):
		return bad("ends with '.'")
	case strings.ContainsFunc(name, func(r rune) bool {
		return r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r)
	}):
		return bad("contains a space, control character or one of ~^:?*[\\")
	}
	for _, c := range strings.Split(name, "/") {
		if strings.HasPrefix(c, ".") || strings.HasSuffix(c, ".lock") {
			return bad("a component starts with '.' or ends with '.lock'")
		}
	}
	return nil
}

// ValidateRemoteName checks a git remote name.
func ValidateRemoteName(name string) error {
	if !remotePattern.MatchString(name) {
		return &ValidationError{Field: "remote", Detail: "want a remote name of letters, digits, '.', '_' or '-'"}
	}
	return nil
}

// ValidateRepoRequest checks the request of a repository action and fills its defaults
// (the clone directory from the URL, the remote "origin").
func ValidateRepoRequest(action WorkspaceAction, r *RepoRequest) error {
	var v Validations
	text := func(field, s string, max int, required bool) {
		switch {
		case required && strings.TrimSpace(s) == "":
			v.Add(field, "required")
		case len(s) > max:
			v.Add(field, fmt.Sprintf("at most %d bytes", max))
		case !utf8.ValidString(s) || strings.ContainsRune(s, 0):
			v.Add(field, "must be UTF-8 text without NUL")
		}
	}
	branch := func(required bool) {
		if r.Branch != "" || required {
			if err := ValidateBranchName("branch", r.Branch); err != nil {
				v.AddErr("branch", err)
			}
		}
	}
	if action == WorkspaceActionClone {
		if err := ValidateCloneURL(r.URL); err != nil {
			v.AddErr("url", err)
		} else if r.Dir == "" {
			if r.Dir = DefaultRepoDir(r.URL); r.Dir == "" {
				v.Add("dir", "name the directory: none follows from the URL")
			}
		}
	} else if r.URL != "" {
		v.Add("url", "only a clone takes a URL")
	}
	if r.Dir != "" || action != WorkspaceActionClone {
		if err := ValidateRepoDir("dir", r.Dir); err != nil {
			v.AddErr("dir", err)
		}
	}
	switch action {
	case WorkspaceActionClone:
		branch(false)
	case WorkspaceActionBranch:
		branch(true)
	case WorkspaceActionCommit:
		text("message", r.Message, MaxCommitMessage, true)
	case WorkspaceActionPush:
		branch(false)
		if r.Remote == "" {
			r.Remote = DefaultRemote
		}
		if err := ValidateRemoteName(r.Remote); err != nil {
			v.AddErr("remote", err)
		}
	case WorkspaceActionPullRequest:
		branch(false)
		if r.Base != "" {
			if err := ValidateBranchName("base", r.Base); err != nil {
				v.AddErr("base", err)
			}
		}
		text("title", r.Title, MaxPullRequestTitle, true)
		text("body", r.Body, MaxPullRequestBody, false)
	case WorkspaceActionChecks:
		branch(false)
	default:
		v.Add("action", fmt.Sprintf("%s is not a repository operation", action))
	}
	return v.Err()
}

// RepoAuthor is the commit identity of an agent: its name, and an address under a reserved
// domain that names the agent without pretending to be anyone's mailbox.
func RepoAuthor(a Agent) (name, email string) {
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '<' || r == '>' {
			return -1
		}
		return r
	}, a.Name)
	if strings.TrimSpace(name) == "" {
		name = "agent " + a.ID.String()
	}
	return Truncate(name, 120), a.ID.String() + "@" + repoAuthorMailDomain
}

// ValidateTemplateRepositories checks a template's repositories.
func ValidateTemplateRepositories(repos []TemplateRepository, v *Validations) {
	if len(repos) > MaxTemplateRepos {
		v.Add("repositories", fmt.Sprintf("at most %d", MaxTemplateRepos))
		return
	}
	seen := map[string]bool{}
	for i, r := range repos {
		req := RepoRequest{URL: r.URL, Dir: r.Dir}
		if err := ValidateRepoRequest(WorkspaceActionClone, &req); err != nil {
			v.AddErr(fmt.Sprintf("repositories[%d]", i), err)
			continue
		}
		if seen[req.Dir] {
			v.Add(fmt.Sprintf("repositories[%d].dir", i), fmt.Sprintf("%q is cloned twice", req.Dir))
		}
		seen[req.Dir] = true
	}
}

// GitHub readiness limits (the reference's): at most 16 repositories, each checked within
// 4 s, eight at a time, the whole check within 12 s.
const (
	MaxGitHubReadinessRepos    = 16
	GitHubRepoCheckTimeout     = 4 * time.Second
	GitHubReadinessTimeout     = 12 * time.Second
	GitHubReadinessConcurrency = 8
	GitHubHost                 = "github.com"
	GitHubServiceName          = "github"
)

// GitHubRepoState is one repository's readiness.
type GitHubRepoState string

const (
	GitHubRepoOK           GitHubRepoState = "ok"
	GitHubRepoNotFound     GitHubRepoState = "not_found"
	GitHubRepoUnauthorized GitHubRepoState = "unauthorized"
	GitHubRepoForbidden    GitHubRepoState = "forbidden"
	GitHubRepoTimeout      GitHubRepoState = "timeout"
	GitHubRepoError        GitHubRepoState = "error"
)

var GitHubRepoStates = NewEnum("github_repo_state", GitHubRepoOK, GitHubRepoNotFound, GitHubRepoUnauthorized,
	GitHubRepoForbidden, GitHubRepoTimeout, GitHubRepoError)

var githubRepoPattern = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9_.-]{1,100}$`)

// ValidateGitHubRepos checks a readiness request's owner/name list.
func ValidateGitHubRepos(repos []string) error {
	var v Validations
	if len(repos) > MaxGitHubReadinessRepos {
		v.Add("repo", fmt.Sprintf("at most %d repositories", MaxGitHubReadinessRepos))
	}
	for _, r := range repos {
		if !githubRepoPattern.MatchString(r) || strings.Contains(r, "..") {
			v.Add("repo", fmt.Sprintf("%q is not OWNER/NAME", Truncate(r, 80)))
		}
	}
	return v.Err()
}
