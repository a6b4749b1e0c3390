package workspace

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Inventory bounds: how deep and how widely a workspace is searched for repositories, and
// how long one git call may take.
const (
	inventoryMaxDepth   = 4
	inventoryMaxRepos   = 16
	inventoryMaxEntries = 100_000
	inventoryGitTimeout = 4 * time.Second
	inventoryMaxError   = 200
)

// RepoInventory is what removing a workspace would lose, repository by repository.
type RepoInventory struct {
	Repositories []RepoState `json:"repositories"`
	// Truncated: the search stopped at its bounds; repositories may be missing.
	Truncated bool `json:"truncated,omitempty"`
	// Unavailable says why repositories found could not be inspected at all (no git).
	Unavailable string `json:"unavailable,omitempty"`
}

// RepoState is one repository found in the workspace.
type RepoState struct {
	// Path is relative to the workspace ("." for the workspace itself).
	Path string `json:"path"`
	// Dirty: uncommitted changes or untracked files.
	Dirty bool `json:"dirty"`
	// Unpushed counts commits on local branches (and, when HEAD is detached, on HEAD) that no
	// remote-tracking branch holds.
	Unpushed int  `json:"unpushed"`
	Detached bool `json:"detached"`
	// Error: the repository could not be inspected (which is itself a blocker).
	Error string `json:"error,omitempty"`
}

// Blockers are the human-readable reasons removing the workspace would lose work: uncommitted
// or unpushed work, a repository that could not be inspected, a search that was cut short, or
// no git to inspect with. A workspace without repositories has none.
func (r RepoInventory) Blockers() []string {
	var out []string
	if r.Unavailable != "" && len(r.Repositories) > 0 {
		out = append(out, fmt.Sprintf("%d repositories could not be inspected: %s", len(r.Repositories), clip(r.Unavailable)))
	}
	for i, s := range r.Repositories {
		if i >= inventoryMaxRepos {
			break
		}
		switch {
		case s.Error != "":
			out = append(out, fmt.Sprintf("repository %s could not be inspected: %s", clip(s.Path), clip(s.Error)))
			continue
		case r.Unavailable != "":
			continue
		}
		if s.Dirty {
			out = append(out, fmt.Sprintf("repository %s has uncommitted changes", clip(s.Path)))
		}
		if s.Unpushed > 0 {
			noun := "commits"
			if s.Unpushed == 1 {
				noun = "commit"
			}
			out = append(out, fmt.Sprintf("repository %s has %d unpushed %s", clip(s.Path), s.Unpushed, noun))
		}
	}
	if r.Truncated {
		out = append(out, fmt.Sprintf("the workspace holds more repositories than are inspected (at most %d, %d levels deep)",
			inventoryMaxRepos, inventoryMaxDepth))
	}
	return out
}

func clip(s string) string {
	if len(s) <= inventoryMaxError {
		return s
	}
	return s[:inventoryMaxError] + "…"
}

// InspectRepositories finds the git repositories of a workspace (directories holding .git,
// at most 4 levels deep, at most 16, never inside .git or node_modules) and asks git whether
// each has uncommitted or unpushed work.
//
// The workspace is written by an untrusted guest, and a repository's own configuration can
// make git run commands (core.fsmonitor, filter drivers, hooks, include.path). So git never
// sees it: each repository is inspected through a private temporary git directory holding a
// copy of HEAD and the index, links to the objects and refs, and a minimal configuration
// written here; git runs with a fixed argv, an empty environment but for PATH, no system or
// global configuration, hooks off and fsmonitor off, each call bounded at 4 s. Repositories
// that cannot be inspected that way (a .git file, a newer format, unknown extensions) are
// reported with an Error. path is the worker's PATH (injected, not read here): git is found
// on it and runs with it.
func InspectRepositories(ctx context.Context, dir, path string) (RepoInventory, error) {
	var inv RepoInventory
	repos, truncated, err := findRepositories(dir)
	if err != nil {
		return inv, err
	}
	inv.Truncated = truncated
	if len(repos) == 0 {
		return inv, nil
	}
	git, lerr := lookGit(path)
	if lerr != nil {
		inv.Unavailable = "git is not available on this node"
	}
	for _, r := range repos {
		if err := ctx.Err(); err != nil {
			return inv, err
		}
		state := RepoState{Path: r.rel}
		switch {
		case r.err != "":
			state.Error = r.err
		case inv.Unavailable == "":
			if err := inspectRepository(ctx, git, path, filepath.Join(dir, filepath.FromSlash(r.rel)), &state); err != nil {
				if ctx.Err() != nil {
					return inv, ctx.Err()
				}
				state.Error = clip(err.Error())
			}
		}
		inv.Repositories = append(inv.Repositories, state)
	}
	return inv, nil
}

// lookGit finds git on path, as exec.LookPath would on the process's PATH; relative entries
// are skipped because they would resolve against the worker's working directory.
func lookGit(path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		if p, err := exec.LookPath(filepath.Join(dir, "git")); err == nil {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

type foundRepo struct {
	rel string
	err string
}

// findRepositories searches breadth first, without following links.
func findRepositories(root string) ([]foundRepo, bool, error) {
	if st, err := os.Lstat(root); errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, err
	} else if !st.IsDir() {
		return nil, false, fmt.Errorf("workspace %s is not a directory", root)
	}
	type node struct {
		rel   string
		depth int
	}
	var (
		repos     []foundRepo
		truncated bool
		visited   int
		queue     = []node{{rel: ".", depth: 0}}
	)
	for len(queue) > 0 && !truncated {
		n := queue[0]
		queue = queue[1:]
		abs := filepath.Join(root, filepath.FromSlash(n.rel))
		names, more, err := listDir(abs, inventoryMaxEntries-visited)
		if err != nil {
			if n.rel == "." {
				return nil, false, err
			}
			continue // unreadable or replaced since listed: nothing the guest can hide there from git either
		}
		visited += len(names)
		if more {
			truncated = true
		}
		slices.Sort(names)
		for _, name := range names {
			child := name
			if n.rel != "." {
				child = n.rel + "/" + name
			}
			st, err := os.Lstat(filepath.Join(abs, name))
			if err != nil {
				continue
			}
			if name == ".git" {
				r := foundRepo{rel: n.rel}
				if !st.IsDir() {
					r.err = "cannot inspect: .git is not a directory (a worktree or submodule)"
				}
				if len(repos) == inventoryMaxRepos {
					truncated = true
					break
				}
				repos = append(repos, r)
				continue
			}
			if st.IsDir() && name != "node_modules" && n.depth+1 <= inventoryMaxDepth {
				queue = append(queue, node{rel: child, depth: n.depth + 1})
			}
		}
	}
	slices.SortFunc(repos, func(a, b foundRepo) int { return strings.Compare(a.rel, b.rel) })
	return repos, truncated, nil
}

// listDir lists at most max names of a directory (not following a final link); more reports
// that it holds more.
func listDir(dir string, max int) ([]string, bool, error) {
	if max <= 0 {
		return nil, true, nil
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	d := os.NewFile(uintptr(fd), dir)
	defer d.Close()
	var names []string
	for len(names) <= max {
		batch, err := d.Readdirnames(256)
		names = append(names, batch...)
		if err == io.EOF {
			return names, false, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
	return names[:max], true, nil
}

// inspectRepository fills state from git run against a private copy of the repository's
// git directory.
func inspectRepository(ctx context.Context, git, path, repo string, state *RepoState) error {
	gitdir := filepath.Join(repo, ".git")
	cfg, err := readSmall(filepath.Join(gitdir, "config"), 1<<20, true)
	if err != nil {
		return fmt.Errorf("cannot inspect: .git/config: %v", err)
	}
	format, err := parseRepoFormat(cfg)
	if err != nil {
		return fmt.Errorf("cannot inspect: %v", err)
	}
	head, err := readSmall(filepath.Join(gitdir, "HEAD"), 4096, false)
	if err != nil {
		return fmt.Errorf("cannot inspect: .git/HEAD: %v", err)
	}
	switch h := strings.TrimSpace(string(head)); {
	case strings.HasPrefix(h, "ref: refs/"):
	case isHex(h) && (len(h) == 40 || len(h) == 64):
		state.Detached = true
	default:
		return errors.New("cannot inspect: .git/HEAD is not a ref or a commit")
	}

	tmp, err := os.MkdirTemp("", "jam-git-inventory-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	home, gd := filepath.Join(tmp, "home"), filepath.Join(tmp, "git")
	for _, d := range []string{home, gd, filepath.Join(gd, "info")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return err
		}
	}
	config := "[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
	if format == "sha256" {
		config = "[core]\n\trepositoryformatversion = 1\n\tbare = false\n[extensions]\n\tobjectformat = sha256\n"
	}
	if err := writeNew(filepath.Join(gd, "config"), []byte(config)); err != nil {
		return err
	}
	if err := writeNew(filepath.Join(gd, "HEAD"), head); err != nil {
		return err
	}
	// Copies, never links: git may rewrite what it holds, and nothing may reach the guest's.
	for _, f := range []struct {
		name string
		max  int64
	}{{"index", 1 << 30}, {"shallow", 64 << 20}, {"info/exclude", 1 << 20}} {
		if err := copySmall(filepath.Join(gitdir, filepath.FromSlash(f.name)), filepath.Join(gd, filepath.FromSlash(f.name)), f.max); err != nil {
			return fmt.Errorf("cannot inspect: .git/%s: %v", f.name, err)
		}
	}
	for _, name := range []string{"objects", "refs", "packed-refs"} {
		src := filepath.Join(gitdir, name)
		if _, err := os.Lstat(src); err != nil {
			if errors.Is(err, os.ErrNotExist) && name == "packed-refs" {
				continue
			}
			return fmt.Errorf("cannot inspect: .git/%s: %v", name, err)
		}
		if err := os.Symlink(src, filepath.Join(gd, name)); err != nil {
			return err
		}
	}

	run := func(args ...string) (string, error) {
		return runGit(ctx, git, path, tmp, gd, repo, args...)
	}
	out, err := run("status", "--porcelain=v1", "--untracked-files=normal", "--ignore-submodules=all")
	if err != nil {
		return err
	}
	state.Dirty = strings.TrimSpace(out) != ""
	n, err := countGit(run("rev-list", "--count", "--branches", "--not", "--remotes"))
	if err != nil {
		return err
	}
	state.Unpushed = n
	if state.Detached {
		n, err := countGit(run("rev-list", "--count", "HEAD", "--not", "--branches", "--remotes"))
		if err != nil {
			return err
		}
		state.Unpushed += n
	}
	return nil
}

// gitOutputMax bounds what is read of one git call's output (only emptiness and a count
// are used).
const gitOutputMax = 64 << 10

// runGit runs one git command (fixed argv, no shell) against the private git directory.
func runGit(ctx context.Context, git, path, home, gitDir, workTree string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, inventoryGitTimeout)
	defer cancel()
	argv := append([]string{"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"}, args...)
	cmd := exec.CommandContext(ctx, git, argv...)
	cmd.Dir = workTree
	cmd.Env = []string{
		"PATH=" + path,
		"HOME=" + home,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_DIR=" + gitDir,
		"GIT_WORK_TREE=" + workTree,
		"GIT_OPTIONAL_LOCKS=0",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ATTR_NOSYSTEM=1",
		"LC_ALL=C",
	}
	var out capped
	cmd.Stdout = &out
	cmd.Stderr = io.Discard // guest-controlled; never echoed
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	switch {
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return "", fmt.Errorf("cannot inspect: git %s timed out after %s", args[0], inventoryGitTimeout)
	case err != nil:
		return "", fmt.Errorf("cannot inspect: git %s failed (%v)", args[0], err)
	}
	return out.String(), nil
}

func countGit(out string, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	n, perr := strconv.Atoi(strings.TrimSpace(out))
	if perr != nil || n < 0 {
		return 0, errors.New("cannot inspect: git rev-list printed no count")
	}
	return n, nil
}

// capped keeps the first gitOutputMax bytes written to it and discards the rest.
type capped struct{ bytes.Buffer }

func (c *capped) Write(p []byte) (int, error) {
	if room := gitOutputMax - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// parseRepoFormat reads the only keys of a repository's config this code acts on:
// core.repositoryformatversion (0 or 1) and extensions.* (only objectformat, sha1 or sha256,
// is understood). Anything else git might need to understand the repository is refused.
// Nothing else in the config is interpreted, and includes are never followed.
func parseRepoFormat(cfg []byte) (string, error) {
	var (
		section  string
		version  = 0
		format   = "sha1"
		sc       = bufio.NewScanner(bytes.NewReader(cfg))
		extNames []string
	)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			end := strings.IndexByte(line, ']')
			if end < 0 {
				return "", errors.New(".git/config has a malformed section")
			}
			name := strings.TrimSpace(line[1:end])
			if i := strings.IndexAny(name, " \t\""); i >= 0 {
				name = name[:i] // a subsection
			}
			section = strings.ToLower(name)
			line = strings.TrimSpace(line[end+1:])
		}
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if section != "core" && section != "extensions" {
			continue
		}
		key, value, _ := strings.Cut(line, "=")
		key = strings.ToLower(strings.TrimSpace(key))
		value = configValue(value)
		switch {
		case section == "core" && key == "repositoryformatversion":
			v, err := strconv.Atoi(value)
			if err != nil || v < 0 || v > 1 {
				return "", fmt.Errorf("repository format version %q is not supported", value)
			}
			version = v
		case section == "extensions":
			extNames = append(extNames, key)
			if key == "objectformat" {
				switch strings.ToLower(value) {
				case "sha1", "sha256":
					format = strings.ToLower(value)
				default:
					return "", fmt.Errorf("object format %q is not supported", value)
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf(".git/config: %v", err)
	}
	for _, k := range extNames {
		if k != "objectformat" {
			return "", fmt.Errorf("repository extension %q is not supported", k)
		}
	}
	if version == 0 {
		format = "sha1" // extensions mean nothing to a version 0 repository
	}
	return format, nil
}

// configValue is a config value without its trailing comment and surrounding quotes.
func configValue(v string) string {
	if i := strings.IndexAny(v, "#;"); i >= 0 {
		v = v[:i]
	}
	return strings.Trim(strings.TrimSpace(v), "\"")
}

func isHex(s string) bool {
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return s != ""
}

// readSmall reads a regular file (not following a link) of at most max bytes; an absent file
// is empty when optional.
func readSmall(path string, max int64, optional bool) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) && optional {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	return b, nil
}

// copySmall copies an optional regular file of at most max bytes into a new private file.
func copySmall(src, dst string, max int64) error {
	b, err := readSmall(src, max, true)
	if err != nil || b == nil {
		return err
	}
	return writeNew(dst, b)
}
