package workspace_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/workspace"
)

// fixture is a session workspace and a checkpoint generation to export.
type fixture struct {
	exports workspace.Exports
	owner   workspace.ExportOwner
	src     workspace.ExportSource
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	data := t.TempDir()
	ws := filepath.Join(data, "session")
	writeTree(t, ws, map[string]string{
		"README.md":              "hello\n",
		"src/main.go":            "package main\n",
		"src/deep/a/b/c/leaf.go": strings.Repeat("x", 70_000),
		"bin/run.sh":             "#!/bin/sh\necho run\n",
		"empty":                  "",
		"secret.txt":             "private",
	})
	mustChmod(t, filepath.Join(ws, "bin/run.sh"), 0o755)
	mustChmod(t, filepath.Join(ws, "README.md"), 0o644)
	mustChmod(t, filepath.Join(ws, "secret.txt"), 0o400)
	must(t, os.Symlink("src/main.go", filepath.Join(ws, "link-to-main")))
	must(t, os.Symlink("/etc/passwd", filepath.Join(ws, "src/outside")))
	must(t, os.Symlink("does-not-exist", filepath.Join(ws, "dangling")))
	must(t, os.Symlink("/etc", filepath.Join(ws, "etc-dir")))
	must(t, os.Mkdir(filepath.Join(ws, "emptydir"), 0o755))
	must(t, syscall.Mkfifo(filepath.Join(ws, "fifo"), 0o600))
	ck := filepath.Join(data, "checkpoints", uuid.NewString())
	writeTree(t, ck, map[string]string{
		"payload/sessions/state.json": `{"turn":3}`,
		"complete.json":               `{"version":1}`,
	})
	return fixture{
		exports: workspace.Exports{Root: filepath.Join(data, "workspace-exports")},
		owner:   workspace.ExportOwner{Workspace: uuid.New(), Host: uuid.New(), Session: uuid.New()},
		src:     workspace.ExportSource{Workspace: ws, CheckpointID: uuid.New(), Checkpoint: ck},
	}
}

func TestNewExportsIsUnderTheDataDirectory(t *testing.T) {
	t.Parallel()
	e := workspace.NewExports(domain.Layout{Root: "/data"})
	id := uuid.New()
	if e.Root != "/data/workspace-exports" || e.Dir(id) != (domain.Layout{Root: "/data"}).ExportDir(id) {
		t.Fatalf("root %s, dir %s", e.Root, e.Dir(id))
	}
}

func TestExportThenVerifyRoundTripsBytesModesAndSymlinks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := uuid.New()
	m, err := f.exports.Create(id, f.owner, f.src)
	if err != nil {
		t.Fatal(err)
	}
	if m.ID != id || m.Owner != f.owner || m.CheckpointID == nil || *m.CheckpointID != f.src.CheckpointID || m.Checksum == "" {
		t.Fatalf("manifest %+v", m)
	}
	if m.Skipped != 1 || m.Symlinks != 4 || m.Files != 8 {
		t.Fatalf("files %d symlinks %d skipped %d", m.Files, m.Symlinks, m.Skipped)
	}
	if want := int64(6 + 13 + 70_000 + len("#!/bin/sh\necho run\n") + 7 + len(`{"turn":3}`) + len(`{"version":1}`)); m.Bytes != want {
		t.Fatalf("bytes %d, want %d", m.Bytes, want)
	}
	if !m.CreatedAt.Equal(domain.Timestamp(m.CreatedAt)) {
		t.Fatalf("created_at %v is not normalised", m.CreatedAt)
	}
	v, err := f.exports.Verify(id)
	if err != nil {
		t.Fatal(err)
	}
	if v.Checksum != m.Checksum {
		t.Fatalf("verify checksum %s, create %s", v.Checksum, m.Checksum)
	}
	s, err := f.exports.Stat(id)
	if err != nil || s.Checksum != m.Checksum {
		t.Fatalf("stat %v %s", err, s.Checksum)
	}

	dir := f.exports.Dir(id)
	for _, tc := range []struct {
		path string
		mode fs.FileMode
		data string
	}{
		{"workspace/README.md", 0o600, "hello\n"},
		{"workspace/bin/run.sh", 0o700, "#!/bin/sh\necho run\n"},
		{"workspace/secret.txt", 0o600, "private"},
		{"workspace/empty", 0o600, ""},
		{"workspace/src/deep/a/b/c/leaf.go", 0o600, strings.Repeat("x", 70_000)},
		{"checkpoint/payload/sessions/state.json", 0o600, `{"turn":3}`},
		{"checkpoint/complete.json", 0o600, `{"version":1}`},
	} {
		st, err := os.Lstat(filepath.Join(dir, tc.path))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != tc.mode {
			t.Errorf("%s: mode %v, want %v", tc.path, st.Mode(), tc.mode)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, tc.path)); string(b) != tc.data {
			t.Errorf("%s: content differs", tc.path)
		}
	}
	for link, target := range map[string]string{
		"workspace/link-to-main": "src/main.go", "workspace/src/outside": "/etc/passwd", "workspace/dangling": "does-not-exist",
		"workspace/etc-dir": "/etc",
	} {
		if got, err := os.Readlink(filepath.Join(dir, link)); err != nil || got != target {
			t.Errorf("%s -> %q (%v), want %q", link, got, err, target)
		}
	}
	for _, d := range []string{"", "workspace", "workspace/emptydir", "workspace/src/deep", "checkpoint/payload"} {
		if st, err := os.Lstat(filepath.Join(dir, d)); err != nil || st.Mode() != fs.ModeDir|0o700 {
			t.Errorf("%q: %v %v, want a 0700 directory", d, st.Mode(), err)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "workspace/fifo")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("fifo exported: %v", err)
	}
	if st, err := os.Stat(filepath.Join(dir, "manifest.json")); err != nil || st.Mode() != 0o600 {
		t.Errorf("manifest %v %v", st.Mode(), err)
	}
	assertNoStaging(t, f.exports.Root)
}

func TestExportOfAWorkspaceThatIsASymlinkIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	link := filepath.Join(t.TempDir(), "session-link")
	must(t, os.Symlink(f.src.Workspace, link))
	f.src.Workspace = link
	id := uuid.New()
	if _, err := f.exports.Create(id, f.owner, f.src); err == nil {
		t.Fatal("a symlinked workspace was followed")
	}
	if ok, _ := f.exports.Exists(id); ok {
		t.Fatal("an export was published")
	}
}

func TestExportWithoutCheckpoint(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := uuid.New()
	m, err := f.exports.Create(id, f.owner, workspace.ExportSource{Workspace: f.src.Workspace})
	if err != nil {
		t.Fatal(err)
	}
	if m.CheckpointID != nil {
		t.Fatalf("checkpoint %v", m.CheckpointID)
	}
	if _, err := os.Lstat(filepath.Join(f.exports.Dir(id), "checkpoint")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("checkpoint dir: %v", err)
	}
	if _, err := f.exports.Verify(id); err != nil {
		t.Fatal(err)
	}
}

func TestExportExactRetryReturnsTheExistingExportWithoutRewriting(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := uuid.New()
	first, err := f.exports.Create(id, f.owner, f.src)
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(f.exports.Dir(id), "manifest.json")
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	must(t, os.Chtimes(manifest, old, old))
	// The retry must not read the source: it may be gone (an archive removed it).
	must(t, os.RemoveAll(f.src.Workspace))
	for _, src := range []workspace.ExportSource{f.src, {Workspace: f.src.Workspace, CheckpointID: f.src.CheckpointID}} {
		again, err := f.exports.Create(id, f.owner, src)
		if err != nil {
			t.Fatal(err)
		}
		if again.Checksum != first.Checksum || !again.CreatedAt.Equal(first.CreatedAt) {
			t.Fatalf("retry returned %s at %v, want %s at %v", again.Checksum, again.CreatedAt, first.Checksum, first.CreatedAt)
		}
	}
	if st, err := os.Stat(manifest); err != nil || !st.ModTime().Equal(old) {
		t.Fatalf("manifest rewritten: %v %v", st.ModTime(), err)
	}
}

func TestExportUnderAnIdOfAnotherOwnerOrCheckpointConflicts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := uuid.New()
	if _, err := f.exports.Create(id, f.owner, f.src); err != nil {
		t.Fatal(err)
	}
	other := func(mut func(*workspace.ExportOwner, *workspace.ExportSource)) (workspace.ExportOwner, workspace.ExportSource) {
		o, s := f.owner, f.src
		mut(&o, &s)
		return o, s
	}
	for name, mut := range map[string]func(*workspace.ExportOwner, *workspace.ExportSource){
		"workspace":     func(o *workspace.ExportOwner, _ *workspace.ExportSource) { o.Workspace = uuid.New() },
		"host":          func(o *workspace.ExportOwner, _ *workspace.ExportSource) { o.Host = uuid.New() },
		"session":       func(o *workspace.ExportOwner, _ *workspace.ExportSource) { o.Session = uuid.New() },
		"checkpoint":    func(_ *workspace.ExportOwner, s *workspace.ExportSource) { s.CheckpointID = uuid.New() },
		"no checkpoint": func(_ *workspace.ExportOwner, s *workspace.ExportSource) { s.CheckpointID, s.Checkpoint = uuid.Nil, "" },
	} {
		t.Run(name, func(t *testing.T) {
			o, s := other(mut)
			if _, err := f.exports.Create(id, o, s); !errors.Is(err, workspace.ErrExportConflict) {
				t.Fatalf("got %v, want ErrExportConflict", err)
			}
		})
	}
	if _, err := f.exports.Verify(id); err != nil {
		t.Fatalf("the export changed: %v", err)
	}
}

func TestExportRedoesAPartialStagingLeftByACrash(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := uuid.New()
	partial := filepath.Join(f.exports.Root, "."+id.String()+".partial")
	writeTree(t, partial, map[string]string{"workspace/half-written": "junk", "manifest.json": "{"})
	if ok, err := f.exports.Exists(id); err != nil || ok {
		t.Fatalf("a partial staging exists as an export: %v %v", ok, err)
	}
	if _, err := f.exports.Stat(id); !errors.Is(err, workspace.ErrExportMissing) {
		t.Fatalf("stat of a partial staging: %v", err)
	}
	if _, err := f.exports.Create(id, f.owner, f.src); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(f.exports.Dir(id), "workspace/half-written")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the partial staging was kept: %v", err)
	}
	if _, err := f.exports.Verify(id); err != nil {
		t.Fatal(err)
	}
	assertNoStaging(t, f.exports.Root)
}

func TestConcurrentCreatesOfOneExportAgree(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := uuid.New()
	var wg sync.WaitGroup
	sums := make([]string, 4)
	errs := make([]error, 4)
	for i := range sums {
		wg.Go(func() {
			m, err := f.exports.Create(id, f.owner, f.src)
			sums[i], errs[i] = m.Checksum, err
		})
	}
	wg.Wait()
	for i := range sums {
		if errs[i] != nil || sums[i] != sums[0] {
			t.Fatalf("attempt %d: %s %v, want %s", i, sums[i], errs[i], sums[0])
		}
	}
	if _, err := f.exports.Verify(id); err != nil {
		t.Fatal(err)
	}
}

func TestExportFilesAreCopiesNotHardLinksOfTheSource(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := uuid.New()
	if _, err := f.exports.Create(id, f.owner, f.src); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"README.md", "bin/run.sh", "src/deep/a/b/c/leaf.go"} {
		src, err := os.Stat(filepath.Join(f.src.Workspace, rel))
		if err != nil {
			t.Fatal(err)
		}
		dst, err := os.Stat(filepath.Join(f.exports.Dir(id), "workspace", rel))
		if err != nil {
			t.Fatal(err)
		}
		if os.SameFile(src, dst) || dst.Sys().(*syscall.Stat_t).Nlink != 1 {
			t.Errorf("%s: the export shares the source's inode (links %d)", rel, dst.Sys().(*syscall.Stat_t).Nlink)
		}
	}
	// Writing the source afterwards does not reach the export.
	must(t, os.WriteFile(filepath.Join(f.src.Workspace, "README.md"), []byte("changed\n"), 0o644))
	if _, err := f.exports.Verify(id); err != nil {
		t.Fatal(err)
	}
}

func TestExportBeyondTheLimitsIsRefusedAndLeavesNothing(t *testing.T) {
	t.Parallel()
	for name, lim := range map[string]workspace.ExportLimits{
		"entries": {MaxEntries: 5, MaxBytes: 1 << 30, MaxDepth: 64},
		"bytes":   {MaxEntries: 1000, MaxBytes: 1000, MaxDepth: 64},
		"depth":   {MaxEntries: 1000, MaxBytes: 1 << 30, MaxDepth: 3},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.exports.Limits = lim
			id := uuid.New()
			if _, err := f.exports.Create(id, f.owner, f.src); !errors.Is(err, workspace.ErrExportTooLarge) {
				t.Fatalf("got %v, want ErrExportTooLarge", err)
			}
			if ok, _ := f.exports.Exists(id); ok {
				t.Fatal("an export was published")
			}
			assertNoStaging(t, f.exports.Root)
		})
	}
}

func TestExportOfAMissingWorkspaceFails(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.src.Workspace = filepath.Join(t.TempDir(), "absent")
	id := uuid.New()
	if _, err := f.exports.Create(id, f.owner, f.src); err == nil || !strings.Contains(err.Error(), id.String()) {
		t.Fatalf("got %v", err)
	}
	assertNoStaging(t, f.exports.Root)
}

func TestVerifyDetectsTampering(t *testing.T) {
	t.Parallel()
	for name, tamper := range map[string]func(dir string) error{
		"content, same size": func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "workspace/README.md"), []byte("HELLO\n"), 0o600)
		},
		"truncated": func(dir string) error { return os.Truncate(filepath.Join(dir, "workspace/src/main.go"), 3) },
		"file removed": func(dir string) error {
			return os.Remove(filepath.Join(dir, "checkpoint/payload/sessions/state.json"))
		},
		"directory removed": func(dir string) error { return os.Remove(filepath.Join(dir, "workspace/emptydir")) },
		"file added": func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "workspace/src/extra"), nil, 0o600)
		},
		"symlink retargeted": func(dir string) error {
			if err := os.Remove(filepath.Join(dir, "workspace/link-to-main")); err != nil {
				return err
			}
			return os.Symlink("/etc/shadow", filepath.Join(dir, "workspace/link-to-main"))
		},
		"file replaced by a symlink": func(dir string) error {
			if err := os.Remove(filepath.Join(dir, "workspace/empty")); err != nil {
				return err
			}
			return os.Symlink("README.md", filepath.Join(dir, "workspace/empty"))
		},
		"manifest edited": func(dir string) error {
			p := filepath.Join(dir, "manifest.json")
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return os.WriteFile(p, bytes.Replace(b, []byte(`"dirs": `), []byte(`"dirs": 1`), 1), 0o600)
		},
		"manifest removed": func(dir string) error { return os.Remove(filepath.Join(dir, "manifest.json")) },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			id := uuid.New()
			if _, err := f.exports.Create(id, f.owner, f.src); err != nil {
				t.Fatal(err)
			}
			must(t, tamper(f.exports.Dir(id)))
			if _, err := f.exports.Verify(id); !errors.Is(err, workspace.ErrExportCorrupt) {
				t.Fatalf("got %v, want ErrExportCorrupt", err)
			}
		})
	}
}

func TestACorruptExportIsNeverWrittenOver(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := uuid.New()
	if _, err := f.exports.Create(id, f.owner, f.src); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(f.exports.Dir(id), "manifest.json")
	must(t, os.WriteFile(manifest, []byte("{not json"), 0o600))
	if _, err := f.exports.Stat(id); !errors.Is(err, workspace.ErrExportCorrupt) {
		t.Fatalf("stat: %v", err)
	}
	if _, err := f.exports.Create(id, f.owner, f.src); !errors.Is(err, workspace.ErrExportCorrupt) {
		t.Fatalf("create over a corrupt export: %v", err)
	}
	if b, _ := os.ReadFile(manifest); string(b) != "{not json" {
		t.Fatal("the corrupt export was rewritten")
	}
}

// A manifest is trusted only for what it says about itself: one that carries a valid
// checksum but names a path outside the export (or under a symlink) is corrupt, so no
// restore ever follows it.
func TestAManifestNamingPathsOutsideTheExportIsCorrupt(t *testing.T) {
	t.Parallel()
	for name, mut := range map[string]func(m *workspace.ExportManifest){
		"parent path": func(m *workspace.ExportManifest) {
			m.Entries = append(m.Entries, workspace.ExportEntry{Path: "workspace/../../escape", Type: workspace.EntryFile})
		},
		"absolute path": func(m *workspace.ExportManifest) {
			m.Entries = append(m.Entries, workspace.ExportEntry{Path: "/etc/passwd", Type: workspace.EntryFile})
		},
		"under a symlink": func(m *workspace.ExportManifest) {
			m.Entries = append(m.Entries, workspace.ExportEntry{Path: "workspace/link-to-main/x", Type: workspace.EntryFile})
		},
		"outside workspace/": func(m *workspace.ExportManifest) {
			m.Entries = append(m.Entries, workspace.ExportEntry{Path: "elsewhere", Type: workspace.EntryDir})
		},
		"listed twice":   func(m *workspace.ExportManifest) { m.Entries = append(m.Entries, m.Entries[len(m.Entries)-1]) },
		"unknown type":   func(m *workspace.ExportManifest) { m.Entries[len(m.Entries)-1].Type = "fifo" },
		"another id":     func(m *workspace.ExportManifest) { m.ID = uuid.New() },
		"none (control)": nil,
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			id := uuid.New()
			m, err := f.exports.Create(id, f.owner, f.src)
			if err != nil {
				t.Fatal(err)
			}
			if mut != nil {
				mut(&m)
			}
			m.Checksum = ""
			b, err := json.Marshal(m)
			must(t, err)
			sum := sha256.Sum256(b)
			m.Checksum = hex.EncodeToString(sum[:])
			b, err = json.Marshal(m)
			must(t, err)
			must(t, os.WriteFile(filepath.Join(f.exports.Dir(id), "manifest.json"), b, 0o600))
			if _, err := f.exports.Stat(id); mut == nil {
				if err != nil {
					t.Fatalf("a re-signed unchanged manifest: %v", err)
				}
			} else if !errors.Is(err, workspace.ErrExportCorrupt) {
				t.Fatalf("got %v, want ErrExportCorrupt", err)
			}
		})
	}
}

func TestStatOfAMissingExport(t *testing.T) {
	t.Parallel()
	e := workspace.Exports{Root: t.TempDir()}
	id := uuid.New()
	for name, call := range map[string]func() error{
		"stat":   func() error { _, err := e.Stat(id); return err },
		"verify": func() error { _, err := e.Verify(id); return err },
		"restore": func() error {
			return e.RestoreWorkspace(id, filepath.Join(t.TempDir(), "dest"))
		},
	} {
		if err := call(); !errors.Is(err, workspace.ErrExportMissing) {
			t.Errorf("%s: got %v, want ErrExportMissing", name, err)
		}
	}
	if ok, err := e.Exists(id); ok || err != nil {
		t.Fatalf("exists %v %v", ok, err)
	}
}

func TestRestoreWorkspaceRoundTrips(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := uuid.New()
	if _, err := f.exports.Create(id, f.owner, f.src); err != nil {
		t.Fatal(err)
	}
	sessions := filepath.Join(t.TempDir(), "sessions")
	dest := filepath.Join(sessions, uuid.NewString())
	if err := f.exports.RestoreWorkspace(id, dest); err != nil {
		t.Fatal(err)
	}
	want := snapshot(t, filepath.Join(f.exports.Dir(id), "workspace"))
	if got := snapshot(t, dest); !equalSnapshots(got, want) {
		t.Fatalf("restored tree differs:\n got %v\nwant %v", got, want)
	}
	// The restored bytes are the source's (modes owner-only, the FIFO not carried).
	src := snapshot(t, f.src.Workspace)
	delete(src, "fifo")
	for p, s := range src {
		if strings.HasPrefix(s, "file") || strings.HasPrefix(s, "link") {
			if g := snapshot(t, dest)[p]; contentOf(g) != contentOf(s) {
				t.Errorf("%s: restored %q, source %q", p, g, s)
			}
		}
	}
	if st, err := os.Lstat(dest); err != nil || st.Mode() != fs.ModeDir|0o700 {
		t.Fatalf("dest %v %v", st.Mode(), err)
	}
	assertNoRestoreStaging(t, sessions)
	// A second restore finds the destination.
	if err := f.exports.RestoreWorkspace(id, dest); !errors.Is(err, workspace.ErrDestinationExists) {
		t.Fatalf("got %v, want ErrDestinationExists", err)
	}
}

func TestRestoreWorkspaceNeverWritesOverAnExistingDestination(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := uuid.New()
	if _, err := f.exports.Create(id, f.owner, f.src); err != nil {
		t.Fatal(err)
	}
	for name, setup := range map[string]func(dest string){
		"with files": func(dest string) { writeTree(t, dest, map[string]string{"mine.txt": "keep me"}) },
		"empty":      func(dest string) { must(t, os.Mkdir(dest, 0o700)) },
		"a file":     func(dest string) { must(t, os.WriteFile(dest, []byte("keep me"), 0o600)) },
	} {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			dest := filepath.Join(parent, "dest")
			setup(dest)
			before := snapshot(t, parent)
			if err := f.exports.RestoreWorkspace(id, dest); !errors.Is(err, workspace.ErrDestinationExists) {
				t.Fatalf("got %v, want ErrDestinationExists", err)
			}
			if after := snapshot(t, parent); !equalSnapshots(after, before) {
				t.Fatalf("destination changed:\n%v\n%v", before, after)
			}
		})
	}
}

func TestRestoreOfATamperedExportRestoresNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := uuid.New()
	if _, err := f.exports.Create(id, f.owner, f.src); err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(filepath.Join(f.exports.Dir(id), "workspace/src/main.go"), []byte("package evil\n"), 0o600))
	parent := t.TempDir()
	dest := filepath.Join(parent, "dest")
	if err := f.exports.RestoreWorkspace(id, dest); !errors.Is(err, workspace.ErrExportCorrupt) {
		t.Fatalf("got %v, want ErrExportCorrupt", err)
	}
	if _, err := os.Lstat(dest); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("dest: %v", err)
	}
	assertNoRestoreStaging(t, parent)
}

func TestRestoreIgnoresAndCleansAbandonedStaging(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := uuid.New()
	if _, err := f.exports.Create(id, f.owner, f.src); err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	stale, fresh := filepath.Join(parent, ".restore-stale"), filepath.Join(parent, ".restore-fresh")
	writeTree(t, stale, map[string]string{"README.md": "crashed"})
	writeTree(t, fresh, map[string]string{"README.md": "in progress"})
	old := time.Now().Add(-2 * time.Hour)
	must(t, os.Chtimes(stale, old, old))
	dest := filepath.Join(parent, "dest")
	if err := f.exports.RestoreWorkspace(id, dest); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dest, "README.md")); string(b) != "hello\n" {
		t.Fatalf("restored %q", b)
	}
	if _, err := os.Lstat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("stale staging kept: %v", err)
	}
	if _, err := os.Lstat(fresh); err != nil {
		t.Errorf("a recent staging was removed: %v", err)
	}
}

func TestRestoreCheckpoint(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := uuid.New()
	if _, err := f.exports.Create(id, f.owner, f.src); err != nil {
		t.Fatal(err)
	}
	gens := filepath.Join(t.TempDir(), "checkpoints")
	dest := filepath.Join(gens, f.src.CheckpointID.String())
	restored, err := f.exports.RestoreCheckpoint(id, dest)
	if err != nil || !restored {
		t.Fatalf("restored %v %v", restored, err)
	}
	if got, want := snapshot(t, dest), snapshot(t, f.src.Checkpoint); !equalContents(got, want) {
		t.Fatalf("restored generation differs:\n got %v\nwant %v", got, want)
	}
	assertNoRestoreStaging(t, gens)
	// The generation is there: nothing to do, and it is left as it is.
	must(t, os.WriteFile(filepath.Join(dest, "marker"), nil, 0o600))
	if restored, err := f.exports.RestoreCheckpoint(id, dest); err != nil || restored {
		t.Fatalf("restored %v %v over an existing generation", restored, err)
	}
	if _, err := os.Stat(filepath.Join(dest, "marker")); err != nil {
		t.Fatal(err)
	}
	// An export without a checkpoint has none to restore.
	bare := uuid.New()
	if _, err := f.exports.Create(bare, f.owner, workspace.ExportSource{Workspace: f.src.Workspace}); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(gens, uuid.NewString())
	if restored, err := f.exports.RestoreCheckpoint(bare, other); err != nil || restored {
		t.Fatalf("restored %v %v", restored, err)
	}
	if _, err := os.Lstat(other); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("created %s: %v", other, err)
	}
}

func TestRemoveIsIdempotentAndFinishesATombstone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := uuid.New()
	if err := f.exports.Remove(id); err != nil {
		t.Fatalf("removing a never-made export: %v", err)
	}
	if _, err := f.exports.Create(id, f.owner, f.src); err != nil {
		t.Fatal(err)
	}
	other := uuid.New()
	if _, err := f.exports.Create(other, f.owner, f.src); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := f.exports.Remove(id); err != nil {
			t.Fatal(err)
		}
		if ok, err := f.exports.Exists(id); ok || err != nil {
			t.Fatalf("exists %v %v", ok, err)
		}
	}
	// A crash after the rename left a tombstone (and a partial staging).
	tomb := filepath.Join(f.exports.Root, "."+id.String()+".deleting")
	writeTree(t, tomb, map[string]string{"workspace/left": "x"})
	writeTree(t, filepath.Join(f.exports.Root, "."+id.String()+".partial"), map[string]string{"workspace/left": "x"})
	if err := f.exports.Remove(id); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(f.exports.Root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), id.String()) {
			t.Errorf("%s left behind", e.Name())
		}
	}
	if _, err := f.exports.Verify(other); err != nil {
		t.Fatalf("a sibling export was touched: %v", err)
	}
}

func TestRemoveWithoutAnExportsDirectory(t *testing.T) {
	t.Parallel()
	e := workspace.Exports{Root: filepath.Join(t.TempDir(), "absent")}
	if err := e.Remove(uuid.New()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(e.Root); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("remove created the root: %v", err)
	}
}

func TestNilIdsAreRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	if _, err := f.exports.Create(uuid.Nil, f.owner, f.src); err == nil {
		t.Fatal("nil export id accepted")
	}
	if _, err := f.exports.Create(uuid.New(), workspace.ExportOwner{}, f.src); err == nil {
		t.Fatal("nil owner accepted")
	}
	if err := f.exports.Remove(uuid.Nil); err == nil {
		t.Fatal("nil id removed")
	}
}

// --- helpers ---

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustChmod(t *testing.T, p string, m fs.FileMode) { t.Helper(); must(t, os.Chmod(p, m)) }

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	must(t, os.MkdirAll(root, 0o755))
	for rel, data := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(data), 0o644))
	}
}

// snapshot describes every entry under root: "dir <mode>", "file <mode> <content>" or
// "link <target>".
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			out[rel] = "dir " + info.Mode().Perm().String()
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "link " + target
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = "file " + info.Mode().Perm().String() + " " + string(b)
		default:
			out[rel] = "special"
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func equalSnapshots(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// contentOf drops the mode of a snapshot line.
func contentOf(s string) string {
	kind, rest, _ := strings.Cut(s, " ")
	if kind == "file" {
		_, rest, _ = strings.Cut(rest, " ")
	}
	if kind == "dir" {
		rest = ""
	}
	return kind + " " + rest
}

func equalContents(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || contentOf(w) != contentOf(v) {
			return false
		}
	}
	return true
}

func assertNoStaging(t *testing.T, root string) {
	t.Helper()
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	must(t, err)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".partial") || strings.HasSuffix(e.Name(), ".deleting") {
			t.Errorf("%s left behind", e.Name())
		}
	}
}

func assertNoRestoreStaging(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	must(t, err)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".restore-") {
			t.Errorf("%s left behind", e.Name())
		}
	}
}
