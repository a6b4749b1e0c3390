package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/faults"
	"github.com/jam-dev/jam/internal/permission"
	"github.com/jam-dev/jam/internal/provider"
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
	// questionInline is JAM_QUESTION_INLINE_SECS (questions.Broker.Inline).
	questionInline time.Duration
	// pause is the crash tests' fault hook (JAM_FAULT_PAUSE, JAM_FAULT_DIR); nil otherwise.
	pause func(ctx context.Context, point string)
	// fail is the operator tests' failure hook (JAM_FAULT_FAIL, JAM_FAULT_DIR); nil otherwise.
	fail func(point string) error
	// mcp is where the node serves Jam's runtime tools (JAM_MCP_LISTEN, JAM_MCP_GUEST_HOST).
	mcp workers.MCPConfig
	// workflowCache is JAM_WORKFLOW_CACHE_SIZE (0: workers.DefaultWorkflowCacheSize).
	workflowCache int
	// factories are the adapters the node runs (JAM_WORKER_PROVIDERS); nil is all of them.
	factories map[domain.Provider]provider.Factory
	// probeCLIs: resolve the node's provider CLIs at start (JAM_WORKER_PROBE_CLIS, default on).
	probeCLIs bool
	// watchdog is the provider watchdog's sampling (JAM_WATCHDOG_INTERVAL_MS,
	// JAM_WATCHDOG_IDLE_WINDOW_SECS).
	watchdog workers.WatchdogConfig
}

// The MCP endpoint's knobs.
const (
	envMCPListen    = "JAM_MCP_LISTEN"
	envMCPGuestHost = "JAM_MCP_GUEST_HOST"
	// envWorkerProviders limits the provider families a node runs (comma-separated, such
	// as "acp,codex"): a node without a provider's CLI, or kept off one, advertises no
	// adapter for it, and templates of that provider go to nodes that have it.
	envWorkerProviders = "JAM_WORKER_PROVIDERS"
	// envWorkflowCache is how many workflow executions the process keeps in memory between
	// their tasks (workers.LimitWorkflowCache).
	envWorkflowCache = "JAM_WORKFLOW_CACHE_SIZE"
	// envProbeCLIs turns off ("0") the worker's resolution of its provider CLIs at start (a
	// `--version` of each installed one, in the background): the node's CLIs then stay
	// unprobed until `jam node probe`. For a machine that starts many nodes at once (the
	// test suite), where those probes are what costs; on by default.
	envProbeCLIs = "JAM_WORKER_PROBE_CLIS"
	// envWatchdogInterval is how often, in milliseconds, the node samples its runtimes for
	// the provider watchdog (default 5000); envWatchdogIdleWindow how many seconds idle CPU
	// must stay over its ceiling (default 60). Tests shorten both.
	envWatchdogInterval   = "JAM_WATCHDOG_INTERVAL_MS"
	envWatchdogIdleWindow = "JAM_WATCHDOG_IDLE_WINDOW_SECS"
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
	inline, err := questions.InlineFromEnv(getenv)
	if err != nil {
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
	factories, err := workerFactories(getenv(envWorkerProviders))
	if err != nil {
		return workerEnv{}, fmt.Errorf("worker configuration: %w", err)
	}
	cache, err := workflowCacheSize(getenv)
	if err != nil {
		return workerEnv{}, err
	}
	interval, err := positiveEnv(getenv, envWatchdogInterval, "milliseconds")
	if err != nil {
		return workerEnv{}, fmt.Errorf("worker configuration: %w", err)
	}
	window, err := positiveEnv(getenv, envWatchdogIdleWindow, "seconds")
	if err != nil {
		return workerEnv{}, fmt.Errorf("worker configuration: %w", err)
	}
	watchdog := workers.WatchdogConfig{Interval: time.Duration(interval) * time.Millisecond,
		IdleWindow: time.Duration(window) * time.Second}
	probeCLIs := true
	switch v := getenv(envProbeCLIs); v {
	case "", "1", "true":
	case "0", "false":
		probeCLIs = false
	default:
		return workerEnv{}, fmt.Errorf("worker configuration: %s=%q: want 1 or 0", envProbeCLIs, v)
	}
	return workerEnv{env: env, sbx: sbx, lifecycle: lifecycle, permission: perm, question: question,
		questionInline: inline, pause: faults.FromEnv(getenv), fail: faults.FailFromEnv(getenv), mcp: mcp, factories: factories,
		workflowCache: cache, probeCLIs: probeCLIs, watchdog: watchdog}, nil
}

// workflowCacheSize is JAM_WORKFLOW_CACHE_SIZE: 0 when unset (the default), else a positive
// number of workflow executions.
func workflowCacheSize(getenv func(string) string) (int, error) {
	n, err := positiveEnv(getenv, envWorkflowCache, "workflow executions")
	if err != nil {
		return 0, fmt.Errorf("worker configuration: %w", err)
	}
	return n, nil
}

// positiveEnv reads name as a positive count of unit: 0 when unset, an error naming the
// variable when it is anything else.
func positiveEnv(getenv func(string) string, name, unit string) (int, error) {
	v := getenv(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q: want a positive number of %s", name, v, unit)
	}
	return n, nil
}

// workerFactories is the node's adapters limited to the comma-separated provider families
// of list ("" or unset: every adapter). An unknown family, or one with no adapter, is an
// error: the operator asked for something this node cannot run.
func workerFactories(list string) (map[domain.Provider]provider.Factory, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	all := workers.DefaultFactories()
	out := map[domain.Provider]provider.Factory{}
	for _, name := range strings.Split(list, ",") {
		p := domain.Provider(strings.TrimSpace(name))
		f, ok := all[p]
		if !ok {
			known := make([]string, 0, len(all))
			for k := range all {
				known = append(known, string(k))
			}
			slices.Sort(known)
			return nil, fmt.Errorf("%s: %q is not a provider this node has an adapter for (%s)", envWorkerProviders, p, strings.Join(known, ", "))
		}
		out[p] = f
	}
	return out, nil
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
