package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/tools"
)

// MCPConfig is where a node serves Jam's runtime tools over MCP.
type MCPConfig struct {
	// Listen is the endpoint's address (JAM_MCP_LISTEN); "" is DefaultMCPListen. It should
	// stay on loopback: sandboxes reach it through their egress proxy on this host.
	Listen string
	// GuestHost is the name a sandbox guest reaches this host by (JAM_MCP_GUEST_HOST);
	// "" is DefaultMCPGuestHost.
	GuestHost string
	// Bridge is the `jam mcp` command providers run as a stdio MCP server (the jam
	// executable and its arguments); empty offers no bridge.
	Bridge []string
	// Disabled serves no tools over MCP (Codex still gets them as dynamic tools).
	Disabled bool
}

// Defaults of MCPConfig.
const (
	DefaultMCPListen    = "127.0.0.1:0"
	DefaultMCPGuestHost = "host.docker.internal"
)

// mcpListener is the node's running MCP endpoint.
type mcpListener struct {
	server *tools.MCPServer
	http   *http.Server
	url    string
	guest  string
	target string
	bridge []string
}

func startMCP(cfg MCPConfig, dataDir string, log *slog.Logger) (*mcpListener, error) {
	if cfg.Disabled {
		return nil, nil
	}
	addr := cfg.Listen
	if addr == "" {
		addr = DefaultMCPListen
	}
	ln, err := listenMCP(addr, filepath.Join(dataDir, mcpPortFile), log)
	if err != nil {
		return nil, fmt.Errorf("listen for Jam's runtime tools on %s: %w", addr, err)
	}
	srv := tools.NewMCPServer(log)
	mux := http.NewServeMux()
	mux.Handle(tools.MCPPath, srv)
	// A question waits for its human for up to days: no write timeout. Headers must come
	// promptly, and an idle connection is closed.
	h := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() {
		if err := h.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("runtime tools endpoint stopped", "error", err)
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	guest := cfg.GuestHost
	if guest == "" {
		guest = DefaultMCPGuestHost
	}
	l := &mcpListener{server: srv, http: h, url: "http://" + ln.Addr().String() + tools.MCPPath,
		guest: "http://" + net.JoinHostPort(guest, port) + tools.MCPPath, target: net.JoinHostPort(guest, port), bridge: cfg.Bridge}
	log.Info("runtime tools served over MCP", "url", l.url, "guest_url", l.guest)
	return l, nil
}

// mcpPortFile, in the node's data directory, keeps the port an ephemeral listen address
// last got: sandboxes' egress rules name it, so a restarted worker that gets it again keeps
// their rules valid.
const mcpPortFile = "mcp-port"

// listenMCP listens on addr; when addr asks for any port, the node's previous port is
// tried first and the port it gets is remembered.
func listenMCP(addr, portFile string, log *slog.Logger) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port != "0" {
		return net.Listen("tcp", addr)
	}
	if b, err := os.ReadFile(portFile); err == nil {
		if p, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && p > 0 && p < 65536 {
			if ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p))); err == nil {
				return ln, nil
			}
			log.Info("the runtime tools endpoint's previous port is taken; sandboxes get a new one", "port", p)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	got := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	if err := os.WriteFile(portFile, []byte(got+"\n"), 0o600); err != nil {
		log.Warn("remember the runtime tools endpoint's port", "error", err)
	}
	return ln, nil
}

func (l *mcpListener) endpoints() *activities.MCPEndpoints {
	if l == nil {
		return nil
	}
	return &activities.MCPEndpoints{Server: l.server, URL: l.url, GuestURL: l.guest, GuestTarget: l.target, Bridge: l.bridge}
}

func (l *mcpListener) close() {
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := l.http.Shutdown(ctx); err != nil {
		// A call still waiting (a question for its human) must not keep the port open.
		_ = l.http.Close()
	}
}

// revoke ends a runtime instance's token (a nil listener serves none).
func (l *mcpListener) revoke(session uuid.UUID, gen int64) {
	if l != nil {
		l.server.Revoke(session, gen)
	}
}
