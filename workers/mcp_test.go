package workers

import (
	"log/slog"
	"net"
	"path/filepath"
	"testing"
)

// Sandboxes' egress rules name the endpoint's port: a restarted node gets its port back.
func TestTheToolsEndpointKeepsItsPortAcrossWorkerRestarts(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), mcpPortFile)
	first, err := listenMCP("127.0.0.1:0", file, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	port := first.Addr().(*net.TCPAddr).Port
	_ = first.Close()
	again, err := listenMCP("127.0.0.1:0", file, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	if got := again.Addr().(*net.TCPAddr).Port; got != port {
		t.Fatalf("restarted on port %d, was %d", got, port)
	}
	// Taken by someone else: a new port, remembered in its turn.
	other, err := listenMCP("127.0.0.1:0", file, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Close() }()
	_ = again.Close()
	if other.Addr().(*net.TCPAddr).Port == port {
		t.Fatal("a taken port was listened on twice")
	}
	last, err := listenMCP("127.0.0.1:0", file, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = last.Close() }()
	if last.Addr().(*net.TCPAddr).Port == other.Addr().(*net.TCPAddr).Port {
		t.Fatal("the remembered port was taken and still listened on")
	}
}
