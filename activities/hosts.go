package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
)

// Hosts holds the machine-independent activities of runtime hosts: allocation, durable
// membership and host state, and the calls that reach other workflows.
type Hosts struct {
	Store   *store.Store
	Leases  contract.HostLeases
	Members contract.MemberControl
}

// AcquireHostInput names the session that needs its host, and the node it would start on.
type AcquireHostInput struct {
	RuntimeSession uuid.UUID `json:"runtime_session"`
	Node           string    `json:"node"`
}

// allocateRequest is how the session asks for its runtime host, node being where a new
// host would go.
func allocateRequest(hs domain.HostSession, node string) store.AllocateRequest {
	return store.AllocateRequest{AgentID: hs.AgentID, TemplateID: hs.TemplateID,
		RuntimeSession: hs.RuntimeSessionID, Placement: domain.ResolvePlacement(hs.Config.Placement), Node: node,
		Sandboxed: hs.Config.Sandbox.Enabled, Compatibility: domain.CompatibilityFingerprint(hs.Config, ""),
		SandboxName: func(host uuid.UUID) string { return SandboxName(hs.AgentID, host) }, At: time.Now()}
}

// AcquireHost allocates (or finds) the session's runtime host and takes the session's lease
// on it; the host's sandbox is ready when this returns. The runtime must run on the host's
// node, which the lease names.
func (h *Hosts) AcquireHost(ctx context.Context, in AcquireHostInput) (contract.HostLease, error) {
	hs, err := h.Store.GetHostSession(ctx, in.RuntimeSession)
	if err != nil {
		return contract.HostLease{}, err
	}
	alloc, err := h.Store.AllocateHost(ctx, allocateRequest(hs, in.Node))
	if errors.Is(err, store.ErrIncompatibleHost) {
		return contract.HostLease{}, contract.Fail(err.Error(), domain.ErrTypeIncompatibleHost, err)
	}
	if err != nil {
		return contract.HostLease{}, err
	}
	stop := heartbeat(ctx)
	defer stop()
	lease, err := h.Leases.Acquire(ctx, updateID(ctx), alloc.Host.ID, hs.RuntimeSessionID, in.Node)
	return lease, typed(err)
}

// updateID names the update a (possibly retried) activity sends: the calling workflow run
// and the activity's id, the same for every attempt.
func updateID(ctx context.Context) string {
	info := activity.GetInfo(ctx)
	return info.WorkflowExecution.ID + "/" + info.WorkflowExecution.RunID + "/" + info.ActivityID
}

// typed returns the ApplicationError inside a workflow's answer as the activity's own error,
// so its type (host_busy, ownership_mismatch, ...) reaches the calling workflow: Temporal
// types an activity failure by the outermost error only.
func typed(err error) error {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app
	}
	return err
}

// ReleaseHostInput names a member whose lease ends.
type ReleaseHostInput struct {
	Host           uuid.UUID `json:"host"`
	RuntimeSession uuid.UUID `json:"runtime_session"`
	// Reason is why the runtime stopped; the host's checkpoint after its last member carries it.
	Reason domain.CheckpointReason `json:"reason,omitempty"`
}

// ReleaseHost drops the member's lease.
func (h *Hosts) ReleaseHost(ctx context.Context, in ReleaseHostInput) error {
	return typed(h.Leases.Release(ctx, updateID(ctx), in.Host, in.RuntimeSession, in.Reason))
}

// ReleaseHostOfInput names a session whose acquire failed.
type ReleaseHostOfInput struct {
	RuntimeSession uuid.UUID `json:"runtime_session"`
}

// ReleaseHostOf releases the session's lease on whatever host it is a member of; a session
// with no host (never allocated) holds none.
func (h *Hosts) ReleaseHostOf(ctx context.Context, in ReleaseHostOfInput) error {
	host, err := h.Store.HostOfSession(ctx, in.RuntimeSession)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return typed(h.Leases.Release(ctx, updateID(ctx), host.ID, in.RuntimeSession, domain.CheckpointBeforeStop))
}

// LoadHostInput names a runtime host.
type LoadHostInput struct {
	Host uuid.UUID `json:"host"`
}

// LoadHost reads a runtime host.
func (h *Hosts) LoadHost(ctx context.Context, in LoadHostInput) (contract.LoadHostResult, error) {
	r, err := h.Store.GetRuntimeHost(ctx, in.Host)
	if errors.Is(err, store.ErrNotFound) {
		return contract.LoadHostResult{}, contract.Fail(err.Error(), domain.ErrTypeHostScope, err)
	}
	if err != nil {
		return contract.LoadHostResult{}, err
	}
	return loadHostResult(r), nil
}

func loadHostResult(r domain.RuntimeHost) contract.LoadHostResult {
	return contract.LoadHostResult{Node: r.Node, Placement: r.Placement, State: r.State, SandboxName: r.SandboxName, AgentID: r.AgentID}
}

// RehomeHostInput names a host and the node placement put a member of it on.
type RehomeHostInput struct {
	Host uuid.UUID `json:"host"`
	Node string    `json:"node"`
	// Parked: the host has no member and its sandbox is stopped (its workflow holds the
	// sandbox lock), so it may leave a draining node too.
	Parked bool `json:"parked,omitempty"`
}

// RehomeHost moves the host to the node when its own node is fenced (or draining, for a parked
// host) and both reach one host store (store.RehomeHost), and returns the host as it stands
// after.
func (h *Hosts) RehomeHost(ctx context.Context, in RehomeHostInput) (contract.LoadHostResult, error) {
	r, err := h.Store.RehomeHost(ctx, in.Host, in.Node, in.Parked)
	if errors.Is(err, store.ErrNotFound) {
		return contract.LoadHostResult{}, contract.Fail(err.Error(), domain.ErrTypeHostScope, err)
	}
	if err != nil {
		return contract.LoadHostResult{}, err
	}
	return loadHostResult(r), nil
}

// MarkMemberInput records a member's state and, optionally, the host's.
type MarkMemberInput struct {
	Host           uuid.UUID               `json:"host"`
	RuntimeSession uuid.UUID               `json:"runtime_session,omitempty"`
	Membership     domain.MembershipState  `json:"membership,omitempty"`
	HostState      domain.RuntimeHostState `json:"host_state,omitempty"`
}

// MarkMemberResult says whether the host's record is gone (its agent was deleted).
type MarkMemberResult struct {
	HostGone bool `json:"host_gone"`
}

// MarkMember persists membership and host state; a member or host already gone is done.
func (h *Hosts) MarkMember(ctx context.Context, in MarkMemberInput) (MarkMemberResult, error) {
	now := time.Now()
	if in.Membership != "" {
		if err := h.Store.SetMembershipState(ctx, in.RuntimeSession, in.Membership, now); err != nil && !errors.Is(err, store.ErrNotFound) {
			return MarkMemberResult{}, err
		}
	}
	if in.HostState != "" {
		err := h.Store.SetHostState(ctx, in.Host, in.HostState, now)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return MarkMemberResult{HostGone: true}, nil
		case errors.Is(err, store.ErrConflict):
			return MarkMemberResult{}, contract.Fail(err.Error(), domain.ErrTypeHostScope, err)
		case err != nil:
			return MarkMemberResult{}, err
		}
	}
	return MarkMemberResult{}, nil
}

// HostScopeInput names the host and the control about to act on it.
type HostScopeInput struct {
	Host   uuid.UUID         `json:"host"`
	Action domain.HostAction `json:"action"`
	// DiscardChanges confirms that a reset may destroy work that lives only in the sandbox
	// (a private host clone's uncommitted changes).
	DiscardChanges bool `json:"discard_changes,omitempty"`
}

// ScopeMember is one member a host control acts on.
type ScopeMember struct {
	RuntimeSession uuid.UUID `json:"runtime_session"`
	RoomID         uuid.UUID `json:"room_id"`
	Alias          string    `json:"alias"`
	Removed        bool      `json:"removed,omitempty"`
}

// HostScope resolves a control's scope from the durable membership table, never from a
// clicked row or a live registry: the host must be live and every membership must resolve to
// a session of the host's agent (an inactive binding counts: it is a dormant member); restart
// and reset also require every member's placement to match the host's (stop does not, so an
// edited placement cannot strand a host that must park). Any mismatch refuses the whole
// control before anything stops.
func (h *Hosts) HostScope(ctx context.Context, in HostScopeInput) ([]ScopeMember, error) {
	refuse := func(format string, a ...any) error {
		msg := fmt.Sprintf(format, a...)
		return contract.Fail(msg, domain.ErrTypeHostScope, nil)
	}
	r, err := h.Store.GetRuntimeHost(ctx, in.Host)
	if errors.Is(err, store.ErrNotFound) {
		return nil, refuse("runtime host %s does not exist", in.Host)
	}
	if err != nil {
		return nil, err
	}
	if r.State == domain.HostArchived || r.State == domain.HostRemoved {
		return nil, refuse("runtime host %s is %s", in.Host, r.State)
	}
	members, err := h.Store.HostMembers(ctx, in.Host)
	if err != nil {
		return nil, err
	}
	out := make([]ScopeMember, 0, len(members))
	for _, m := range members {
		switch {
		case m.AgentID == uuid.Nil:
			return nil, refuse("member %s of runtime host %s has no session", m.RuntimeSession, in.Host)
		case m.AgentID != r.AgentID:
			return nil, refuse("member %s of runtime host %s belongs to another agent", m.RuntimeSession, in.Host)
		case in.Action != domain.HostStop && m.Placement != r.Placement:
			return nil, refuse("member %s is configured %s but runtime host %s is %s; only stop may act on it",
				m.RuntimeSession, m.Placement, in.Host, r.Placement)
		case in.Action == domain.HostResetSandbox && m.Workspace == domain.WorkspacePrivateHostClone && !in.DiscardChanges:
			return nil, refuse("member %s works in a private clone that lives in the sandbox; a reset destroys its changes, so it needs discard_changes",
				m.RuntimeSession)
		}
		out = append(out, ScopeMember{RuntimeSession: m.RuntimeSession, RoomID: m.RoomID, Alias: m.Alias, Removed: m.Removed})
	}
	return out, nil
}

// StopMemberInput names a member a host control stops.
type StopMemberInput struct {
	RuntimeSession uuid.UUID                `json:"runtime_session"`
	Reason         domain.SessionStopReason `json:"reason"`
}

// StopMember stops one member's runtime (its RoomSession tears it down and releases its
// lease) and reports whether it was live.
func (h *Hosts) StopMember(ctx context.Context, in StopMemberInput) (bool, error) {
	stop := heartbeat(ctx)
	defer stop()
	wasLive, err := h.Members.StopMember(ctx, updateID(ctx), in.RuntimeSession, in.Reason)
	return wasLive, typed(err)
}

// SettleHostInput names a host whose provider state must be checkpointed as of now.
type SettleHostInput struct {
	Host uuid.UUID `json:"host"`
}

// SettleHost waits until the host's newest checkpoint holds its provider state as of now
// (a park in progress finished, a turn since the newest generation captured). Repeating it
// captures nothing new.
func (h *Hosts) SettleHost(ctx context.Context, in SettleHostInput) error {
	stop := heartbeat(ctx)
	defer stop()
	return typed(h.Leases.Settle(ctx, updateID(ctx), in.Host))
}

// RestartMember asks a member to come back live.
func (h *Hosts) RestartMember(ctx context.Context, in StopMemberInput) error {
	return typed(h.Members.RestartMember(ctx, in.RuntimeSession))
}

// TurnPermitInput names a member whose turn starts or ends.
type TurnPermitInput struct {
	Host           uuid.UUID `json:"host"`
	RuntimeSession uuid.UUID `json:"runtime_session"`
	// Done ends the turn's permit; otherwise one is taken (waiting while a checkpoint holds
	// the host quiesced).
	Done bool `json:"done,omitempty"`
}

// TurnPermit takes or returns a member's turn permit on its host: a checkpoint of the host
// waits for every permit and holds new ones back until it published.
func (h *Hosts) TurnPermit(ctx context.Context, in TurnPermitInput) error {
	stop := heartbeat(ctx)
	defer stop()
	if in.Done {
		return typed(h.Leases.Unpermit(ctx, updateID(ctx), in.Host, in.RuntimeSession))
	}
	return typed(h.Leases.Permit(ctx, updateID(ctx), in.Host, in.RuntimeSession))
}
