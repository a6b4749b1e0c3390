// Command jam-stubmodel runs Jam's scripted model server for trying the real agent CLIs
// offline: OpenAI Responses (Codex), Chat Completions (OpenCode and other OpenAI-compatible
// clients) and Anthropic Messages (Claude Code). It serves on --listen (default a free port
// on 127.0.0.1; give a fixed one, e.g. 127.0.0.1:7790, so a template saved with its URL
// still works after a restart), prints its base URL alone on the first line of stdout (for
// scripts: STUB=$(jam-stubmodel … | head -1)) and serves until interrupted. Tests start the
// same server in-process (internal/testsupport/stubmodel) and script it per test.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jam-dev/jam/internal/testsupport/stubmodel"
)

// defaultListen is where stubmodel.Start itself serves: a free port on loopback.
const defaultListen = "127.0.0.1:0"

func main() {
	mode := flag.String("mode", "reply-tool", "how to answer: echo (\"stub: <message>\") or reply-tool (call jam_reply_to_message when offered, else echo)")
	verbose := flag.Bool("v", false, "print each request's dialect, offered tools and last user text on stderr")
	listen := flag.String("listen", defaultListen, "address to serve on, e.g. 127.0.0.1:7790 (port 0: a free one)")
	flag.Parse()
	responders := map[string]stubmodel.Responder{"echo": stubmodel.Echo, "reply-tool": stubmodel.ReplyTool}
	respond, ok := responders[*mode]
	if !ok {
		fmt.Fprintf(os.Stderr, "jam-stubmodel: unknown --mode %q (echo or reply-tool)\n", *mode)
		os.Exit(2)
	}
	if *verbose {
		inner := respond
		respond = func(r stubmodel.Request) stubmodel.Reply {
			fmt.Fprintf(os.Stderr, "%s %s tools=%v after_tool=%v\n  last user: %.300q\n", r.Dialect, r.Path, r.Tools, r.AfterToolResult, r.LastUser())
			return inner(r)
		}
	}
	s, err := stubmodel.Start(respond)
	if err != nil {
		fmt.Fprintln(os.Stderr, "jam-stubmodel:", err)
		os.Exit(1)
	}
	base := s.URL
	var front *http.Server
	if *listen != defaultListen {
		if front, base, err = serveOn(*listen, s.URL); err != nil {
			_ = s.Close()
			fmt.Fprintln(os.Stderr, "jam-stubmodel:", err)
			os.Exit(1)
		}
	}
	fmt.Println(base)
	fmt.Printf("stub model server: %s (OpenAI base URL %s/v1, Anthropic base URL %s)\n", base, base, base)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	if front != nil {
		_ = front.Close()
	}
	_ = s.Close()
}

// serveOn serves the stub server at upstream on addr, passing every request through (the
// stub server itself always takes a free loopback port), and returns the base URL clients
// on this machine call.
func serveOn(addr, upstream string) (*http.Server, string, error) {
	target, err := url.Parse(upstream)
	if err != nil {
		return nil, "", err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", fmt.Errorf("listen on %s: %w", addr, err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1 // streamed answers (server-sent events) pass through at once
	srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "jam-stubmodel:", err)
			os.Exit(1)
		}
	}()
	return srv, "http://" + reachable(ln.Addr()), nil
}

// reachable is addr as a client on this machine dials it: an unspecified host (0.0.0.0, ::)
// is reached on loopback.
func reachable(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	return net.JoinHostPort(host, port)
}
