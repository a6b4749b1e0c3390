package workspace

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Removal makes a guest's read-only directories the owner's again, through descriptors, and
// never changes what a symlink points at. (Tests usually run as root, where a read-only
// directory does not stop RemoveAll, so the fallback is exercised directly.)
func TestChmodDirsMakesDirectoriesWritableWithoutFollowingLinks(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "tomb")
	outside := t.TempDir()
	for _, d := range []string{"a/b/c", "ro"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(outside, 0o751); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "a/link")); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"a/b/c", "a/b", "ro", ""} {
		if err := os.Chmod(filepath.Join(root, d), 0o555); err != nil {
			t.Fatal(err)
		}
	}
	if err := chmodDirs(unix.AT_FDCWD, root, 0); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"", "a", "a/b", "a/b/c", "ro"} {
		if st, err := os.Lstat(filepath.Join(root, d)); err != nil || st.Mode().Perm() != 0o700 {
			t.Errorf("%q: %v %v", d, st.Mode(), err)
		}
	}
	if st, _ := os.Stat(outside); st.Mode().Perm() != 0o751 {
		t.Fatalf("a link target changed: %v", st.Mode())
	}
	if err := chmodDirs(unix.AT_FDCWD, filepath.Join(root, "a/link"), 0); err == nil {
		t.Fatal("a symlink was entered")
	}
	if err := removeTree(root); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(outside); err != nil {
		t.Fatal(err)
	}
}
