// Package workers builds and runs the Temporal workers of one node: the shared `jam` queue
// (workflows and machine-independent activities) and the node's own `jam.node.<node>` queue
// (activities that touch this machine). It also keeps the node's row in the store alive.
package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/permission"
	"github.com/jam-dev/jam/internal/procgroup"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/questions"
	"github.com/jam-dev/jam/internal/roomctl"
	"github.com/jam-dev/jam/internal/sandbox"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/workspace"
	"github.com/jam-dev/jam/workflows"
)

// DefaultStopTimeout is how long a stopping worker lets running activities finish.
const DefaultStopTimeout = 30 * time.Second

// DefaultWorkflowCacheSize bounds how many workflow executions a worker process keeps in
// memory between their tasks. The SDK's default (10,000) holds every dormant room session
// of a large node in memory for nothing (three coroutines each, ~60 KiB of heap and stack);
// one evicted from the cache replays its short history on its next poke instead.
const DefaultWorkflowCacheSize = 1000

var workflowCacheOnce sync.Once

// LimitWorkflowCache sets the process's workflow cache to n executions (0: the default).
// The SDK sizes its one cache when the process's first Temporal worker starts, so this must
// run before any does — an embedded Temporal server's own system workers included (jam dev
// calls it before starting the server). The first call wins.
func LimitWorkflowCache(n int) {
	if n <= 0 {
		n = DefaultWorkflowCacheSize
	}
	workflowCacheOnce.Do(func() { worker.SetStickyWorkflowCacheSize(n) })
}

// Config is what a node's workers need.
type Config struct {
	// Namespace is the Temporal namespace the client serves (a restarted node fails its
	// predecessor's in-flight activities there).
	Namespace string
	Client    client.Client
	Store     *store.Store
	Node      string
	DataDir   string
	Version   string
	// Sbx locates this node's `sbx` (sandbox.ConfigFromEnv at start).
	Sbx    sandbox.Config
	Logger *slog.Logger
	// StopTimeout bounds how long Stop waits for running activities (DefaultStopTimeout).
	StopTimeout time.Duration
	// MaxRuntimes is how many live runtimes this node carries at most (0: no limit); wakes
	// beyond it are placed on other nodes or wait (domain.Place).
	MaxRuntimes int
	// WorkflowCacheSize is how many workflow executions the process keeps in memory between
	// their tasks (0: DefaultWorkflowCacheSize); see LimitWorkflowCache.
	WorkflowCacheSize int
	// ProbeCLIs: resolve the node's provider CLIs at start (a `--version` of each, in the
	// background: the workers serve meanwhile), so placement sends host-native runtimes only
	// where their CLI is installed and `jam node list` shows them. Operators' `jam node
	// probe` asks again. Every node does it unless JAM_WORKER_PROBE_CLIS=0.
	ProbeCLIs bool
	// HeartbeatInterval is how often the node row is refreshed (domain.NodeHeartbeatInterval).
	HeartbeatInterval time.Duration
	// HostStore is the directory of the node's runtime-host roots when it is not the data
	// directory's own: a shared filesystem other nodes mount at the same path, so rooms whose
	// state is all in their host root can run on any of them. A node with one fences itself:
	// once it could not record a heartbeat for FenceAfter it kills the runtimes of rooms that
	// may move, as another node may soon run those rooms on the same files.
	HostStore string
	// ProcessGuard, when set, is the argv of the companion that kills what this worker's
	// providers left running once the worker ends, even killed outright (`jam
	// process-guard`; "--dir <records>" is appended). Without it that waits for the
	// worker's next start.
	ProcessGuard []string
	// Register, when set, adds registrations to the shared and the node worker (tests use it
	// to run their own activities through the real workers).
	Register func(shared, node worker.Registry)
	// Factories override the runtime adapters by provider family (DefaultFactories).
	Factories map[domain.Provider]provider.Factory
	// Env is the worker's environment, snapshotted once by the startup code: executable
	// resolution reads it, host-native providers get their allowed variables from it and
	// `sbx` runs with it less credentials. nil is an empty environment, never the process's.
	Env []string
	// Lifecycle is the operator's owned-runtime lifecycle configuration.
	Lifecycle activities.Lifecycle
	// PermissionTimeout is the operator's override of the permission timeout setting.
	PermissionTimeout permission.TimeoutOverride
	// Pause is the fault-injection hook of crash tests (faults.FromEnv at start; nil in
	// production).
	Pause func(ctx context.Context, point string)
	// Fail is the failure-injection hook of operator tests (faults.FailFromEnv; nil in
	// production).
	Fail func(point string) error
	// MCP is where the node serves Jam's runtime tools to its providers.
	MCP MCPConfig
	// QuestionTimeout is the operator's JAM_QUESTION_TIMEOUT_SECS for the question broker
	// behind jam_ask_question.
	QuestionTimeout questions.TimeoutOverride
	// Watchdog tunes the provider watchdog's sampling (JAM_WATCHDOG_INTERVAL_MS,
	// JAM_WATCHDOG_IDLE_WINDOW_SECS); its bounds come from each runtime's template.
	Watchdog WatchdogConfig
	// QuestionInline is JAM_QUESTION_INLINE_SECS (questions.Broker.Inline): how long a
	// question's tool call waits before it returns deferred.
	QuestionInline time.Duration
}

// Workers are a node's running workers and its heartbeat.
type Workers struct {
	shared, node worker.Worker
	stopBeat     context.CancelFunc
	beatDone     chan struct{}
	sandboxDone  chan struct{}
	clisDone     chan struct{}
	registered   chan struct{} // the heartbeat registered the node again
	lastBeat     atomic.Int64  // unix nanoseconds of the last heartbeat recorded
	// guard is the write end of the process guard's stdin: its closing (at Stop, or by the
	// kernel when the worker dies) starts the guard's reap.
	guard       *os.File
	fenceDone   chan struct{}
	stopOnce    sync.Once
	fatal       chan error
	runtimes    *RuntimeRegistry
	permissions *permission.Broker
	mcp         *mcpListener
}

// Start registers the node, starts its heartbeat and starts both workers.
func Start(ctx context.Context, cfg Config) (_ *Workers, retErr error) {
	if err := domain.ValidateNodeName(cfg.Node); err != nil {
		return nil, err
	}
	if cfg.Client == nil || cfg.Store == nil || cfg.Logger == nil || cfg.DataDir == "" {
		return nil, errors.New("workers: client, store, logger and data directory are required")
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = DefaultStopTimeout
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = domain.NodeHeartbeatInterval
	}
	if cfg.Factories == nil {
		cfg.Factories = DefaultFactories()
	}
	layout := domain.Layout{Root: cfg.DataDir}
	// Only a host store an operator named is shared: the data directory's own belongs to
	// this process (its lock), and a copied data directory must not read as shared.
	hostStore := ""
	if cfg.HostStore != "" {
		abs, err := filepath.Abs(cfg.HostStore)
		if err != nil {
			return nil, fmt.Errorf("host store %s: %w", cfg.HostStore, err)
		}
		cfg.HostStore, layout.Hosts = abs, abs
		if hostStore, err = workspace.HostStoreIdentity(abs); err != nil {
			return nil, err
		}
	}
	host, _ := os.Hostname()
	node, err := cfg.Store.RegisterNode(ctx, domain.Node{
		Name: cfg.Node, Hostname: host, PID: os.Getpid(), Version: cfg.Version, DataDir: cfg.DataDir,
		Adapters: slices.Sorted(maps.Keys(cfg.Factories)), MaxRuntimes: cfg.MaxRuntimes, HostStore: hostStore,
	})
	if err != nil {
		return nil, err
	}
	// What a killed predecessor may have left started: the rooms holding slots placed here
	// before this worker, the hosts pinned here. Their slots are freed once those
	// activities are failed (below): a worker killed meanwhile leaves them to the next one.
	pred := predecessor{self: workerIdentity(), started: node.StartedAt}
	if pred.sessions, err = cfg.Store.PlacedBefore(ctx, cfg.Node, node.StartedAt); err != nil {
		return nil, err
	}
	if pred.hosts, err = cfg.Store.HostsOnNode(ctx, cfg.Node); err != nil {
		return nil, err
	}
	// A previous worker's guard may still reap or stop its sandboxes: this one serves after.
	gctx, cancel := context.WithTimeout(ctx, guardAwaitWithin)
	if err := procgroup.AwaitGuard(gctx, layout.ProcessGroupsDir(cfg.Node)); err != nil {
		cfg.Logger.Warn("previous process guard", "node", cfg.Node, "error", err)
	}
	cancel()
	records, err := startProcessGroups(ctx, layout.ProcessGroupsDir(cfg.Node), cfg.Logger.With("component", "process-groups"))
	if err != nil {
		return nil, err
	}
	guardArgs := []string{"--dir", layout.ProcessGroupsDir(cfg.Node)}
	if cfg.HostStore != "" {
		// A killed worker's sandboxes in the store are the guard's to stop (the fence's,
		// had the worker lived).
		guardArgs = append(guardArgs, "--home", layout.Root, "--host-store", cfg.HostStore,
			"--sbx", cfg.Sbx.Sbx, "--sbx-path", cfg.Sbx.PATH)
	}
	guard, err := startGuard(cfg.ProcessGuard, guardArgs)
	if err != nil {
		// The next start still reaps what a killed worker left: run without.
		cfg.Logger.Warn("process guard not started", "error", err)
	}
	defer func() {
		if retErr != nil && guard != nil {
			// A worker that did not start ran nothing: it ends its guard now.
			_, _ = guard.WriteString(GuardStopped + "\n")
			_ = guard.Close()
		}
	}()

	// Process-wide, and only before the first worker starts (a no-op when jam dev set it).
	LimitWorkflowCache(cfg.WorkflowCacheSize)
	opts := worker.Options{WorkerStopTimeout: cfg.StopTimeout}
	w := &Workers{
		shared:     worker.New(cfg.Client, contract.TaskQueue, opts),
		node:       worker.New(cfg.Client, contract.NodeTaskQueue(cfg.Node), opts),
		fatal:      make(chan error, 1),
		registered: make(chan struct{}, 1),
		guard:      guard,
	}
	w.permissions = permission.New(cfg.Store, cfg.Logger.With("component", "permissions"), cfg.PermissionTimeout)
	w.runtimes = NewRuntimeRegistry(cfg.Logger, cfg.Factories, func(exit RuntimeExit) {
		// A runtime that is gone acts no more through Jam's tools.
		w.mcp.revoke(exit.RuntimeSession, exit.Generation)
		// The event log tells people; the signal tells the session's workflow, which goes
		// dormant (a lost signal is healed by its next turn, which finds no runtime).
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cfg.Store.ReleasePlacement(ctx, exit.RuntimeSession, cfg.Node); err != nil {
			cfg.Logger.Warn("release runtime placement", "runtime_session", exit.RuntimeSession, "error", err)
		}
		if err := cfg.Store.RecordRuntimeExit(ctx, exit.RuntimeSession, exit.Generation, exit.Reason, time.Now()); err != nil {
			cfg.Logger.Warn("record runtime exit", "runtime_session", exit.RuntimeSession, "error", err)
		}
		err := cfg.Client.SignalWorkflow(ctx, contract.RoomSessionID(exit.RuntimeSession), "", contract.SignalRuntimeExited,
			contract.RuntimeExitedSignal{Generation: exit.Generation, Reason: exit.Reason})
		if err != nil && !contract.IsNotFound(err) {
			cfg.Logger.Warn("signal runtime exit", "runtime_session", exit.RuntimeSession, "error", err)
		}
	}, WithGroupRecords(records))
	registerShared(w.shared, cfg.Store, cfg.Client, cfg.Lifecycle)
	starter := &roomctl.Starter{Client: cfg.Client, Store: cfg.Store, Eager: cfg.Lifecycle.Eager}
	asker := activities.BrokerAsker{Broker: &questions.Broker{Store: cfg.Store, Timeout: cfg.QuestionTimeout,
		Inline: cfg.QuestionInline, Log: cfg.Logger.With("component", "questions")}}
	toolBackend := &activities.ToolBackend{Store: cfg.Store, Questions: asker, Poke: starter.Poke,
		Log: cfg.Logger.With("component", "tools"), Temporal: cfg.Client}
	if w.mcp, err = startMCP(cfg.MCP, cfg.DataDir, cfg.Logger.With("component", "mcp")); err != nil {
		return nil, err
	}
	sbx := &activities.Sandbox{Store: cfg.Store, Layout: layout, Sbx: cfg.Sbx.Sbx, PATH: cfg.Sbx.PATH,
		Env: sandbox.HostEnv(cfg.Env)}
	if ep := w.mcp.endpoints(); ep != nil && ep.Server != nil {
		sbx.ToolTarget = ep.GuestTarget
	}
	nodeActs := &activities.Node{Name: cfg.Node, DataDir: cfg.DataDir, Version: cfg.Version, StartedAt: node.StartedAt,
		Store: cfg.Store, Env: cfg.Env, Adapters: node.Adapters, Groups: records}
	w.node.RegisterActivity(nodeActs)
	w.node.RegisterActivity(sbx)
	w.node.RegisterActivity(&activities.Checkpoints{Store: cfg.Store, Layout: layout})
	w.node.RegisterActivity(&activities.Runtimes{Store: cfg.Store, Node: cfg.Node, Table: w.runtimes, Permissions: w.permissions, Groups: records,
		Poke:   starter.Poke,
		Layout: layout, Sandbox: sbx, Log: cfg.Logger.With("component", "runtimes"), Pause: cfg.Pause, Env: cfg.Env,
		ReadyTimeout: cfg.Lifecycle.ReadyTimeout, Tools: toolBackend, MCP: w.mcp.endpoints()})
	w.node.RegisterActivity(&activities.Workspaces{Store: cfg.Store, Layout: layout, Sandbox: sbx, PATH: envValue(cfg.Env, "PATH"),
		Live: func(s uuid.UUID) bool { _, _, ok := w.runtimes.Get(s); return ok }, Pause: cfg.Pause, Fail: cfg.Fail})
	if cfg.Register != nil {
		cfg.Register(w.shared, w.node)
	}

	if err := workflows.EnsureReconcileSchedule(ctx, cfg.Client, cfg.Lifecycle.ReconcileInterval); err != nil {
		// Reconcile only heals lost pokes; a node that cannot create it still serves.
		cfg.Logger.Warn("reconcile schedule", "error", err)
	}
	if err := w.shared.Start(); err != nil {
		w.mcp.close()
		return nil, fmt.Errorf("start worker for queue %s: %w", contract.TaskQueue, err)
	}
	// Even without a host store now: its hosts may have moved while it had one.
	stopMovedSandboxes(ctx, cfg, sbx)
	if err := w.node.Start(); err != nil {
		w.shared.Stop()
		w.mcp.close()
		return nil, fmt.Errorf("start worker for queue %s: %w", contract.NodeTaskQueue(cfg.Node), err)
	}

	beatCtx, cancel := context.WithCancel(context.Background())
	w.stopBeat, w.beatDone = cancel, make(chan struct{})
	// Serving now: what a killed predecessor left started is retried here at once. Then this
	// process, which started with no runtime, frees the slots its predecessors held (its
	// children were reaped above). The node is live from its registration on, so a wake may
	// already have placed a slot here: that one stays.
	go func() {
		log := cfg.Logger.With("component", "predecessor")
		failPredecessorActivities(beatCtx, cfg.Client, cfg.Namespace, pred, log)
		if err := cfg.Store.ClearNodePlacements(beatCtx, cfg.Node, node.StartedAt); err != nil {
			log.Warn("free the slots of the node's previous worker", "error", err)
		}
	}()
	w.lastBeat.Store(time.Now().UnixNano()) // registered just now
	go w.heartbeat(beatCtx, cfg, node)
	w.fenceDone = make(chan struct{})
	go w.fence(beatCtx, cfg, FenceAfter, sbx)
	w.sandboxDone = make(chan struct{})
	go w.probeSandbox(beatCtx, cfg, sbx)
	w.clisDone = make(chan struct{})
	go w.probeCLIs(beatCtx, cfg, nodeActs)
	go w.runtimes.RunWatchdog(beatCtx, cfg.Watchdog, func(c Crossing) { recycleSignal(cfg, c) })
	cfg.Logger.Info("workers started", "node", cfg.Node,
		"queues", []string{contract.TaskQueue, contract.NodeTaskQueue(cfg.Node)})
	return w, nil
}

// movedSandboxesWithin bounds the start-up sweep of sandboxes whose hosts moved away: well
// under NodeStaleAfter, as the node has registered but not yet heartbeats.
const movedSandboxesWithin = 10 * time.Second

// sandboxFenceWithin bounds a fence's stop of the sandboxes in the host store.
const sandboxFenceWithin = 2 * time.Minute

// stopMovedSandboxes stops this node's sandboxes whose runtime hosts moved to another node
// sharing its host store while it was fenced, before the node serves its queue (so no
// acquire here races the sweep). A node without a usable `sbx` has none; a failure is logged
// and the node serves anyway (an acquire here still fences its own host's orphan, and the
// fence stopped the store's sandboxes when it lost its heartbeat while alive).
func stopMovedSandboxes(ctx context.Context, cfg Config, sbx *activities.Sandbox) {
	ctx, cancel := context.WithTimeout(ctx, movedSandboxesWithin)
	defer cancel()
	stopped, err := sbx.StopMovedSandboxes(ctx, activities.StopMovedSandboxesInput{Node: cfg.Node})
	if len(stopped) > 0 {
		cfg.Logger.Warn("stopped sandboxes whose runtime hosts moved to another node while this one was fenced",
			"node", cfg.Node, "sandboxes", stopped)
	}
	if err != nil && !contract.Is(err, domain.ErrTypeSandboxUnavailable) {
		cfg.Logger.Warn("sweep of sandboxes whose hosts moved away", "node", cfg.Node, "error", err)
	}
}

// envValue is name's value in env ("" when unset); the last entry wins, as in exec.Cmd.
func envValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}

// startProcessGroups kills and reaps the provider process groups a previous worker of this
// node left running (it was killed before it could), before this one serves any activity,
// and prepares the records of the groups this one will start.
func startProcessGroups(ctx context.Context, dir string, log *slog.Logger) (*procgroup.Recorder, error) {
	// A failed reap leaves its records for the next start; it does not stop this node.
	if _, err := procgroup.Reap(ctx, dir, nil, log); err != nil {
		log.Warn("reap process groups left by a previous worker", "error", err)
	}
	rec, err := procgroup.NewRecorder(dir, nil)
	if err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	return rec, nil
}

// guardAwaitWithin bounds a starting worker's wait for its predecessor's guard (which stops
// sandboxes within two minutes after reaping).
const guardAwaitWithin = 3 * time.Minute

// GuardStopped is what a worker that stopped (not killed) writes to its guard before closing
// the pipe: the guard then leaves the sandboxes alone.
const GuardStopped = "stopped"

// startGuard starts the process guard (argv + args) in a session of its own, so a signal
// meant for the worker's group or terminal does not end it first, with a pipe as its stdin whose
// write end only this process holds (close-on-exec: no provider inherits it). It returns
// that end; nil when argv is empty.
func startGuard(argv []string, args []string) (*os.File, error) {
	if len(argv) == 0 {
		return nil, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("process guard: %w", err)
	}
	defer r.Close()
	cmd := exec.Command(argv[0], append(slices.Clone(argv[1:]), args...)...)
	cmd.Stdin, cmd.Stderr = r, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("process guard: %w", err)
	}
	go func() { _ = cmd.Wait() }()
	return w, nil
}

// Workflows maps each workflow type name the contract starts (contract.Type*) to its code;
// registering by these names keeps what clients start and what workers run the same.
func Workflows() map[string]any {
	return map[string]any{
		contract.TypeNodeProbe:            workflows.NodeProbe,
		contract.TypeRoomSession:          workflows.RoomSession,
		contract.TypeRuntimeHost:          workflows.RuntimeHost,
		contract.TypeReconcile:            workflows.Reconcile,
		contract.TypeSandboxProbe:         workflows.SandboxProbe,
		contract.TypeSandboxInventory:     workflows.SandboxInventory,
		contract.TypeContinuityInspection: workflows.ContinuityInspection,
		contract.TypeContinuityReset:      workflows.ContinuityReset,
		contract.TypeCheckpointDeletion:   workflows.CheckpointDeletion,
		contract.TypeWorkspaceOp:          workflows.WorkspaceOp,
		contract.TypeTemplateApply:        workflows.TemplateApply,
		contract.TypeHostCleanup:          workflows.HostCleanup,
		contract.TypeHostMeasure:          workflows.HostMeasure,
		contract.TypeHostNetwork:          workflows.HostNetwork,
		contract.TypeCleanupInspection:    workflows.CleanupInspection,
		contract.TypeRemovalInspection:    workflows.RemovalInspection,
		contract.TypeGitHubReadiness:      workflows.GitHubReadiness,
		contract.TypeTemplateCheck:        workflows.TemplateCheck,
	}
}

// registerShared registers every workflow and the machine-independent activities; they all
// run on the shared queue.
func registerShared(w worker.Registry, st *store.Store, c client.Client, l activities.Lifecycle) {
	for name, fn := range Workflows() {
		w.RegisterWorkflowWithOptions(fn, workflow.RegisterOptions{Name: name})
	}
	w.RegisterActivity(&activities.WorkspaceRecords{Store: st})
	w.RegisterActivity(&activities.Sessions{Store: st, Lifecycle: l})
	hosts := &roomctl.Hosts{Client: c}
	w.RegisterActivity(&activities.Hosts{Store: st, Leases: hosts, Members: hosts})
}

// Stop stops polling, lets running activities finish within the stop timeout, and stops the
// heartbeat. It is safe to call more than once.
func (w *Workers) Stop() {
	w.stopOnce.Do(func() {
		// Handshakes in flight end now; turns get the stop timeout to finish.
		closing, cancel := context.WithTimeout(context.Background(), 2*provider.ChildShutdownGrace)
		w.runtimes.Close(closing)
		cancel()
		var wg sync.WaitGroup
		for _, wk := range []worker.Worker{w.shared, w.node} {
			wg.Add(1)
			go func() { defer wg.Done(); wk.Stop() }()
		}
		wg.Wait()
		// Activities have finished or been abandoned: no child outlives the worker.
		ctx, cancel := context.WithTimeout(context.Background(), 2*provider.ChildShutdownGrace)
		w.runtimes.Shutdown(ctx)
		cancel()
		if w.guard != nil {
			_, _ = w.guard.WriteString(GuardStopped + "\n")
			_ = w.guard.Close() // nothing is left for it: it finds no record and exits
		}
		w.stopBeat()
		<-w.beatDone
		<-w.fenceDone
		<-w.sandboxDone
		<-w.clisDone
		w.mcp.close()
	})
}

// Runtimes is this worker process's node runtime registry.
func (w *Workers) Runtimes() *RuntimeRegistry { return w.runtimes }

// Permissions is the broker this node's runtimes ask before running a tool.
func (w *Workers) Permissions() *permission.Broker { return w.permissions }

// Fatal delivers the error that made this node stop serving, e.g. another live worker
// took its name over. The process should exit.
func (w *Workers) Fatal() <-chan error { return w.fatal }

// sandboxReprobeInterval (a variable for tests) is how often a worker probes its `sbx` again after the probe at
// its start: a daemon that stopped or came back is seen by placement within a minute.
var sandboxReprobeInterval = time.Minute

// probeSandbox records the node's `sbx` support on its node row, at once and every
// sandboxReprobeInterval, so sandboxed runtimes are placed only where they can run.
func (w *Workers) probeSandbox(ctx context.Context, cfg Config, sbx *activities.Sandbox) {
	defer close(w.sandboxDone)
	var last domain.SandboxSupport
	t := time.NewTicker(sandboxReprobeInterval)
	defer t.Stop()
	for {
		support, _ := sbx.ProbeSandboxSupport(ctx, activities.ProbeSandboxInput{})
		if ctx.Err() != nil {
			return
		}
		// Written every time (one row a minute): a row the heartbeat re-registered starts unprobed.
		if err := cfg.Store.SetNodeSandbox(ctx, cfg.Node, support.Status); err != nil {
			if ctx.Err() == nil {
				cfg.Logger.Warn("record sandbox support", "node", cfg.Node, "error", err)
			}
		} else if support.Status != last {
			last = support.Status
			cfg.Logger.Info("sandbox support", "node", cfg.Node, "status", support.Status, "detail", support.Detail)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (w *Workers) heartbeat(ctx context.Context, cfg Config, node domain.Node) {
	defer close(w.beatDone)
	t := time.NewTimer(cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// Bounded, and retried within a second after a failure: one slow write must not
			// let the beat lapse into the fence.
			sent := time.Now() // the row's time is not earlier than this
			bctx, cancel := context.WithTimeout(ctx, heartbeatBound)
			err := cfg.Store.HeartbeatNode(bctx, node)
			if errors.Is(err, store.ErrNotFound) {
				// The row is gone (an operator cleaned the table) or no longer ours.
				if _, err = cfg.Store.RegisterNode(bctx, node); err == nil {
					select { // the new row is unprobed: probe the CLIs again
					case w.registered <- struct{}{}:
					default:
					}
				}
			}
			cancel()
			if errors.Is(err, store.ErrNodeTaken) {
				cfg.Logger.Error("another worker serves this node name; this one stops", "node", cfg.Node, "error", err)
				w.fatal <- err
				return
			}
			next := cfg.HeartbeatInterval
			if err == nil {
				w.lastBeat.Store(sent.UnixNano())
			} else {
				next = heartbeatRetry
			}
			if err != nil && ctx.Err() == nil {
				cfg.Logger.Warn("node heartbeat failed", "node", cfg.Node, "error", err)
			}
			t.Reset(next)
		}
	}
}

// heartbeatBound bounds one heartbeat write; heartbeatRetry is how soon a failed one is
// tried again.
const (
	heartbeatBound = 2 * time.Second
	heartbeatRetry = time.Second
)

// FenceAfter is how long a node with a shared host store goes without a recorded heartbeat
// before it kills the runtimes whose rooms may move: others see it stale after
// domain.NodeStaleAfter but move its rooms only after domain.NodeFencedAfter, so the fence
// (checked every second, killing at once) has done its work by then.
const FenceAfter = domain.NodeStaleAfter - domain.NodeHeartbeatInterval

// fence kills the node's movable runtimes whenever its last recorded heartbeat is older
// than after (once per outage), when its host store is shared. A beat's time is taken
// before it is sent, so it is never later than the database's time for it (clocks agreeing).
func (w *Workers) fence(ctx context.Context, cfg Config, after time.Duration, sbx *activities.Sandbox) {
	defer close(w.fenceDone)
	if cfg.HostStore == "" {
		return
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	fenced := int64(0) // the heartbeat the last fence was for
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		last := w.lastBeat.Load()
		if last == fenced || time.Since(time.Unix(0, last)) < after {
			continue
		}
		fenced = last
		n := w.runtimes.Fence(ctx)
		cfg.Logger.Error("no heartbeat recorded for too long: another node sharing the host store may run this node's rooms, so their runtimes were killed",
			"node", cfg.Node, "host_store", cfg.HostStore, "last_heartbeat", time.Unix(0, last).UTC(), "runtimes", n)
		// What the providers left running in their microVMs outlives their `sbx exec`:
		// the sandboxes whose roots are in the store stop too (a node without sbx has none).
		sctx, cancel := context.WithTimeout(ctx, sandboxFenceWithin)
		stopped, err := sbx.StopSandboxesInStore(sctx, activities.StopSandboxesInStoreInput{})
		cancel()
		if len(stopped) > 0 || (err != nil && !contract.Is(err, domain.ErrTypeSandboxUnavailable)) {
			cfg.Logger.Error("fenced: sandboxes whose roots are in the host store stopped", "node", cfg.Node,
				"sandboxes", stopped, "error", err)
		}
	}
}

// cliRetryInterval (a variable for tests) is how long a worker waits to probe its provider
// CLIs again after a probe that could not be recorded.
var cliRetryInterval = time.Minute

// probeCLIs records the node's provider CLIs at start, when the node is configured to, and
// again whenever the heartbeat had to register the node again (a new row reads as not
// probed) or the last probe could not be recorded.
func (w *Workers) probeCLIs(ctx context.Context, cfg Config, node *activities.Node) {
	defer close(w.clisDone)
	if !cfg.ProbeCLIs {
		return
	}
	for {
		var again <-chan time.Time
		clis, err := node.ProbeCLIs(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			cfg.Logger.Warn("probe provider CLIs", "node", cfg.Node, "error", err)
			again = time.After(cliRetryInterval)
		}
		for _, c := range clis {
			if c.Problem != "" {
				cfg.Logger.Info("provider CLI unavailable", "node", cfg.Node, "command", c.Command, "problem", c.Problem)
				continue
			}
			cfg.Logger.Info("provider CLI", "node", cfg.Node, "command", c.Command, "version", c.Version, "path", c.Path, "source", c.Source)
		}
		select {
		case <-ctx.Done():
			return
		case <-w.registered:
		case <-again:
		}
	}
}

// recycleSignal tells a session's workflow that the watchdog found its runtime over a bound;
// the workflow recycles it at its next turn boundary. A lost signal leaves the runtime as it
// was: the watchdog reports each generation once, so the next start is watched afresh.
func recycleSignal(cfg Config, c Crossing) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := cfg.Client.SignalWorkflow(ctx, contract.RoomSessionID(c.RuntimeSession), "", contract.SignalRecycle,
		contract.RecycleSignal{Recycle: c.Recycle})
	if err != nil && !contract.IsNotFound(err) {
		cfg.Logger.Warn("signal a watchdog recycle", "runtime_session", c.RuntimeSession, "error", err)
	}
}
