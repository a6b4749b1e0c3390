package app

import (
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// The address jam dev writes for the CLI is one a client can dial: an unspecified listen
// address is reached on loopback.
func TestClientURLReachesUnspecifiedAddressesOnLoopback(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:7780": "http://127.0.0.1:7780",
		"0.0.0.0:7780":   "http://127.0.0.1:7780",
		"[::]:7780":      "http://[::1]:7780",
		"[::1]:7780":     "http://[::1]:7780",
	} {
		tcp, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := clientURL(tcp); got != want {
			t.Errorf("clientURL(%s) = %s, want %s", addr, got, want)
		}
	}
}

// A clean stop removes the address file only while it still names this process's address.
func TestRemoveAPIURLRemovesOnlyItsOwnAddress(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	file := filepath.Join(t.TempDir(), "api-url")
	if err := os.WriteFile(file, []byte("http://127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	removeAPIURL(file, "http://127.0.0.1:2", log)
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("another address was removed: %v", err)
	}
	removeAPIURL(file, "http://127.0.0.1:1", log)
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("its own address was kept: %v", err)
	}
}
