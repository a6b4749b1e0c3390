package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAHostStoreKeepsItsIdentityAndNodesAtAnotherPathDoNotShareIt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hosts")
	first, err := HostStoreIdentity(dir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := HostStoreIdentity(dir)
	if err != nil || again != first {
		t.Fatalf("second read %q, %v; first %q", again, err, first)
	}
	if !strings.HasSuffix(first, ":"+dir) {
		t.Fatalf("identity %q does not name the path", first)
	}
	st, err := os.Stat(filepath.Join(dir, hostStoreIDFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("identity file %v, %v", st, err)
	}
	// The same store reached at another path (a second mount, here a symlink) is not shared.
	link := filepath.Join(t.TempDir(), "mounted")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	other, err := HostStoreIdentity(link)
	if err != nil || other == first || strings.Split(other, ":")[0] != strings.Split(first, ":")[0] {
		t.Fatalf("via %s: %q, %v (first %q)", link, other, err, first)
	}
	// Another store never shares it.
	if fresh, err := HostStoreIdentity(t.TempDir()); err != nil || strings.Split(fresh, ":")[0] == strings.Split(first, ":")[0] {
		t.Fatalf("a new store read %q, %v", fresh, err)
	}
	// A damaged identity is refused, not replaced.
	if err := os.WriteFile(filepath.Join(dir, hostStoreIDFile), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := HostStoreIdentity(dir); err == nil {
		t.Fatal("a damaged identity file was accepted")
	}
}
