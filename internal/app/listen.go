package app

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
)

// devListen is one address `jam dev` listens on and the setting that moves it.
type devListen struct {
	what string // e.g. "the Temporal Web UI"
	addr string
	flag string
	env  string
	// tokenless: served without Jam's token (the Temporal frontend and Web UI take write
	// actions such as terminate with no credential), so it stays on loopback unless the
	// operator allows otherwise.
	tokenless bool
}

func (l devListen) setting() string { return l.flag + " or " + l.env }

// EnvAllowRemoteUI is the environment variable of --allow-remote-ui.
const EnvAllowRemoteUI = "JAM_DEV_ALLOW_REMOTE_UI"

func (o Options) devListens() []devListen {
	return []devListen{
		{what: "the Jam API", addr: o.Listen, flag: "--listen", env: "JAM_LISTEN"},
		{what: "the embedded Temporal frontend", addr: o.TemporalListen, flag: "--temporal-listen", env: "JAM_DEV_TEMPORAL_LISTEN", tokenless: true},
		{what: "the Temporal Web UI", addr: o.UIListen, flag: "--ui-listen", env: "JAM_DEV_UI_LISTEN", tokenless: true},
	}
}

// checkDevListen runs before `jam dev` starts anything: it refuses a Temporal frontend or
// Web UI address off loopback unless AllowRemoteUI, and an address that is already taken
// (also by another of the three), each with one line that names the setting to change. The
// embedded Temporal server's other ports (history, matching, worker, the frontend's HTTP
// port) are picked free by internal/devserver, so only these three need a check; a port of
// 0 picks a free one and needs none.
func (o Options) checkDevListen() error {
	listens := o.devListens()
	for _, l := range listens {
		if l.addr == "" {
			continue // the UI is disabled; the others have defaults
		}
		host, _, err := net.SplitHostPort(l.addr)
		if err != nil {
			return fmt.Errorf("%s address %q is not host:port; set %s", l.what, l.addr, l.setting())
		}
		if l.tokenless && !o.AllowRemoteUI && !isLoopbackHost(host) {
			return fmt.Errorf("%s address %s (%s) is not loopback: it serves without Jam's token and can terminate and signal workflows; use a 127.0.0.1 address, or pass --allow-remote-ui (%s=true) to expose it",
				l.what, l.addr, l.setting(), EnvAllowRemoteUI)
		}
	}
	// Hold each address until all are checked, so two settings naming one port are caught too.
	var held []net.Listener
	defer func() {
		for _, ln := range held {
			_ = ln.Close()
		}
	}()
	for _, l := range listens {
		if l.addr == "" {
			continue
		}
		host, port, _ := net.SplitHostPort(l.addr)
		if port == "0" {
			continue
		}
		if host == "" && l.tokenless {
			host = "127.0.0.1" // where internal/devserver binds a host-less address
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("%s address %s is already in use; choose another with %s (port 0 picks a free one)", l.what, l.addr, l.setting())
		}
		if err != nil {
			return fmt.Errorf("%s cannot listen on %s (%w); choose another address with %s", l.what, l.addr, err, l.setting())
		}
		held = append(held, ln)
	}
	return nil
}

// isLoopbackHost reports whether host names only this machine: a loopback IP, "localhost",
// or empty (internal/devserver binds a host-less address to 127.0.0.1).
func isLoopbackHost(host string) bool {
	if host == "" || strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.SplitN(host, "%", 2)[0])
	return ip != nil && ip.IsLoopback()
}
