package devserver

import (
	"fmt"
	"net"
	"strconv"
)

// freePort returns a port on host that is free now and will not be handed out again by the
// kernel for a while: the accepted connection is closed from the server side, which parks
// the port in TIME_WAIT (the technique the Temporal CLI uses for its internal services).
func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("assign a free port on %s: %w", host, err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	c, err := net.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return 0, fmt.Errorf("assign a free port on %s: %w", host, err)
	}
	defer c.Close()
	s, err := l.Accept()
	if err != nil {
		return 0, fmt.Errorf("assign a free port on %s: %w", host, err)
	}
	_ = s.Close()
	return port, nil
}

// FreeAddress returns host:port with a currently free port, for callers that must know an
// address before the listener exists.
func FreeAddress(host string) (string, error) {
	p, err := freePort(host)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(host, strconv.Itoa(p)), nil
}
