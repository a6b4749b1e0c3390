// Command jam-stubmodel runs Jam's scripted model server on 127.0.0.1 for trying the real
// agent CLIs offline: OpenAI Responses (Codex), Chat Completions (OpenCode and other
// OpenAI-compatible clients) and Anthropic Messages (Claude Code). It prints its base URL
// and serves until interrupted. Tests start the same server in-process
// (internal/testsupport/stubmodel) and script it per test.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/jam-dev/jam/internal/testsupport/stubmodel"
)

func main() {
	mode := flag.String("mode", "reply-tool", "how to answer: echo (\"stub: <message>\") or reply-tool (call jam_reply_to_message when offered, else echo)")
	verbose := flag.Bool("v", false, "print each request's dialect, offered tools and last user text on stderr")
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
	fmt.Printf("stub model server: %s (OpenAI base URL %s/v1, Anthropic base URL %s)\n", s.URL, s.URL, s.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	_ = s.Close()
}
