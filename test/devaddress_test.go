package test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `jam dev --listen 127.0.0.1:0` picks a free port and writes it to $JAM_HOME/api-url: the
// CLI run with only the same JAM_HOME (no JAM_URL, no JAM_TOKEN) finds it; run with another
// JAM_HOME it says which files it looked for. A clean stop removes the address.
func TestCLIFindsJamDevOnAnyPortThroughItsDataDirectory(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "jam-home")
	d := startDev(t, home, "--ephemeral")
	file := filepath.Join(home, "api-url")
	b, err := os.ReadFile(file)
	if err != nil || strings.TrimSpace(string(b)) != d.apiURL {
		t.Fatalf("%s holds %q (%v), want %s", file, b, err, d.apiURL)
	}
	if st, err := os.Stat(file); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v, want mode 0600", file, st.Mode(), err)
	}

	env := []string{"JAM_HOME=" + home}
	out, err := runJam(t, env, "room", "create", "lobby", "-q")
	if err != nil {
		t.Fatalf("jam room create with only JAM_HOME: %v", err)
	}
	room := strings.TrimSpace(out)
	if out, err := runJam(t, env, "room", "list"); err != nil || !strings.Contains(out, room) {
		t.Fatalf("jam room list with only JAM_HOME: %v\n%s", err, out)
	}

	other := filepath.Join(t.TempDir(), "other-home")
	_, err = runJam(t, []string{"JAM_HOME=" + other}, "room", "list")
	if err == nil || !strings.Contains(err.Error(), filepath.Join(other, "api-token")) || !strings.Contains(err.Error(), "from JAM_HOME") {
		t.Fatalf("another JAM_HOME: %v", err)
	}

	d.stop(t)
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("%s left after a clean stop: %v", file, err)
	}
}
