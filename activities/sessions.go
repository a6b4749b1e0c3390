package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
)

// Environment knobs of the owned-runtime lifecycle, parsed once when a worker starts
// (LifecycleFromEnv).
const (
	EnvRuntimeLazy     = "JAM_OWNED_RUNTIME_LAZY"
	EnvRuntimeIdleSecs = "JAM_OWNED_RUNTIME_IDLE_SECS"
	// EnvProviderReadySecs replaces every provider's start-handshake bound.
	EnvProviderReadySecs = "JAM_PROVIDER_READY_SECS"
	// EnvReconcileIntervalSecs sets how often Reconcile runs.
	EnvReconcileIntervalSecs = "JAM_RECONCILE_INTERVAL_SECS"
)

// Lifecycle is the operator's configuration of the owned-runtime lifecycle.
type Lifecycle struct {
	// Eager binds rooms live instead of dormant (JAM_OWNED_RUNTIME_LAZY=0).
	Eager bool
	// IdleSecs, when set, overrides every template's and the setting's idle threshold.
	IdleSecs int
	// ReadyTimeout, when set, replaces every provider's start-handshake bound.
	ReadyTimeout time.Duration
	// ReconcileInterval, when set, is how often Reconcile runs (else every minute).
	ReconcileInterval time.Duration
}

// LifecycleFromEnv parses the lifecycle knobs. A malformed value is an error, not a silent
// default: the operator asked for something.
func LifecycleFromEnv(getenv func(string) string) (Lifecycle, error) {
	var l Lifecycle
	switch v := getenv(EnvRuntimeLazy); v {
	case "", "1", "true":
	case "0", "false":
		l.Eager = true
	default:
		return Lifecycle{}, fmt.Errorf("%s=%q: want 1 or 0", EnvRuntimeLazy, v)
	}
	for _, k := range []struct {
		name string
		into func(int)
	}{
		{EnvRuntimeIdleSecs, func(n int) { l.IdleSecs = n }},
		{EnvProviderReadySecs, func(n int) { l.ReadyTimeout = time.Duration(n) * time.Second }},
		{EnvReconcileIntervalSecs, func(n int) { l.ReconcileInterval = time.Duration(n) * time.Second }},
	} {
		if v := getenv(k.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > domain.MaxIdleSecs {
				return Lifecycle{}, fmt.Errorf("%s=%q: want a positive number of seconds", k.name, v)
			}
			k.into(n)
		}
	}
	return l, nil
}

// Sessions holds the database-side activities of the RoomSession workflow. They need no
// particular machine and run on the shared queue.
type Sessions struct {
	Store     *store.Store
	Lifecycle Lifecycle
}

// LoadSessionInput names the session and the node its runtime last ran on.
type LoadSessionInput struct {
	RuntimeSession uuid.UUID `json:"runtime_session"`
	PreviousNode   string    `json:"previous_node,omitempty"`
	// WantLive: the workflow will start a runtime even without backlog (a restart).
	WantLive bool `json:"want_live,omitempty"`
}

// LoadSessionResult is what the workflow decides a wake on: the database is the truth for
// membership, run intent and backlog; the workflow holds only the runtime's state.
type LoadSessionResult struct {
	// Gone: the session no longer exists (its agent was deleted).
	Gone bool `json:"gone"`
	// Removed: the room binding is a tombstone.
	Removed      bool      `json:"removed"`
	AgentID      uuid.UUID `json:"agent_id"`
	RoomID       uuid.UUID `json:"room_id"`
	AgentStopped bool      `json:"agent_stopped"`
	Backlog      int       `json:"backlog"`
	// Lazy is the lifecycle mode: dormant until messaged, and reaped when idle.
	Lazy     bool `json:"lazy"`
	IdleSecs int  `json:"idle_secs"`
	// Sandboxed: the session runs in its runtime host's sandbox (a lease is taken first).
	Sandboxed bool `json:"sandboxed"`
	// Node is where a runtime should start, with a slot taken there (domain.Place): the
	// previous node while it is live, else the live undrained node with the smallest share
	// of its capacity in use that has an adapter for the session's provider; "" when nothing is to start
	// or no node can take it (Waiting says why).
	Node string `json:"node"`
	// Waiting is why no node took the runtime.
	Waiting string `json:"waiting,omitempty"`
	// NoAdapter: nodes are live but none has an adapter for the session's transport.
	NoAdapter bool             `json:"no_adapter,omitempty"`
	Transport domain.Transport `json:"transport,omitempty"`
}

// LoadSession reads what decides whether a room session runs now, and where.
func (s *Sessions) LoadSession(ctx context.Context, in LoadSessionInput) (LoadSessionResult, error) {
	hs, err := s.Store.GetHostSession(ctx, in.RuntimeSession)
	if errors.Is(err, store.ErrNotFound) {
		return LoadSessionResult{Gone: true}, nil
	}
	if err != nil {
		return LoadSessionResult{}, err
	}
	out := LoadSessionResult{Removed: hs.Removed, AgentID: hs.AgentID, RoomID: hs.RoomID, Sandboxed: hs.Config.Sandbox.Enabled,
		Transport: hs.Config.Transport}
	a, err := s.Store.GetAgent(ctx, hs.AgentID)
	if errors.Is(err, store.ErrNotFound) {
		return LoadSessionResult{Gone: true}, nil
	}
	if err != nil {
		return LoadSessionResult{}, err
	}
	out.AgentStopped = a.RunIntent == domain.RunIntentStopped
	if out.Backlog, err = s.Store.CountUnsettled(ctx, hs.AgentID, hs.RoomID); err != nil {
		return LoadSessionResult{}, err
	}
	out.Lazy = !s.Lifecycle.Eager
	if out.IdleSecs, err = s.idleSecs(ctx, hs.Config); err != nil {
		return LoadSessionResult{}, err
	}
	// Only a session that will wake needs a node: a dormant registration reads no nodes.
	if !out.Removed && !out.AgentStopped && (out.Backlog > 0 || !out.Lazy || in.WantLive) {
		ask, err := s.sessionAsk(ctx, hs, in.PreviousNode)
		if err != nil {
			return LoadSessionResult{}, err
		}
		pl, err := s.Store.PlaceRuntime(ctx, in.RuntimeSession, ask)
		if err != nil {
			return LoadSessionResult{}, err
		}
		out.Node, out.NoAdapter, out.Waiting = pl.Node, pl.NoAdapter, pl.Waiting
	}
	return out, nil
}

// sessionAsk is what a wake of hs asks of placement, previous being the node its runtime
// last ran on. A sandboxed session whose host has a node runs there: the sandbox, the host's
// workspace and checkpoints are that node's (a new member of a Shared host too), unless the
// host moves with it (domain.movedTo). So its slot is taken there, and while that node is
// stale or full the session waits and says so. A host its acquire would refuse pins nothing:
// on any node the acquire fails at once with the reason, instead of the room waiting for
// that host's node.
func (s *Sessions) sessionAsk(ctx context.Context, hs domain.HostSession, previous string) (domain.PlacementAsk, error) {
	ask := placementAsk(hs.Config, previous)
	if !ask.Sandboxed {
		return ask, nil
	}
	host, err := s.Store.HostFor(ctx, allocateRequest(hs, ""))
	switch {
	case err == nil && host.Node != "" && host.State != domain.HostArchived && host.State != domain.HostRemoved:
		ask.Previous, ask.Pinned = host.Node, true
	case err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrIncompatibleHost):
		return ask, err
	}
	return ask, nil
}

// placementAsk is what a wake of a session configured c asks of placement, previous being
// the node its runtime last ran on.
func placementAsk(c domain.TemplateConfig, previous string) domain.PlacementAsk {
	row, _ := domain.LookupTransport(c.Transport)
	sandboxed := c.Sandbox.Enabled
	// A host-native runtime that ran on a node left its workspace and provider state there.
	ask := domain.PlacementAsk{Previous: previous, Pinned: !sandboxed, Provider: row.Provider, Sandboxed: sandboxed}
	// Where its managed workspace and the provider's state are both in its host root, a node
	// sharing that node's host store reaches them as well. A sandboxed runtime's provider
	// state and checkpoints always are; its workspace only when it is the managed one (a
	// direct host path is its node's own, a private clone lives inside its microVM).
	ask.Movable = !sandboxed && row.SessionState && c.Sandbox.DirectHostPath() == ""
	if sandboxed {
		src := c.Sandbox.WorkspaceSource
		ask.Movable = src == "" || src == domain.WorkspaceManaged
	}
	// It resolves the catalog command on its node unless the template names its own
	// executable; a sandboxed one runs the CLI of its image.
	if !sandboxed && c.Command == "" {
		ask.Command = row.Command
	}
	return ask
}

// idleSecs is the idle-reap threshold: JAM_OWNED_RUNTIME_IDLE_SECS, else the template's
// idle_secs, else the setting, else the default.
func (s *Sessions) idleSecs(ctx context.Context, c domain.TemplateConfig) (int, error) {
	if s.Lifecycle.IdleSecs > 0 {
		return s.Lifecycle.IdleSecs, nil
	}
	if c.IdleSecs != nil && *c.IdleSecs > 0 {
		return *c.IdleSecs, nil
	}
	set, err := s.Store.GetSetting(ctx, domain.SettingIdleSecs)
	if errors.Is(err, store.ErrNotFound) {
		return domain.DefaultIdleSecs, nil
	}
	if err != nil {
		return 0, err
	}
	var n int
	if err := json.Unmarshal(set.Value, &n); err != nil || n < 1 {
		return 0, fmt.Errorf("setting %s: want a positive number of seconds", domain.SettingIdleSecs)
	}
	return n, nil
}

// RecordRuntimeFailureInput holds a session in a permanent start failure.
type RecordRuntimeFailureInput struct {
	RuntimeSession uuid.UUID           `json:"runtime_session"`
	Class          domain.FailureClass `json:"class"`
	Reason         string              `json:"reason"`
	At             time.Time           `json:"at"`
}

// RecordRuntimeFailure records the failure and tells the room; recording the same one again
// changes nothing.
func (s *Sessions) RecordRuntimeFailure(ctx context.Context, in RecordRuntimeFailureInput) error {
	err := s.Store.RecordRuntimeFailure(ctx, in.RuntimeSession, domain.RuntimeFailure{Class: in.Class, Reason: in.Reason, At: in.At})
	if errors.Is(err, store.ErrNotFound) {
		return nil // the session is gone (agent deleted): nobody to tell
	}
	return err
}

// RecordRecycleInput is the provider watchdog's count-th recycle of a session.
type RecordRecycleInput struct {
	RuntimeSession uuid.UUID      `json:"runtime_session"`
	Recycle        domain.Recycle `json:"recycle"`
	Count          int            `json:"count"`
	// Held: the session recycled too often and now holds failed.
	Held bool `json:"held"`
}

// RecordRecycle records the recycle on the session and tells the room once.
func (s *Sessions) RecordRecycle(ctx context.Context, in RecordRecycleInput) error {
	err := s.Store.RecordRecycle(ctx, in.RuntimeSession, in.Recycle, in.Count, in.Held)
	if errors.Is(err, store.ErrNotFound) {
		return nil // the session is gone (agent deleted): nobody to tell
	}
	return err
}

// StartFreshInput is an operator's start-fresh of a session, bound to the evidence they saw.
type StartFreshInput struct {
	RuntimeSession   uuid.UUID `json:"runtime_session"`
	EvidenceChecksum string    `json:"evidence_checksum"`
}

// StartFresh unbinds the session's unresumable provider thread (the room is told) and clears
// its failure, when the evidence is still what the operator confirmed; its next start begins
// a new thread.
func (s *Sessions) StartFresh(ctx context.Context, in StartFreshInput) error {
	err := s.Store.StartSessionFresh(ctx, in.RuntimeSession, in.EvidenceChecksum, time.Now())
	var refusal *domain.PreconditionError
	switch {
	case errors.Is(err, store.ErrEvidenceChanged):
		return contract.Fail("the session's continuity evidence changed since it was inspected; inspect again", domain.ErrTypeEvidenceChanged, err)
	case errors.As(err, &refusal):
		return contract.Fail(refusal.Error(), domain.ErrTypeNotResettable, err)
	}
	return err
}

// ClearRuntimeFailureInput names the session that tries to start again.
type ClearRuntimeFailureInput struct {
	RuntimeSession uuid.UUID `json:"runtime_session"`
}

// ClearRuntimeFailure ends the session's recorded failure.
func (s *Sessions) ClearRuntimeFailure(ctx context.Context, in ClearRuntimeFailureInput) error {
	return s.Store.ClearRuntimeFailure(ctx, in.RuntimeSession, time.Now())
}

// BacklogReport is what Reconcile found in the database.
type BacklogReport struct {
	// Sessions have unsettled messages while their agent wants to run.
	Sessions []uuid.UUID `json:"sessions"`
	// Rooms names each session's agent and room: a workflow Reconcile starts carries them
	// as its search attributes (reports recorded before it have none).
	Rooms map[uuid.UUID]SessionRoom `json:"rooms,omitempty"`
	// StaleNodes missed three heartbeats in a row.
	StaleNodes []string `json:"stale_nodes"`
	// Retry sessions failed for want of an adapter that a live node now has, or for what a
	// node's environment decides (a key variable, an executable) on a node that restarted
	// since; RetryReasons says which (reports recorded before it have none).
	Retry        []uuid.UUID          `json:"retry,omitempty"`
	RetryReasons map[uuid.UUID]string `json:"retry_reasons,omitempty"`
	// Move sessions run on a draining node and can run on another that shares its host
	// store: they leave at their next turn boundary (contract.SignalMove).
	Move []MoveOff `json:"move,omitempty"`
}

// SessionRoom is the agent and room of a room session.
type SessionRoom struct {
	Agent uuid.UUID `json:"agent"`
	Room  uuid.UUID `json:"room"`
}

// MoveOff is a live runtime on a draining node that another node can take.
type MoveOff struct {
	RuntimeSession uuid.UUID `json:"runtime_session"`
	Node           string    `json:"node"`
}

// ReconcileLimit bounds the sessions one Reconcile run pokes.
const ReconcileLimit = 10000

// FindBacklog lists the sessions Reconcile pokes and the nodes it reports stale. It reads
// only; the workflow decides what to do.
func (s *Sessions) FindBacklog(ctx context.Context) (BacklogReport, error) {
	refs, err := s.Store.SessionsWithBacklog(ctx, ReconcileLimit)
	if err != nil {
		return BacklogReport{}, err
	}
	ids := make([]uuid.UUID, len(refs))
	rooms := make(map[uuid.UUID]SessionRoom, len(refs))
	for i, r := range refs {
		ids[i] = r.RuntimeSessionID
		rooms[r.RuntimeSessionID] = SessionRoom{Agent: r.AgentID, Room: r.RoomID}
	}
	nodes, err := s.Store.ListNodes(ctx)
	if err != nil {
		return BacklogReport{}, err
	}
	now, err := s.Store.Now(ctx)
	if err != nil {
		return BacklogReport{}, err
	}
	out := BacklogReport{Sessions: ids, Rooms: rooms}
	var live []domain.Node
	for _, n := range nodes {
		if now.Sub(n.HeartbeatAt) > domain.NodeStaleAfter {
			out.StaleNodes = append(out.StaleNodes, n.Name)
		} else {
			live = append(live, n)
		}
	}
	if err := s.retries(ctx, live, &out); err != nil {
		return BacklogReport{}, err
	}
	if out.Move, err = s.movable(ctx, nodes, now); err != nil {
		return BacklogReport{}, err
	}
	return out, nil
}

// nodeEnvFailures are the failure classes a node's environment decides (a variable set, an
// executable installed, a CLI that starts): a node restarted since the failure may have
// changed it, so the session tries once more (issue 43).
var nodeEnvFailures = []domain.FailureClass{domain.FailureCredentialMissing, domain.FailureExecutableRefused,
	domain.FailureEnvRefused, domain.FailureStartFailed, domain.FailureNotReady}

// retries lists the failed sessions a change may let start now: those that wanted an
// adapter a live node has, and those failed for what a node's environment decides while a
// live node that runs their provider restarted since.
func (s *Sessions) retries(ctx context.Context, live []domain.Node, out *BacklogReport) error {
	add := func(hs domain.HostSession, reason string) {
		if out.RetryReasons == nil {
			out.RetryReasons = map[uuid.UUID]string{}
		}
		out.Retry = append(out.Retry, hs.RuntimeSessionID)
		out.RetryReasons[hs.RuntimeSessionID] = reason
	}
	failed, err := s.Store.FailedSessions(ctx, domain.FailureAdapterMissing, ReconcileLimit)
	if err != nil {
		return err
	}
	for _, hs := range failed {
		row, _ := domain.LookupTransport(hs.Config.Transport)
		if slices.ContainsFunc(live, func(n domain.Node) bool { return n.Runs(row.Provider) }) {
			add(hs, "a live node now has the runtime adapter")
		}
	}
	for _, class := range nodeEnvFailures {
		failed, err := s.Store.FailedSessions(ctx, class, ReconcileLimit)
		if err != nil {
			return err
		}
		for _, hs := range failed {
			row, _ := domain.LookupTransport(hs.Config.Transport)
			i := slices.IndexFunc(live, func(n domain.Node) bool {
				return n.Runs(row.Provider) && hs.Failure != nil && n.StartedAt.After(hs.Failure.At)
			})
			if i >= 0 {
				add(hs, fmt.Sprintf("node %s restarted since the failure", live[i].Name))
			}
		}
	}
	return nil
}

// movable lists the live runtimes on draining nodes that placement would now put on another
// node (one sharing the host store their state is in), counting each chosen one as placed
// there, so one free slot is offered to one runtime.
func (s *Sessions) movable(ctx context.Context, nodes []domain.Node, now time.Time) ([]MoveOff, error) {
	// Only a draining node that shares its host store with a live undrained one can hand
	// runtimes over: the others' runtimes are not read at all.
	var from []string
	for _, d := range nodes {
		// A stale draining node's rooms move by their own next wake (after its fence).
		if d.Draining && now.Sub(d.HeartbeatAt) <= domain.NodeStaleAfter && slices.ContainsFunc(nodes, func(n domain.Node) bool {
			return n.Name != d.Name && !n.Draining && n.SharesHostStore(d) && now.Sub(n.HeartbeatAt) <= domain.NodeStaleAfter
		}) {
			from = append(from, d.Name)
		}
	}
	if len(from) == 0 {
		return nil, nil
	}
	placed, err := s.Store.RuntimesOnDrainingNodes(ctx, from, ReconcileLimit)
	if err != nil {
		return nil, err
	}
	nodes = slices.Clone(nodes)
	byName := map[string]domain.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	// roomLeft: some live undrained node sharing a draining one's store still has a slot
	// (the scan stops reading sessions once none has).
	roomLeft := func() bool {
		for _, n := range nodes {
			if n.Draining || now.Sub(n.HeartbeatAt) > domain.NodeStaleAfter || n.Free() == 0 {
				continue
			}
			for _, d := range from {
				if n.Name != d && n.SharesHostStore(byName[d]) {
					return true
				}
			}
		}
		return false
	}
	var out []MoveOff
	for _, p := range placed {
		if !roomLeft() {
			break
		}
		hs, err := s.Store.GetHostSession(ctx, p.RuntimeSession)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		// Where its next wake would go once it stopped here (a sandboxed one: where its host
		// would go).
		ask, err := s.sessionAsk(ctx, hs, p.Node)
		if err != nil {
			return nil, err
		}
		ask.HostStore = p.HostStore
		// A sandboxed one's host moves once parked, after every member stopped
		// (domain.MayRehome): each is told.
		if !ask.Movable || hs.Removed {
			continue
		}
		// Its own slot is on the draining node, so the others' counts are as a wake sees them.
		pl := domain.Place(nodes, now, ask)
		if pl.Node == "" || pl.Node == p.Node {
			continue
		}
		out = append(out, MoveOff{RuntimeSession: p.RuntimeSession, Node: p.Node})
		for i := range nodes {
			if nodes[i].Name == pl.Node {
				nodes[i].Runtimes++
			}
		}
	}
	return out, nil
}
