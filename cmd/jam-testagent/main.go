// Command jam-testagent is Jam's scripted Agent Client Protocol (ACP v1)
// agent. It speaks newline-delimited JSON-RPC 2.0 on stdin/stdout and is the
// default provider of `jam dev`, so adapter tests can exercise a real ACP peer
// whose behaviour is chosen by directives such as [[slow 2]] in the prompt.
package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"github.com/coder/acp-go-sdk"
)

const (
	defaultName = "jam-testagent"
	version     = "0.1.0"
)

// config is everything main hands to the agent; tests build it directly.
type config struct {
	StateDir   string
	Name       string
	Directives string
	NoLoad     bool
	NoResume   bool
	// NoHTTPMCP: the agent takes only stdio MCP servers (Jam then offers its bridge).
	NoHTTPMCP bool
}

// lockedWriter serialises writes to stdout. The SDK emits one whole line per
// Write call, so holding the same mutex for raw lines ([[garbage]]) keeps
// them from interleaving with protocol messages.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// writeRaw writes bytes outside the SDK, e.g. deliberately broken lines.
func (l *lockedWriter) writeRaw(p []byte) error {
	_, err := l.Write(p)
	return err
}

// defaultStateDir keeps sessions out of the workspace the agent runs in, which is the
// user's tree: JAM_TESTAGENT_STATE_DIR, else JAM_PROVIDER_STATE_DIR (the provider-state
// directory Jam gives a sandboxed runtime, which its checkpoints capture), else
// $XDG_STATE_HOME/jam-testagent, else ~/.local/state/jam-testagent, else ./.jam-testagent.
func defaultStateDir() string {
	for _, env := range []string{"JAM_TESTAGENT_STATE_DIR", "JAM_PROVIDER_STATE_DIR"} {
		if dir := os.Getenv(env); dir != "" {
			return dir
		}
	}
	if dir := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(dir) {
		return filepath.Join(dir, "jam-testagent")
	}
	if home, err := os.UserHomeDir(); err == nil && filepath.IsAbs(home) {
		return filepath.Join(home, ".local", "state", "jam-testagent")
	}
	return "./.jam-testagent"
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	defaultState := defaultStateDir()

	fs := flag.NewFlagSet("jam-testagent", flag.ContinueOnError)
	fs.SetOutput(os.Stderr) // stdout is reserved for the protocol
	showVersion := fs.Bool("version", false, "print the version and exit")
	cfg := config{}
	fs.StringVar(&cfg.StateDir, "state-dir", defaultState, "directory holding persisted sessions (env JAM_TESTAGENT_STATE_DIR)")
	fs.StringVar(&cfg.Name, "name", defaultName, "agentInfo.name reported by initialize")
	fs.StringVar(&cfg.Directives, "directives", "", "directives applied to every prompt, e.g. \"[[slow 2]]\"")
	fs.BoolVar(&cfg.NoLoad, "no-load", false, "do not support session/load")
	fs.BoolVar(&cfg.NoResume, "no-resume", false, "do not support session/resume")
	fs.BoolVar(&cfg.NoHTTPMCP, "no-http-mcp", false, "take only stdio MCP servers (not mcpCapabilities.http)")
	grandchild := fs.Bool("grandchild", false, "spawn `sleep 600` in our process group at startup")
	if err := fs.Parse(args); err != nil {
		return 2
	}

	if *showVersion {
		// Jam's executable resolver asks every candidate for its version.
		fmt.Println(defaultName + " " + version)
		return 0
	}

	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	slog.SetDefault(logger)

	if *grandchild {
		// Lets tests verify that Jam kills the whole process group, not just us.
		if pid, err := spawnSleeper(); err != nil {
			logger.Error("spawn grandchild", "err", err)
		} else {
			logger.Info("spawned grandchild", "pid", pid)
		}
	}

	out := &lockedWriter{w: os.Stdout}
	ag := newAgent(cfg, out, logger)
	conn := acp.NewAgentSideConnection(ag, out, os.Stdin)
	conn.SetLogger(logger)
	ag.setConnection(conn)

	// Block until the client closes stdin; children (sleepers) are left for
	// the process-group kill that Jam is expected to perform.
	<-conn.Done()
	logger.Info("stdin closed, exiting")
	return 0
}

// spawnSleeper starts `sleep 600` in our process group (the default for
// exec) with stdio on /dev/null so nothing leaks onto the protocol stream.
func spawnSleeper() (int, error) {
	cmd := exec.Command("sleep", "600")
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	go func() { _ = cmd.Wait() }() // reap it if it is killed while we live
	return cmd.Process.Pid, nil
}
