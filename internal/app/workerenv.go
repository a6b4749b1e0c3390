package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/faults"
	"github.com/jam-dev/jam/internal/permission"
	"github.com/jam-dev/jam/internal/questions"
	"github.com/jam-dev/jam/internal/sandbox"
	"github.com/jam-dev/jam/workers"
)

// workerEnv is what a node's workers take from the process environment. It is parsed once
// here, at start, and injected through workers.Config: nothing below the startup code reads
// the environment (TestOnlyStartupCodeReadsTheEnvironment).
type workerEnv struct {
	// env is the snapshot the workers resolve executables in and pass on, filtered, to
	// providers and `sbx`; it carries the bundled default provider.
	env        []string
	sbx        sandbox.Config
	lifecycle  activities.Lifecycle
	permission permission.TimeoutOverride
	// question is JAM_QUESTION_TIMEOUT_SECS, for the question broker (questions.Broker.Timeout).
	question questions.TimeoutOverride
	// pause is the crash tests' fault hook (JAM_FAULT_PAUSE, JAM_FAULT_DIR); nil otherwise.
	pause func(ctx context.Context, point string)
	// mcp is where the node serves Jam's runtime tools (JAM_MCP_LISTEN, JAM_MCP_GUEST_HOST).
	mcp workers.MCPConfig
}

// The MCP endpoint's knobs.
const (
	envMCPListen    = "JAM_MCP_LISTEN"
	envMCPGuestHost = "JAM_MCP_GUEST_HOST"
)

// parseWorkerEnv parses environ (os.Environ at start); sbxFlag is --sbx, which wins over
// JAM_SBX. A malformed lifecycle knob is an error: the operator asked for something.
func parseWorkerEnv(environ []string, sbxFlag string, log *slog.Logger) (workerEnv, error) {
	env := withBundledTestAgent(environ, log)
	getenv := envLookup(env)
	lifecycle, err := activities.LifecycleFromEnv(getenv)
	if err != nil {
		return workerEnv{}, fmt.Errorf("worker configuration: %w", err)
	}
	perm, err := permission.TimeoutOverrideFromEnv(getenv)
	if err != nil {
		// Ignored with a warning, as the broker always has: the stored setting applies.
		log.Warn("ignoring an invalid "+permission.EnvTimeout, "error", err)
	}
	question, err := questions.TimeoutOverrideFromEnv(getenv)
	if err != nil {
		// Unlike the permission timeout, a new knob: a bad value stops the worker at once.
		return workerEnv{}, fmt.Errorf("worker configuration: %w", err)
	}
	sbx := sandbox.ConfigFromEnv(getenv)
	if sbxFlag != "" {
		sbx.Sbx = sbxFlag
	}
	mcp := workers.MCPConfig{Listen: getenv(envMCPListen), GuestHost: getenv(envMCPGuestHost)}
	if mcp.Listen != "" {
		if _, _, err := net.SplitHostPort(mcp.Listen); err != nil {
			return workerEnv{}, fmt.Errorf("worker configuration: %s=%q is not host:port: %w", envMCPListen, mcp.Listen, err)
		}
	}
	return workerEnv{env: env, sbx: sbx, lifecycle: lifecycle, permission: perm, question: question,
		pause: faults.FromEnv(getenv), mcp: mcp}, nil
}

// envLookup reads a variable of env as os.Getenv would ("" when unset; the last entry wins,
// as exec.Cmd has it).
func envLookup(env []string) func(string) string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return func(k string) string { return m[k] }
}
