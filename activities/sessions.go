package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
)

// Environment knobs of the owned-runtime lifecycle, read by the worker that loads a session.
const (
	EnvRuntimeLazy     = "JAM_OWNED_RUNTIME_LAZY"
	EnvRuntimeIdleSecs = "JAM_OWNED_RUNTIME_IDLE_SECS"
)

// Sessions holds the database-side activities of the RoomSession workflow. They need no
// particular machine and run on the shared queue.
type Sessions struct {
	Store *store.Store
	// Getenv reads the lifecycle knobs; nil is os.Getenv.
	Getenv func(string) string
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
	// Node is where a runtime should start: the previous node while it is live, else the
	// freshest live node; "" when no node is live or nothing is to start.
	Node string `json:"node"`
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
	out := LoadSessionResult{Removed: hs.Removed, AgentID: hs.AgentID, RoomID: hs.RoomID, Sandboxed: hs.Config.Sandbox.Enabled}
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
	out.Lazy = s.getenv(EnvRuntimeLazy) != "0"
	if out.IdleSecs, err = s.idleSecs(ctx); err != nil {
		return LoadSessionResult{}, err
	}
	// Only a session that will wake needs a node: a dormant registration reads no nodes.
	if !out.Removed && !out.AgentStopped && (out.Backlog > 0 || !out.Lazy || in.WantLive) {
		if out.Node, err = s.pickNode(ctx, in.PreviousNode); err != nil {
			return LoadSessionResult{}, err
		}
	}
	return out, nil
}

func (s *Sessions) getenv(k string) string {
	if s.Getenv != nil {
		return s.Getenv(k)
	}
	return os.Getenv(k)
}

// idleSecs is JAM_OWNED_RUNTIME_IDLE_SECS, else the setting, else the default. A malformed
// environment value is an error, not a silent default: the operator asked for something.
func (s *Sessions) idleSecs(ctx context.Context) (int, error) {
	if v := s.getenv(EnvRuntimeIdleSecs); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("%s=%q: want a positive number of seconds", EnvRuntimeIdleSecs, v)
		}
		return n, nil
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

// pickNode keeps a runtime on the node whose disk holds its workspace while that node is
// live, else takes the node that beat most recently.
func (s *Sessions) pickNode(ctx context.Context, previous string) (string, error) {
	nodes, err := s.Store.ListNodes(ctx)
	if err != nil {
		return "", err
	}
	now, err := s.Store.Now(ctx)
	if err != nil {
		return "", err
	}
	best := ""
	var bestBeat = now.Add(-domain.NodeStaleAfter)
	for _, n := range nodes {
		if now.Sub(n.HeartbeatAt) > domain.NodeStaleAfter {
			continue
		}
		if n.Name == previous {
			return n.Name, nil
		}
		if n.HeartbeatAt.After(bestBeat) || best == "" {
			best, bestBeat = n.Name, n.HeartbeatAt
		}
	}
	return best, nil
}

// BacklogReport is what Reconcile found in the database.
type BacklogReport struct {
	// Sessions have unsettled messages while their agent wants to run.
	Sessions []uuid.UUID `json:"sessions"`
	// StaleNodes missed three heartbeats in a row.
	StaleNodes []string `json:"stale_nodes"`
}

// ReconcileLimit bounds the sessions one Reconcile run pokes.
const ReconcileLimit = 10000

// FindBacklog lists the sessions Reconcile pokes and the nodes it reports stale. It reads
// only; the workflow decides what to do.
func (s *Sessions) FindBacklog(ctx context.Context) (BacklogReport, error) {
	ids, err := s.Store.SessionsWithBacklog(ctx, ReconcileLimit)
	if err != nil {
		return BacklogReport{}, err
	}
	nodes, err := s.Store.ListNodes(ctx)
	if err != nil {
		return BacklogReport{}, err
	}
	now, err := s.Store.Now(ctx)
	if err != nil {
		return BacklogReport{}, err
	}
	out := BacklogReport{Sessions: ids}
	for _, n := range nodes {
		if now.Sub(n.HeartbeatAt) > domain.NodeStaleAfter {
			out.StaleNodes = append(out.StaleNodes, n.Name)
		}
	}
	return out, nil
}
