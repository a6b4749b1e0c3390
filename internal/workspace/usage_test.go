package workspace_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/workspace"
)

func TestRemoveSessionWorkspaceLeavesSiblings(t *testing.T) {
	t.Parallel()
	p, err := workspace.ManagedPaths(domain.Layout{Root: t.TempDir()}, uuid.New())
	if err != nil {
		t.Fatal(err)
	}
	gone, sibling := uuid.New(), uuid.New()
	writeTree(t, p.Session(gone), map[string]string{"repo/main.go": "x", "go/pkg/mod/m@v1/a.go": "y"})
	writeTree(t, p.Session(sibling), map[string]string{"keep.txt": "keep"})
	outside := filepath.Join(t.TempDir(), "outside")
	writeTree(t, outside, map[string]string{"host.txt": "host"})
	must(t, os.Symlink(outside, filepath.Join(p.Session(gone), "link-out")))
	// A Go module cache leaves read-only directories.
	mustChmod(t, filepath.Join(p.Session(gone), "go/pkg/mod/m@v1"), 0o555)
	mustChmod(t, filepath.Join(p.Session(gone), "go/pkg/mod"), 0o555)

	for range 2 {
		if err := workspace.RemoveSessionWorkspace(p, gone); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(p.Session(gone)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("workspace still there: %v", err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(p.Session(sibling), "keep.txt")); err != nil || string(b) != "keep" {
		t.Fatalf("sibling touched: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "host.txt")); err != nil || string(b) != "host" {
		t.Fatalf("a link was followed: %q %v", b, err)
	}
	if st, _ := os.Stat(outside); st.Mode().Perm() != 0o755 {
		t.Fatalf("a link target's mode changed: %v", st.Mode())
	}

	// A crash after the rename left the tombstone.
	tomb := filepath.Join(p.WorkspaceRoot(), "sessions", "."+gone.String()+".removing")
	writeTree(t, tomb, map[string]string{"left.txt": "x"})
	if err := workspace.RemoveSessionWorkspace(p, gone); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(p.WorkspaceRoot(), "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != sibling.String() {
		names := []string{}
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("sessions hold %s", strings.Join(names, ", "))
	}
}

func TestRemoveSessionWorkspaceOfAHostWithoutWorkspaces(t *testing.T) {
	t.Parallel()
	p, _ := workspace.ManagedPaths(domain.Layout{Root: t.TempDir()}, uuid.New())
	if err := workspace.RemoveSessionWorkspace(p, uuid.New()); err != nil {
		t.Fatal(err)
	}
	if err := workspace.RemoveSessionWorkspace(p, uuid.Nil); err == nil {
		t.Fatal("nil session accepted")
	}
}

func TestDirBytes(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "ws")
	writeTree(t, dir, map[string]string{"a": "12345", "sub/b": "123", "sub/deeper/c": ""})
	big := filepath.Join(root, "big")
	must(t, os.WriteFile(big, make([]byte, 10_000), 0o600))
	must(t, os.Symlink(big, filepath.Join(dir, "link-to-big")))
	must(t, os.Symlink(root, filepath.Join(dir, "sub/link-to-root")))
	must(t, os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "sub/hardlink-of-a")))

	for _, tc := range []struct {
		name string
		dir  string
		want int64
	}{
		{"files, links not followed, a hard link once", dir, 8},
		{"absent", filepath.Join(root, "absent"), 0},
		{"empty", t.TempDir(), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := workspace.DirBytes(tc.dir)
			if err != nil || got != tc.want {
				t.Fatalf("got %d %v, want %d", got, err, tc.want)
			}
		})
	}
}
