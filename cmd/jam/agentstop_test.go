package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/mocks"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/band"
	"github.com/jam-dev/jam/internal/lifecycle"
	"github.com/jam-dev/jam/internal/testsupport/teststore"
)

const cliToken = "cli-operator-token"

// realAPI serves the real API handler (SQLite store, local Band, no runtimes) on loopback
// and returns its URL.
func realAPI(t *testing.T) string {
	t.Helper()
	st := teststore.SQLite(t)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	rec := &lifecycle.Recorder{}
	b := band.NewLocal(st, rec, log)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Config{Store: st, Temporal: &mocks.Client{}, Band: b, Lifecycle: rec, Token: cliToken, Version: "test", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return hs.URL
}

// runCLIErr runs jam with args and returns its output and error.
func runCLIErr(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs(args)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

var createdID = regexp.MustCompile(`\(([0-9a-f-]{36})\)`)

// `jam agent stop` and `start` work for an attached agent as for an owned one: stopped, its
// key is refused with agent_stopped until it is started.
func TestAgentStopAndStartWorkForAttachedAgents(t *testing.T) {
	url := realAPI(t)
	cli := func(args ...string) string {
		t.Helper()
		return runCLI(t, append(args, "--url", url, "--token", cliToken)...)
	}
	out := cli("agent", "create", "helper", "--kind", "attached")
	id := createdID.FindStringSubmatch(out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if id == nil || !strings.HasPrefix(lines[len(lines)-1], "jam_agent_") {
		t.Fatalf("create output %q", out)
	}
	key := lines[len(lines)-1]
	if out := cli("agent", "stop", id[1]); !strings.Contains(out, "helper: run intent stopped") {
		t.Fatalf("stop output %q", out)
	}
	_, err := runCLIErr(t, "agent", "receive", id[1], "--wait", "0", "--url", url, "--key", key)
	if err == nil || !strings.Contains(err.Error(), "403 agent_stopped") {
		t.Fatalf("receive while stopped: %v", err)
	}
	if out := cli("agent", "start", id[1]); !strings.Contains(out, "helper: run intent running") {
		t.Fatalf("start output %q", out)
	}
	if out, err := runCLIErr(t, "agent", "receive", id[1], "--wait", "0", "--url", url, "--key", key); err != nil || !strings.Contains(out, "no message") {
		t.Fatalf("receive after start: %q %v", out, err)
	}
	owned := createdID.FindStringSubmatch(cli("agent", "create", "builder"))
	if owned == nil {
		t.Fatal("owned agent not created")
	}
	if out := cli("agent", "stop", owned[1]); !strings.Contains(out, "builder: run intent stopped") {
		t.Fatalf("owned stop output %q", out)
	}
}

// A template flag given to `jam agent create` without --transport is refused, not dropped.
func TestAgentCreateRefusesTemplateFlagsWithoutATransport(t *testing.T) {
	_, err := runCLIErr(t, "agent", "create", "coder", "--setting", "model=x", "--url", "http://127.0.0.1:1", "--token", "t")
	if err == nil || !strings.Contains(err.Error(), "--setting") || !strings.Contains(err.Error(), "--transport") {
		t.Fatalf("agent create --setting without --transport: %v", err)
	}
}
