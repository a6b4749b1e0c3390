package main

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/jam-dev/jam/internal/testsupport/stubmodel"
)

// --listen serves the stub model on the address given, streamed answers included.
func TestServeOnPassesRequestsToTheStubServer(t *testing.T) {
	s, err := stubmodel.Start(stubmodel.Echo)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	// A fixed port: take a free one, then serve there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	front, base, err := serveOn(addr, s.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = front.Close() })
	if base != "http://"+addr {
		t.Fatalf("base URL %s, want http://%s", base, addr)
	}
	resp, err := http.Post(base+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"stub-model","stream":true,"messages":[{"role":"user","content":"hello"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), "text/event-stream") ||
		!strings.Contains(string(body), "stub") || !strings.Contains(string(body), "[DONE]") {
		t.Fatalf("%d %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if _, _, err := serveOn(addr, s.URL); err == nil {
		t.Fatal("a port in use was taken")
	}
}
