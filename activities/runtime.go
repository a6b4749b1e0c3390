package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/tools"
	"github.com/jam-dev/jam/internal/workspace"
)

// RuntimeTable is the node's runtime registry as the runtime activities use it. The
// registry lives in workers, which imports this package, hence the interface.
type RuntimeTable interface {
	Start(ctx context.Context, spec provider.Spec) (provider.Runtime, provider.Prepared, error)
	RunTurn(ctx context.Context, session uuid.UUID, generation int64, turn provider.Turn) (provider.TurnResult, error)
	Teardown(ctx context.Context, session uuid.UUID, reason domain.CheckpointReason) error
	Interrupt(ctx context.Context, session uuid.UUID, generation int64, turnID string) error
	Steer(ctx context.Context, session uuid.UUID, generation int64, msgs []provider.Message) error
	// Get reports the session's live runtime and its generation, if the node tracks one.
	Get(session uuid.UUID) (provider.Runtime, int64, bool)
}

// turnHeartbeat is how often RunTurn heartbeats while the provider works.
const turnHeartbeat = 5 * time.Second

// Runtimes holds the activities that run provider runtimes on this node. It is registered
// only on the node's task queue: the runtime it starts lives in this worker process.
type Runtimes struct {
	Store *store.Store
	// Node is this node's name: the runtimes it starts and ends hold and free its slots.
	Node        string
	Table       RuntimeTable
	Permissions provider.PermissionBroker
	Layout      domain.Layout
	// Sandbox is the node's `sbx` driver source, for sandboxed runtimes.
	Sandbox *Sandbox
	Log     *slog.Logger
	// Groups records the process groups of executable probes while they run (nil: none).
	Groups provider.GroupRecorder
	// Poke signals an owned agent's room session that its room has backlog. A turn's reply
	// that wakes pokes the room's other owned agents at once instead of leaving them for
	// Reconcile. nil pokes no one.
	Poke func(ctx context.Context, b domain.Binding) error
	// Pause is the fault-injection point of crash tests (nil in production).
	Pause func(ctx context.Context, point string)
	// Env is the worker's environment, captured at start: executable resolution reads it,
	// and a host-native provider gets only what provider.HostNativeEnv lets through of it.
	// nil is an empty environment: the startup code injects the snapshot.
	Env []string
	// ReadyTimeout, when set, replaces every catalog row's start-handshake bound (the
	// operator's JAM_PROVIDER_READY_SECS).
	ReadyTimeout time.Duration
	// Tools is what every runtime instance's tool registry acts through (nil: runtimes get
	// no tools but the settlement pair their adapter stages itself).
	Tools tools.Backend
	// MCP serves the tools to this node's runtimes; nil serves none over MCP.
	MCP *MCPEndpoints
}

// MCPEndpoints is the node's MCP server and how a runtime reaches it.
type MCPEndpoints struct {
	Server *tools.MCPServer
	// URL is the endpoint as host-native providers reach it (loopback).
	URL string
	// GuestURL is the endpoint as a sandbox guest reaches it, and GuestTarget the network
	// policy target ("host:port") that lets exactly that through ("" when sandboxes cannot).
	GuestURL    string
	GuestTarget string
	// Bridge is the `jam mcp` stdio bridge's command (host-native providers whose MCP
	// client takes only stdio servers); empty when this process has no jam executable.
	Bridge []string
}

// PrepareRuntimeInput names the runtime session to bring up.
type PrepareRuntimeInput struct {
	RuntimeSession uuid.UUID `json:"runtime_session"`
	// Host and Sandbox name the runtime host whose sandbox a sandboxed session runs in; the
	// caller holds a lease on it. Zero for a host-native session.
	Host    uuid.UUID `json:"host,omitempty"`
	Sandbox string    `json:"sandbox,omitempty"`
	// ConfigGeneration, when set, starts the candidate configuration of that generation
	// instead of the effective one (a template apply); a superseded generation is refused.
	ConfigGeneration int64 `json:"config_generation,omitempty"`
}

// PrepareRuntimeResult describes the live instance.
type PrepareRuntimeResult struct {
	Generation        int64             `json:"generation"`
	ProviderSessionID string            `json:"provider_session_id"`
	Resumed           bool              `json:"resumed"`
	Identity          string            `json:"identity,omitempty"`
	PID               int               `json:"pid"`
	IdlePolicy        domain.IdlePolicy `json:"idle_policy"`
	// Activation says how a sandboxed session's provider state was prepared ("" host-native).
	Activation Activation `json:"activation,omitempty"`
	// Warning is the runtime's readiness warning ("" when none): the session is degraded.
	Warning string `json:"warning,omitempty"`
}

// PrepareRuntime starts a new runtime instance for the session: it issues the next instance
// generation (which fences every older instance out of the store), resolves the provider
// executable, starts the process through the node registry, and records the provider
// session it bound. A session that has bound a provider session resumes exactly that one or
// fails with domain.ErrTypeExactResume.
func (r *Runtimes) PrepareRuntime(ctx context.Context, in PrepareRuntimeInput) (_ PrepareRuntimeResult, retErr error) {
	defer func() {
		// The slot the wake took here: held while the runtime lives, free when it did not
		// start. An attempt that Temporal will retry keeps it (unconfirmed, so it lapses
		// after domain.PlacementPending at most): freed in between, another wake could take
		// it and the retry that starts the runtime would put the node over its capacity.
		var err error
		switch {
		case retErr == nil:
			err = r.Store.ConfirmPlacement(context.WithoutCancel(ctx), in.RuntimeSession, r.Node)
		case !lastAttempt(ctx, retErr):
		default:
			// A runtime the node still tracks (an older one whose teardown failed) may be
			// running: its slot stays confirmed, so the session is not placed elsewhere
			// while it may.
			if _, _, tracked := r.Table.Get(in.RuntimeSession); tracked {
				err = r.Store.ConfirmPlacement(context.WithoutCancel(ctx), in.RuntimeSession, r.Node)
			} else {
				err = r.Store.ReleasePlacement(context.WithoutCancel(ctx), in.RuntimeSession, r.Node)
			}
		}
		if err != nil {
			r.Log.Warn("runtime placement not recorded", "runtime_session", in.RuntimeSession, "error", err)
		}
	}()
	hs, err := r.Store.GetHostSession(ctx, in.RuntimeSession)
	if errors.Is(err, store.ErrNotFound) || (err == nil && hs.Removed) {
		return PrepareRuntimeResult{}, contract.Fail(
			fmt.Sprintf("runtime session %s does not exist or was removed", in.RuntimeSession), domain.ErrTypeNoSession, err)
	}
	if err != nil {
		return PrepareRuntimeResult{}, err
	}
	// The configuration the bound thread ran under: the effective one (before a candidate's).
	threadKind := hs.ProviderSessionKind
	if threadKind == "" {
		threadKind = domain.ThreadKind(hs.Config)
	}
	if in.ConfigGeneration > 0 {
		cfg, err := r.Store.CandidateConfig(ctx, in.RuntimeSession, in.ConfigGeneration)
		if err != nil {
			return PrepareRuntimeResult{}, superseded(err)
		}
		if cfg.Sandbox.Enabled != (in.Host != uuid.Nil) {
			// The runtime was placed by the effective configuration: a candidate that turns
			// sandboxing on or off cannot start in that place. It is refused (the old runtime
			// comes back, the failure is recorded); once the room is dormant it applies.
			return PrepareRuntimeResult{}, contract.Fail(
				"the new configuration turns sandboxing on or off, which cannot replace a live runtime in place; stop the room, then save the template again",
				domain.ErrTypeValidation, nil)
		}
		hs.Config = cfg
	}
	agent, err := r.Store.GetAgent(ctx, hs.AgentID)
	if err != nil {
		return PrepareRuntimeResult{}, fmt.Errorf("agent of runtime session %s: %w", hs.RuntimeSessionID, err)
	}
	room, err := roster(ctx, r.Store, hs, agent)
	if err != nil {
		return PrepareRuntimeResult{}, err
	}
	row, ok := domain.LookupTransport(hs.Config.Transport)
	if !ok || !row.Owned {
		return PrepareRuntimeResult{}, contract.Fail(
			fmt.Sprintf("transport %q is not run by Jam", hs.Config.Transport), domain.ErrTypeUnsupportedTransport, nil)
	}
	worker := r.Env
	if err := missingEnv(ctx, row, hs, r.Node, worker); err != nil {
		return PrepareRuntimeResult{}, err
	}
	// A thread of another kind (the room switched provider or CLI) cannot be resumed by
	// this runtime: it starts a new one. A candidate's is kept on its pending change and
	// swapped in by the commit (store.CommitConfig), so a candidate never committed leaves
	// the old configuration its thread; any other start unbinds the old thread (the room
	// told) only once it started.
	kind := domain.ThreadKind(hs.Config)
	switched := ""
	if hs.ProviderSessionID != "" && threadKind != kind {
		switched, hs.ProviderSessionID, hs.ProviderSessionKind = hs.ProviderSessionID, "", threadKind
	}
	candidateThread := switched != "" && in.ConfigGeneration > 0
	// Heartbeat from here: a restore from a checkpoint may take a while, and a silent
	// attempt would be timed out and raced by its own retry.
	stopBeat := heartbeat(ctx)
	defer stopBeat()
	l, err := r.launch(ctx, hs, row, in, worker)
	if err != nil && contract.Is(err, domain.ErrTypeExactResume) && !hs.Config.RequiresExactResume() && hs.ProviderSessionID != "" {
		// A sandboxed session's state is gone and no checkpoint holds it; without an
		// exact-resume contract it starts over on a new thread, and the room is told.
		if err := r.startOver(ctx, &hs, err); err != nil {
			return PrepareRuntimeResult{}, err
		}
		l, err = r.launch(ctx, hs, row, in, worker)
	}
	if err != nil {
		return PrepareRuntimeResult{}, err
	}
	defer l.release()
	// The environment the provider sees: inside its sandbox when it runs in one.
	seen := l.env
	if l.guestEnv != nil {
		seen = l.guestEnv
	}
	if err := missingKey(row, hs.Config, seen); err != nil {
		return PrepareRuntimeResult{}, startFailure(ctx, err, row, hs, r.Node)
	}
	gen, err := r.Store.BeginRuntimeInstance(ctx, hs.RuntimeSessionID, time.Now())
	if err != nil {
		return PrepareRuntimeResult{}, err
	}
	log := r.Log.With("runtime_session", hs.RuntimeSessionID, "generation", gen)
	spec := provider.Spec{RuntimeSession: hs.RuntimeSessionID, Generation: gen, AgentID: agent.ID, RoomID: hs.RoomID,
		Transport: hs.Config.Transport, Executable: l.exe, Args: l.args, Env: l.env, GuestEnv: l.guestEnv, Dir: l.dir, StateDir: l.stateDir,
		ProviderSessionID: hs.ProviderSessionID, IdlePolicy: hs.Config.IdlePolicy, Settings: hs.Config.Settings, Briefing: agent.Briefing,
		Roster:       room,
		ReadyTimeout: r.readyTimeout(row),
		Permissions:  r.Permissions, Events: r.sink(hs, gen, log), Log: log}
	// What the runtime tells people never carries the values of the variables its template
	// names (as the provider sees them).
	spec.Redactor = provider.NewRedactor(seen, hs.Config.EnvAllowlist)
	// A fence kills it when its room may run on a node sharing this one's host store.
	spec.MayMove = placementAsk(hs.Config, "").Movable
	if in.Host != uuid.Nil && domain.ResolvePlacement(hs.Config.Placement) == domain.PlacementShared {
		spec.SharedHost = in.Host // adapters that can run one process for the host's rooms do
	}
	sess, err := r.toolSession(&spec, in.Host != uuid.Nil)
	if err != nil {
		return PrepareRuntimeResult{}, err
	}
	defer func() {
		if retErr != nil {
			// Whatever started is torn down: its token must not outlive it.
			r.revokeTools(hs.RuntimeSessionID, gen)
		}
	}()
	rt, p, err := r.Table.Start(ctx, spec)
	if errors.Is(err, provider.ErrExactResumeUnavailable) {
		if c := l.activation.checkpoint; c != nil {
			_ = r.observe(ctx, *c, hs, domain.ResumeFailed, domain.Truncate(err.Error(), 500))
		}
		if !hs.Config.RequiresExactResume() {
			// No exact-resume contract: the room continues on a new thread, and is told so.
			log.Warn("provider thread not resumable; starting a new one (resume policy fresh)", "previous", hs.ProviderSessionID, "error", err)
			if rerr := r.startOver(ctx, &hs, err); rerr != nil {
				return PrepareRuntimeResult{}, rerr
			}
			spec.ProviderSessionID, l.activation = "", activated{kind: ActivationFresh}
			rt, p, err = r.Table.Start(ctx, spec)
		}
	}
	l.release() // the provider has started (or failed): the env file has served
	if st, ok := rt.(provider.DispositionStager); ok && sess != nil && err == nil {
		sess.Bind(st)
	}
	if err != nil {
		return PrepareRuntimeResult{}, startFailure(ctx, err, row, hs, r.Node)
	}
	if p.Version != "" && p.Version != hs.ProviderVersion {
		// Checkpoints record it, and continuity inspection reports a change of it.
		if err := r.Store.RecordProviderVersion(ctx, hs.RuntimeSessionID, p.Version, time.Now()); err != nil {
			log.Warn("provider version not recorded", "version", p.Version, "error", err)
		}
	}
	if c := l.activation.checkpoint; c != nil {
		// Succeeded only when the provider confirmed the very identity it was asked for.
		outcome, detail := domain.ResumeSucceeded, string(l.activation.kind)
		if !p.Resumed || p.ProviderSessionID != hs.ProviderSessionID {
			outcome, detail = domain.ResumeFailed, fmt.Sprintf("the provider answered with session %q", p.ProviderSessionID)
		}
		if err := r.observe(ctx, *c, hs, outcome, detail); err != nil {
			_ = r.Table.Teardown(context.WithoutCancel(ctx), hs.RuntimeSessionID, domain.CheckpointBeforeStop)
			return PrepareRuntimeResult{}, err
		}
		if outcome == domain.ResumeFailed {
			_ = r.Table.Teardown(context.WithoutCancel(ctx), hs.RuntimeSessionID, domain.CheckpointBeforeStop)
			return PrepareRuntimeResult{}, contract.Fail(
				fmt.Sprintf("runtime session %s did not resume provider session %s: %s", hs.RuntimeSessionID, hs.ProviderSessionID, detail),
				domain.ErrTypeExactResume, nil)
		}
	}
	switch {
	case candidateThread && p.ProviderSessionID != "":
		if err := r.Store.RecordCandidateThread(ctx, hs.RuntimeSessionID, in.ConfigGeneration, p.ProviderSessionID, kind, time.Now()); err != nil {
			_ = r.Table.Teardown(context.WithoutCancel(ctx), hs.RuntimeSessionID, domain.CheckpointBeforeStop)
			return PrepareRuntimeResult{}, superseded(fmt.Errorf("record the candidate thread of %s: %w", hs.RuntimeSessionID, err))
		}
	case switched != "" && !candidateThread:
		reason := fmt.Sprintf("the room now runs %s (was %s): a thread of one provider cannot be resumed by another, so the room continues on a new thread",
			kind, hs.ProviderSessionKind)
		if err := r.Store.ReplaceProviderSession(ctx, hs.RuntimeSessionID, switched, reason, time.Now()); err != nil {
			_ = r.Table.Teardown(context.WithoutCancel(ctx), hs.RuntimeSessionID, domain.CheckpointBeforeStop)
			return PrepareRuntimeResult{}, err
		}
	}
	if !candidateThread && p.ProviderSessionID != "" && (p.ProviderSessionID != hs.ProviderSessionID || hs.ProviderSessionKind == "") {
		if err := r.Store.BindProviderSession(ctx, hs.RuntimeSessionID, p.ProviderSessionID, kind, time.Now()); err != nil {
			// Without the binding a restart could not resume this thread: do not run on it.
			_ = r.Table.Teardown(context.WithoutCancel(ctx), hs.RuntimeSessionID, domain.CheckpointBeforeStop)
			return PrepareRuntimeResult{}, fmt.Errorf("record provider session of %s: %w", hs.RuntimeSessionID, err)
		}
	}
	if in.ConfigGeneration > 0 && r.Pause != nil {
		r.Pause(ctx, "apply.candidate_started")
	}
	warning := r.readiness(ctx, hs.RuntimeSessionID, gen, rt)
	r.watch(ctx, hs, gen, in.Host != uuid.Nil, spec.SharedHost != uuid.Nil)
	return PrepareRuntimeResult{Generation: gen, ProviderSessionID: p.ProviderSessionID, Resumed: p.Resumed,
		Identity: p.Identity, PID: p.PID, IdlePolicy: rt.IdlePolicy(), Activation: l.activation.kind, Warning: warning}, nil
}

// readiness is the runtime instance's readiness warning, recorded for the session (the room
// is told when it appears, changes or clears). Not recording it changes nothing the runtime
// does, so a failure is logged, not returned.
func (r *Runtimes) readiness(ctx context.Context, session uuid.UUID, gen int64, rt provider.Runtime) string {
	warning := domain.Truncate(rt.ReadinessWarning(), 1000)
	if err := r.Store.RecordReadiness(context.WithoutCancel(ctx), session, gen, warning, time.Now()); err != nil {
		r.Log.Warn("readiness not recorded", "runtime_session", session, "generation", gen, "error", err)
	}
	return warning
}

// startOver unbinds the provider thread of a session without an exact-resume contract that
// cannot be resumed (why: err), telling the room; hs then starts a new thread.
func (r *Runtimes) startOver(ctx context.Context, hs *domain.HostSession, err error) error {
	reason := "the provider thread could not be resumed (" + (&provider.Redactor{}).Redact(domain.Truncate(err.Error(), 500)) +
		"); the template's resume policy is fresh: the room continues on a new thread"
	if err := r.Store.ReplaceProviderSession(ctx, hs.RuntimeSessionID, hs.ProviderSessionID, reason, time.Now()); err != nil {
		return err
	}
	hs.ProviderSessionID = ""
	return nil
}

// lastAttempt reports whether an activity attempt that failed with err is its last: err is
// not retryable, or the attempt is the last its retry policy allows. Without a retry policy
// (a test environment) every attempt is the last.
func lastAttempt(ctx context.Context, err error) bool {
	if !activity.IsActivity(ctx) {
		return true
	}
	info := activity.GetInfo(ctx)
	return isLastAttempt(err, info.Attempt, info.RetryPolicy)
}

func isLastAttempt(err error, attempt int32, p *temporal.RetryPolicy) bool {
	var app *temporal.ApplicationError
	if errors.As(err, &app) && (app.NonRetryable() || (p != nil && slices.Contains(p.NonRetryableErrorTypes, app.Type()))) {
		return true
	}
	return p == nil || (p.MaximumAttempts > 0 && attempt >= p.MaximumAttempts)
}

// readyTimeout is the start-handshake bound of a row: the operator's override, else the
// catalog's.
func (r *Runtimes) readyTimeout(row domain.TransportSpec) time.Duration {
	if r.ReadyTimeout > 0 {
		return r.ReadyTimeout
	}
	return row.Ready()
}

// launch is how the session's provider starts: in its host's sandbox, or host-native with
// the resolved executable in the session's workspace. worker is the worker's environment:
// resolution reads it, and only what HostNativeEnv lets through reaches the provider.
func (r *Runtimes) launch(ctx context.Context, hs domain.HostSession, row domain.TransportSpec, in PrepareRuntimeInput, worker []string) (launch, error) {
	if in.Host != uuid.Nil || hs.Config.Sandbox.Enabled {
		if in.Host == uuid.Nil || r.Sandbox == nil {
			return launch{}, contract.Fail(
				fmt.Sprintf("runtime session %s is sandboxed but no runtime host was leased", hs.RuntimeSessionID), domain.ErrTypeValidation, nil)
		}
		return r.sandboxLaunch(ctx, hs, row, in, worker)
	}
	extra := slices.Clone(row.Env)
	stateDir := ""
	if row.SessionState {
		// Until host allocation exists a host-native session is its own Dedicated host.
		paths, err := workspace.ManagedPaths(r.Layout, hs.RuntimeSessionID)
		if err != nil {
			return launch{}, err
		}
		state, dir, err := providerStateEnv(paths, row)
		if err != nil {
			return launch{}, err
		}
		extra, stateDir = append(extra, state...), dir
	}
	env, err := provider.HostNativeEnv(worker, row, hs.Config.EnvAllowlist, extra...)
	if err != nil {
		return launch{}, contract.Fail(err.Error(), domain.ErrTypeEnvRefused, err)
	}
	exe, err := r.resolve(ctx, row, hs.Config, worker, env)
	if err != nil {
		return launch{}, contract.Fail(err.Error(), domain.ErrTypeExecutableRefused, err)
	}
	dir, err := r.workspace(hs)
	if err != nil {
		return launch{}, err
	}
	args := hs.Config.Args
	if len(args) == 0 {
		args = row.Args
	}
	return launch{exe: exe.Path, args: args, dir: dir, env: env, stateDir: stateDir}, nil
}

// resolve finds the provider's executable: the environment default is the worker's (an
// operator's JAM_<COMMAND>_BIN), the PATH searched and the probes' environment the
// provider's own.
func (r *Runtimes) resolve(ctx context.Context, row domain.TransportSpec, c domain.TemplateConfig, worker, env []string) (provider.ResolvedExecutable, error) {
	pins, err := readPins(ctx, r.Store)
	if err != nil {
		return provider.ResolvedExecutable{}, err
	}
	return resolveCLI(ctx, row, c.Command, pins, worker, env, r.Groups)
}

// resolveCLI resolves row's command as a host-native runtime does (explicit: the template's
// own executable, "" for none); the node's CLI probe asks the same question.
func resolveCLI(ctx context.Context, row domain.TransportSpec, explicit string, pins map[string]string, worker, env []string,
	groups provider.GroupRecorder) (provider.ResolvedExecutable, error) {
	req := provider.ExecutableRequest{Command: row.Command, Explicit: explicit, Env: envLookup(worker),
		PATH: envLookup(env)("PATH"), ProbeEnv: env, Pins: pins, Groups: groups}
	return provider.ResolveExecutable(ctx, req)
}

// readPins reads the machine pin table setting (command name -> absolute path).
func readPins(ctx context.Context, st *store.Store) (map[string]string, error) {
	s, err := st.GetSetting(ctx, domain.SettingProviderExecutables)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var pins map[string]string
	if err := json.Unmarshal(s.Value, &pins); err != nil {
		return nil, fmt.Errorf("setting %s: %w", domain.SettingProviderExecutables, err)
	}
	return pins, nil
}

func envLookup(env []string) func(string) string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return func(k string) string { return m[k] }
}

// workspace is the directory the provider works in: the operator's checkout for a
// DirectHost workspace, else the session's managed workspace. Until host allocation exists
// a host-native session is its own Dedicated host (host id = runtime session id).
func (r *Runtimes) workspace(hs domain.HostSession) (string, error) {
	if dir := hs.Config.Sandbox.DirectHostPath(); dir != "" {
		return dir, nil
	}
	dir := r.Layout.SessionWorkspace(hs.RuntimeSessionID, hs.RuntimeSessionID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("workspace of %s: %w", hs.RuntimeSessionID, err)
	}
	return dir, nil
}

// sink writes the instance's events to the event log as runtime_activity, fenced on its
// generation: a retired instance's late events are dropped by the store.
func (r *Runtimes) sink(hs domain.HostSession, gen int64, log *slog.Logger) provider.Sink {
	return func(e provider.AgentEvent) {
		payload, err := json.Marshal(e)
		if err != nil {
			log.Warn("runtime event not encodable", "kind", e.Kind, "error", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = r.Store.AppendRuntimeActivity(ctx, hs.RuntimeSessionID, gen, hs.RoomID, hs.AgentID,
			[]json.RawMessage{payload}, time.Now())
		if err != nil && !errors.Is(err, store.ErrFenced) {
			log.Warn("runtime event not recorded", "kind", e.Kind, "error", err)
		}
	}
}

// RunTurnInput names the live instance that answers the session's queued messages.
type RunTurnInput struct {
	RuntimeSession uuid.UUID `json:"runtime_session"`
	Generation     int64     `json:"generation"`
	// TurnID identifies the turn in events; the workflow derives it deterministically.
	TurnID string `json:"turn_id"`
}

// RunTurnResult is how the turn ended and what it settled.
type RunTurnResult struct {
	Outcome   domain.TurnOutcome `json:"outcome"`
	Messages  int                `json:"messages"`
	Settled   int                `json:"settled"`
	Unsettled int                `json:"unsettled"`
	Error     string             `json:"error,omitempty"`
	// Warning is the runtime's readiness warning after the turn ("" when none).
	Warning string `json:"warning,omitempty"`
}

// RunTurn delivers every unsettled message of the session's room to its live runtime as one
// turn and, only when the turn completes, commits its settlement (fenced on the instance
// generation, idempotent on retry). A queue with nothing unsettled, or only context, is an
// empty result: a retried activity whose first attempt committed finds nothing to do. A
// committed reply that wakes pokes the room's other owned agents.
func (r *Runtimes) RunTurn(ctx context.Context, in RunTurnInput) (RunTurnResult, error) {
	hs, err := r.Store.GetHostSession(ctx, in.RuntimeSession)
	if err != nil {
		return RunTurnResult{}, fmt.Errorf("run turn of %s: %w", in.RuntimeSession, err)
	}
	rows, err := r.Store.ListUnsettled(ctx, hs.AgentID, &hs.RoomID)
	if err != nil {
		return RunTurnResult{}, err
	}
	if !anyWakes(rows) {
		// Context alone (past the hop limit) asks for no turn: it waits for one that does.
		return RunTurnResult{Outcome: domain.TurnComplete}, nil
	}
	turn := provider.Turn{ID: in.TurnID}
	if self, err := r.Store.GetAgent(ctx, hs.AgentID); err == nil {
		// The runtime hears who joined or left since its last turn.
		if room, err := roster(ctx, r.Store, hs, self); err == nil {
			turn.Roster = &room
		} else {
			r.Log.Warn("room roster not read; the turn says nothing of it", "runtime_session", hs.RuntimeSessionID, "error", err)
		}
	}
	for _, row := range rows {
		m, err := r.message(ctx, row)
		if err != nil {
			return RunTurnResult{}, err
		}
		turn.Messages = append(turn.Messages, m)
	}
	stop := heartbeat(ctx)
	res, err := r.Table.RunTurn(ctx, in.RuntimeSession, in.Generation, turn)
	stop()
	if err != nil {
		if errors.Is(err, provider.ErrRuntimeExited) || errors.Is(err, provider.ErrRuntimeNotLive) {
			return RunTurnResult{}, contract.Fail(err.Error(), domain.ErrTypeRuntimeNotLive, err)
		}
		return RunTurnResult{}, err
	}
	if id := res.ProviderSessionID; id != "" && id != hs.ProviderSessionID {
		// The turn made a pinned provider session resumable: bound before anything of the
		// turn commits, so a restart resumes it. Without the binding the turn does not count.
		if err := r.Store.BindProviderSession(ctx, in.RuntimeSession, id, domain.ThreadKind(hs.Config), time.Now()); err != nil {
			return RunTurnResult{}, fmt.Errorf("record provider session of %s: %w", in.RuntimeSession, err)
		}
	}
	out := RunTurnResult{Outcome: res.Outcome, Messages: len(turn.Messages), Unsettled: len(res.Plan.Unsettled)}
	if rt, gen, ok := r.Table.Get(in.RuntimeSession); ok && gen == in.Generation {
		out.Warning = r.readiness(ctx, in.RuntimeSession, in.Generation, rt)
	}
	if res.Err != nil {
		out.Error = domain.Truncate(res.Err.Error(), 1000)
	}
	if res.Outcome != domain.TurnComplete || len(res.Plan.Settles) == 0 {
		return out, nil
	}
	commit := store.TurnCommit{RuntimeSession: in.RuntimeSession, Generation: in.Generation, AgentID: hs.AgentID,
		TurnID: in.TurnID, At: time.Now()}
	for _, s := range res.Plan.Settles {
		commit.Settles = append(commit.Settles, store.TurnSettle{MessageID: s.MessageID, How: s.How, Text: s.Text})
	}
	done, err := r.Store.CommitTurn(ctx, commit)
	if err != nil {
		if errors.Is(err, store.ErrFenced) {
			return RunTurnResult{}, contract.Fail(err.Error(), domain.ErrTypeRuntimeNotLive, err)
		}
		return RunTurnResult{}, err
	}
	out.Settled = len(commit.Settles)
	r.wakeOthers(ctx, hs, done.Replies)
	return out, nil
}

// message renders a queued room message for an envelope, naming its author and marking
// context (a row past the room's hop limit).
func (r *Runtimes) message(ctx context.Context, row domain.Inbound) (provider.Message, error) {
	m, err := r.Store.GetMessage(ctx, row.MessageID)
	if err != nil {
		return provider.Message{}, err
	}
	pm := provider.Message{ID: m.ID, RoomID: m.RoomID, Seq: m.Seq, AuthorKind: m.AuthorKind,
		AuthorAgentID: m.AuthorAgentID, AuthorName: m.AuthorHuman, Text: m.Text, Context: row.ContextOnly}
	if m.AuthorAgentID != nil {
		if a, err := r.Store.GetAgent(ctx, *m.AuthorAgentID); err == nil {
			pm.AuthorName = a.Name
		}
	}
	return pm, nil
}

// SteerTurnInput names the live instance whose running turn takes the room's new messages.
type SteerTurnInput struct {
	RuntimeSession uuid.UUID `json:"runtime_session"`
	Generation     int64     `json:"generation"`
}

// SteerTurnResult says what became of the room's unsettled messages.
type SteerTurnResult struct {
	// Messages is how many unsettled messages were offered to the turn (its own included:
	// the runtime skips those it already has).
	Messages int `json:"messages"`
	// NotSteered: the runtime cannot steer, or no turn runs any more; the messages are the
	// next turn's.
	NotSteered bool `json:"not_steered,omitempty"`
}

// SteerTurn offers the room's unsettled messages to the session's running turn (Codex
// turn/steer); they are settled with it. A runtime that cannot steer, or a turn that ended,
// leaves them for the next turn.
func (r *Runtimes) SteerTurn(ctx context.Context, in SteerTurnInput) (SteerTurnResult, error) {
	hs, err := r.Store.GetHostSession(ctx, in.RuntimeSession)
	if err != nil {
		return SteerTurnResult{}, fmt.Errorf("steer turn of %s: %w", in.RuntimeSession, err)
	}
	rows, err := r.Store.ListUnsettled(ctx, hs.AgentID, &hs.RoomID)
	if err != nil {
		return SteerTurnResult{}, err
	}
	if !anyWakes(rows) {
		return SteerTurnResult{}, nil // context alone asks nothing of the running turn
	}
	msgs := make([]provider.Message, 0, len(rows))
	for _, row := range rows {
		m, err := r.message(ctx, row)
		if err != nil {
			return SteerTurnResult{}, err
		}
		msgs = append(msgs, m)
	}
	out := SteerTurnResult{Messages: len(msgs)}
	err = r.Table.Steer(ctx, in.RuntimeSession, in.Generation, msgs)
	switch {
	case errors.Is(err, provider.ErrSteerUnsupported), errors.Is(err, provider.ErrNoTurn), errors.Is(err, provider.ErrRuntimeNotLive):
		out.NotSteered = true
		return out, nil
	case err != nil:
		return SteerTurnResult{}, err
	}
	return out, nil
}

// TeardownRuntimeInput names the session whose runtime stops, and why.
type TeardownRuntimeInput struct {
	RuntimeSession uuid.UUID               `json:"runtime_session"`
	Generation     int64                   `json:"generation"`
	Reason         domain.CheckpointReason `json:"reason"`
}

// TeardownRuntime stops the session's runtime on this node, reaps its process group and
// records the stop with its reason. A session with no live runtime here is already torn
// down; a failed teardown keeps the child tracked and the activity retries.
func (r *Runtimes) TeardownRuntime(ctx context.Context, in TeardownRuntimeInput) error {
	// A runtime being torn down acts no more, whether or not its teardown succeeds.
	r.revokeTools(in.RuntimeSession, in.Generation)
	if err := r.Table.Teardown(ctx, in.RuntimeSession, in.Reason); err != nil {
		return err
	}
	if err := r.Store.ReleasePlacement(ctx, in.RuntimeSession, r.Node); err != nil {
		return err
	}
	err := r.Store.RecordRuntimeStopped(ctx, in.RuntimeSession, in.Generation, in.Reason, time.Now())
	if errors.Is(err, store.ErrNotFound) {
		return nil // the session's records are gone (agent deleted): nothing to log against
	}
	return err
}

// InterruptTurnInput names the instance whose running turn ends.
type InterruptTurnInput struct {
	RuntimeSession uuid.UUID `json:"runtime_session"`
	Generation     int64     `json:"generation"`
	// TurnID is the turn the workflow runs ("" from histories before it): when its RunTurn
	// has not reached the node yet, that turn starts cancelled.
	TurnID string `json:"turn_id,omitempty"`
}

// InterruptTurn ends the running turn of the instance as Cancelled (its messages stay
// queued); between turns, or with no live instance of that generation, it does nothing.
func (r *Runtimes) InterruptTurn(ctx context.Context, in InterruptTurnInput) error {
	return r.Table.Interrupt(ctx, in.RuntimeSession, in.Generation, in.TurnID)
}

// heartbeat records activity heartbeats until the returned stop is called.
func heartbeat(ctx context.Context) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(turnHeartbeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() { close(done) }
}

// anyWakes reports whether any queued row asks for a turn: context-only rows (past the
// room's hop limit) ride along with a turn but never start one.
func anyWakes(rows []domain.Inbound) bool {
	return slices.ContainsFunc(rows, func(in domain.Inbound) bool { return !in.ContextOnly })
}

// pokeTimeout bounds each poke of another agent's room session after a turn.
const pokeTimeout = 10 * time.Second

// wakeOthers pokes the room sessions of the room's other owned agents when the turn posted
// a reply that wakes them, so they answer now instead of at the next Reconcile. A lost poke
// strands nothing (Reconcile finds the backlog), so failures are logged and skipped.
func (r *Runtimes) wakeOthers(ctx context.Context, hs domain.HostSession, replies []domain.Message) {
	for _, m := range replies {
		if !m.Quiet {
			// One poke per session is enough: each turn reads the whole queue.
			PokeRoom(ctx, r.Store, r.Poke, r.Log.With("runtime_session", hs.RuntimeSessionID), m)
			return
		}
	}
}
