package workspace_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jam-dev/jam/internal/workspace"
)

// git runs the real git for a test with an isolated configuration.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	argv := append([]string{"-c", "user.name=Test", "-c", "user.email=test@example.com", "-c", "init.defaultBranch=main",
		"-c", "protocol.file.allow=always"}, args...)
	cmd := exec.Command("git", argv...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func requireGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
}

// cleanRepo makes a repository at ws/rel with one commit pushed to a local bare remote.
func cleanRepo(t *testing.T, ws, rel string) string {
	t.Helper()
	repo := filepath.Join(ws, filepath.FromSlash(rel))
	must(t, os.MkdirAll(repo, 0o755))
	git(t, repo, "init", "-q")
	must(t, os.WriteFile(filepath.Join(repo, "main.go"), []byte("package main\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(repo, ".gitignore"), []byte("build/\n"), 0o644))
	git(t, repo, "add", ".")
	git(t, repo, "commit", "-q", "-m", "first")
	remote := filepath.Join(t.TempDir(), "remote.git")
	git(t, repo, "init", "-q", "--bare", remote)
	git(t, repo, "remote", "add", "origin", remote)
	git(t, repo, "push", "-q", "-u", "origin", "main")
	return repo
}

func inspect(t *testing.T, ws string) workspace.RepoInventory {
	t.Helper()
	inv, err := workspace.InspectRepositories(context.Background(), ws, os.Getenv("PATH"))
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

func TestInspectRepositories(t *testing.T) {
	t.Parallel()
	requireGit(t)
	for _, tc := range []struct {
		name     string
		setup    func(t *testing.T, ws string)
		want     []workspace.RepoState
		blockers []string
	}{
		{
			name:  "no repositories",
			setup: func(t *testing.T, ws string) { writeTree(t, ws, map[string]string{"notes.txt": "x"}) },
		},
		{
			name: "clean and pushed",
			setup: func(t *testing.T, ws string) {
				repo := cleanRepo(t, ws, "app")
				writeTree(t, repo, map[string]string{"build/out.bin": "ignored"})
			},
			want: []workspace.RepoState{{Path: "app"}},
		},
		{
			name: "the workspace itself is the repository",
			setup: func(t *testing.T, ws string) {
				cleanRepo(t, ws, ".")
			},
			want: []workspace.RepoState{{Path: "."}},
		},
		{
			name: "modified file",
			setup: func(t *testing.T, ws string) {
				repo := cleanRepo(t, ws, "app")
				must(t, os.WriteFile(filepath.Join(repo, "main.go"), []byte("package changed\n"), 0o644))
			},
			want:     []workspace.RepoState{{Path: "app", Dirty: true}},
			blockers: []string{"repository app has uncommitted changes"},
		},
		{
			name: "staged change",
			setup: func(t *testing.T, ws string) {
				repo := cleanRepo(t, ws, "app")
				must(t, os.WriteFile(filepath.Join(repo, "new.go"), []byte("package main\n"), 0o644))
				git(t, repo, "add", "new.go")
			},
			want:     []workspace.RepoState{{Path: "app", Dirty: true}},
			blockers: []string{"repository app has uncommitted changes"},
		},
		{
			name: "untracked file",
			setup: func(t *testing.T, ws string) {
				repo := cleanRepo(t, ws, "app")
				must(t, os.WriteFile(filepath.Join(repo, "scratch.txt"), []byte("wip"), 0o644))
			},
			want:     []workspace.RepoState{{Path: "app", Dirty: true}},
			blockers: []string{"repository app has uncommitted changes"},
		},
		{
			name: "unpushed commits",
			setup: func(t *testing.T, ws string) {
				repo := cleanRepo(t, ws, "app")
				for _, m := range []string{"two", "three"} {
					git(t, repo, "commit", "-q", "--allow-empty", "-m", m)
				}
			},
			want:     []workspace.RepoState{{Path: "app", Unpushed: 2}},
			blockers: []string{"repository app has 2 unpushed commits"},
		},
		{
			name: "a local branch never pushed",
			setup: func(t *testing.T, ws string) {
				repo := cleanRepo(t, ws, "app")
				git(t, repo, "checkout", "-q", "-b", "feature")
				git(t, repo, "commit", "-q", "--allow-empty", "-m", "feature work")
				git(t, repo, "checkout", "-q", "main")
			},
			want:     []workspace.RepoState{{Path: "app", Unpushed: 1}},
			blockers: []string{"repository app has 1 unpushed commit"},
		},
		{
			name: "no remote at all",
			setup: func(t *testing.T, ws string) {
				repo := filepath.Join(ws, "local")
				must(t, os.MkdirAll(repo, 0o755))
				git(t, repo, "init", "-q")
				git(t, repo, "commit", "-q", "--allow-empty", "-m", "only here")
			},
			want:     []workspace.RepoState{{Path: "local", Unpushed: 1}},
			blockers: []string{"repository local has 1 unpushed commit"},
		},
		{
			name: "detached head with a commit on no branch",
			setup: func(t *testing.T, ws string) {
				repo := cleanRepo(t, ws, "app")
				git(t, repo, "checkout", "-q", "--detach")
				git(t, repo, "commit", "-q", "--allow-empty", "-m", "detached work")
			},
			want:     []workspace.RepoState{{Path: "app", Detached: true, Unpushed: 1}},
			blockers: []string{"repository app has 1 unpushed commit"},
		},
		{
			name: "packed refs",
			setup: func(t *testing.T, ws string) {
				repo := cleanRepo(t, ws, "app")
				git(t, repo, "pack-refs", "--all")
				git(t, repo, "gc", "-q")
			},
			want: []workspace.RepoState{{Path: "app"}},
		},
		{
			name: "a .git file (worktree or submodule)",
			setup: func(t *testing.T, ws string) {
				repo := cleanRepo(t, ws, "app")
				git(t, repo, "worktree", "add", "-q", filepath.Join(ws, "wt"))
			},
			want: []workspace.RepoState{{Path: "app", Dirty: false}, {Path: "wt", Error: "cannot inspect: .git is not a directory (a worktree or submodule)"}},
			blockers: []string{
				"repository wt could not be inspected: cannot inspect: .git is not a directory (a worktree or submodule)",
			},
		},
		{
			name: "a newer repository format",
			setup: func(t *testing.T, ws string) {
				repo := cleanRepo(t, ws, "app")
				git(t, repo, "config", "core.repositoryformatversion", "2")
			},
			want:     []workspace.RepoState{{Path: "app", Error: `cannot inspect: repository format version "2" is not supported`}},
			blockers: []string{`repository app could not be inspected: cannot inspect: repository format version "2" is not supported`},
		},
		{
			name: "an unknown extension",
			setup: func(t *testing.T, ws string) {
				repo := cleanRepo(t, ws, "app")
				git(t, repo, "config", "core.repositoryformatversion", "1")
				git(t, repo, "config", "extensions.worktreeConfig", "true")
			},
			want:     []workspace.RepoState{{Path: "app", Error: `cannot inspect: repository extension "worktreeconfig" is not supported`}},
			blockers: []string{`repository app could not be inspected: cannot inspect: repository extension "worktreeconfig" is not supported`},
		},
		{
			name: "sha256 objects",
			setup: func(t *testing.T, ws string) {
				repo := filepath.Join(ws, "modern")
				must(t, os.MkdirAll(repo, 0o755))
				git(t, repo, "init", "-q", "--object-format=sha256")
				git(t, repo, "commit", "-q", "--allow-empty", "-m", "one")
			},
			want:     []workspace.RepoState{{Path: "modern", Unpushed: 1}},
			blockers: []string{"repository modern has 1 unpushed commit"},
		},
		{
			name: "not searched: node_modules, .git and beyond depth 4",
			setup: func(t *testing.T, ws string) {
				cleanRepo(t, ws, "node_modules/dep")
				cleanRepo(t, ws, "a/b/c/d")
				cleanRepo(t, ws, "a/b/c/d/e")
				must(t, os.MkdirAll(filepath.Join(ws, "a/b/c/d/.git/modules/x/.git"), 0o755))
			},
			want: []workspace.RepoState{{Path: "a/b/c/d", Dirty: true}}, // e/ is untracked in d
			blockers: []string{
				"repository a/b/c/d has uncommitted changes",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := t.TempDir()
			tc.setup(t, ws)
			inv := inspect(t, ws)
			if inv.Truncated || inv.Unavailable != "" {
				t.Fatalf("truncated %v unavailable %q", inv.Truncated, inv.Unavailable)
			}
			if !slices.Equal(inv.Repositories, tc.want) {
				t.Fatalf("repositories\n got %+v\nwant %+v", inv.Repositories, tc.want)
			}
			if got := inv.Blockers(); !slices.Equal(got, tc.blockers) {
				t.Fatalf("blockers\n got %q\nwant %q", got, tc.blockers)
			}
		})
	}
}

// A guest controls the repository's configuration. Nothing it configures may run on the
// host: not core.fsmonitor, not a filter driver, not a hook, not an included config.
func TestInspectRepositoriesNeverRunsTheGuestsConfiguration(t *testing.T) {
	t.Parallel()
	requireGit(t)
	ws := t.TempDir()
	repo := cleanRepo(t, ws, "app")
	markers := t.TempDir()
	script := func(name string) string {
		p := filepath.Join(markers, name+".sh")
		must(t, os.WriteFile(p, []byte("#!/bin/sh\ntouch "+filepath.Join(markers, name)+"\ncat\n"), 0o755))
		return p
	}
	writeTree(t, repo, map[string]string{".gitattributes": "*.go filter=evil\n"})
	git(t, repo, "add", ".gitattributes")
	git(t, repo, "commit", "-q", "-m", "attributes")
	git(t, repo, "push", "-q")
	included := filepath.Join(markers, "included.cfg")
	must(t, os.WriteFile(included, []byte("[core]\n\tfsmonitor = "+script("included-fsmonitor")+"\n"), 0o644))
	git(t, repo, "config", "core.fsmonitor", script("fsmonitor"))
	git(t, repo, "config", "filter.evil.clean", script("clean"))
	git(t, repo, "config", "filter.evil.smudge", script("smudge"))
	git(t, repo, "config", "filter.evil.process", script("process"))
	git(t, repo, "config", "core.pager", script("pager"))
	git(t, repo, "config", "include.path", included)
	for _, hook := range []string{"post-index-change", "pre-commit", "post-checkout", "reference-transaction"} {
		hp := filepath.Join(repo, ".git", "hooks", hook)
		must(t, os.WriteFile(hp, []byte("#!/bin/sh\ntouch "+filepath.Join(markers, "hook-"+hook)+"\n"), 0o755))
	}
	// The file's stat data no longer match the index, so git must re-read (and would
	// re-filter) it to tell whether it changed.
	future := time.Now().Add(time.Minute)
	must(t, os.Chtimes(filepath.Join(repo, "main.go"), future, future))

	inv := inspect(t, ws)
	if len(inv.Repositories) != 1 || inv.Repositories[0].Error != "" || inv.Repositories[0].Dirty {
		t.Fatalf("inventory %+v", inv)
	}
	entries, err := os.ReadDir(markers)
	must(t, err)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".sh") && !strings.HasSuffix(e.Name(), ".cfg") {
			t.Errorf("the guest's configuration ran on the host: %s exists", e.Name())
		}
	}

	// The trap is real: plain git in that repository runs the included fsmonitor, the
	// filter driver and the post-index-change hook.
	cmd := exec.Command("git", "status", "--porcelain")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	_ = cmd.Run()
	exists := func(name string) bool { _, err := os.Stat(filepath.Join(markers, name)); return err == nil }
	if !exists("included-fsmonitor") || !(exists("process") || exists("clean")) || !exists("hook-post-index-change") {
		t.Fatal("plain git did not run the guest's configuration: the trap proves nothing")
	}
}

func TestInspectRepositoriesTruncatesBeyondSixteen(t *testing.T) {
	t.Parallel()
	requireGit(t)
	ws := t.TempDir()
	for i := range 17 {
		repo := filepath.Join(ws, "r"+string(rune('a'+i)))
		must(t, os.MkdirAll(repo, 0o755))
		git(t, repo, "init", "-q")
	}
	inv := inspect(t, ws)
	if !inv.Truncated || len(inv.Repositories) != 16 {
		t.Fatalf("truncated %v with %d repositories", inv.Truncated, len(inv.Repositories))
	}
	b := inv.Blockers()
	if len(b) != 1 || !strings.Contains(b[0], "more repositories than are inspected") {
		t.Fatalf("blockers %q", b)
	}
}

func TestInspectRepositoriesWithoutGit(t *testing.T) {
	requireGit(t)
	ws := t.TempDir()
	cleanRepo(t, ws, "app")
	t.Setenv("PATH", t.TempDir())
	inv := inspect(t, ws)
	if inv.Unavailable == "" || len(inv.Repositories) != 1 {
		t.Fatalf("inventory %+v", inv)
	}
	if b := inv.Blockers(); len(b) != 1 || !strings.Contains(b[0], "could not be inspected") {
		t.Fatalf("blockers %q", b)
	}
	// Without repositories there is nothing git would have been needed for.
	if b := inspect(t, t.TempDir()).Blockers(); len(b) != 0 {
		t.Fatalf("blockers %q", b)
	}
}

func TestInspectRepositoriesOfAnAbsentWorkspace(t *testing.T) {
	t.Parallel()
	inv, err := workspace.InspectRepositories(context.Background(), filepath.Join(t.TempDir(), "absent"), os.Getenv("PATH"))
	if err != nil || len(inv.Repositories) != 0 || len(inv.Blockers()) != 0 {
		t.Fatalf("%+v %v", inv, err)
	}
}

func TestInspectRepositoriesLeavesTheRepositoryAsItWas(t *testing.T) {
	// Not parallel: it looks for leftovers in the shared temp dir, where inspections running
	// beside it would keep theirs for a moment.
	requireGit(t)
	ws := t.TempDir()
	repo := cleanRepo(t, ws, "app")
	must(t, os.WriteFile(filepath.Join(repo, "main.go"), []byte("package changed\n"), 0o644))
	before := snapshot(t, filepath.Join(repo, ".git"))
	inspect(t, ws)
	if after := snapshot(t, filepath.Join(repo, ".git")); !equalSnapshots(after, before) {
		t.Fatal("inspection changed the repository's .git")
	}
	tmp, _ := os.ReadDir(os.TempDir())
	for _, e := range tmp {
		if strings.HasPrefix(e.Name(), "jam-git-inventory-") {
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) < time.Minute {
				t.Errorf("temporary git directory %s left behind", e.Name())
			}
		}
	}
}

func TestInspectRepositoriesStopsWithItsContext(t *testing.T) {
	t.Parallel()
	requireGit(t)
	ws := t.TempDir()
	cleanRepo(t, ws, "app")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := workspace.InspectRepositories(ctx, ws, os.Getenv("PATH")); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}
