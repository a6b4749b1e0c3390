package contract

import (
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jam-dev/jam/internal/domain"
)

// CheckpointDeletionInput names the checkpoint whose payload goes, on its host's node.
type CheckpointDeletionInput struct {
	Checkpoint uuid.UUID `json:"checkpoint"`
	Host       uuid.UUID `json:"host"`
	Node       string    `json:"node"`
}

// ContinuityResetInput is an operator's confirmed start-fresh of one runtime host.
type ContinuityResetInput struct {
	Host             uuid.UUID `json:"host"`
	Node             string    `json:"node"`
	EvidenceChecksum string    `json:"evidence_checksum"`
}

// HostCleanupInput is an operator's confirmed removal of one whole runtime host.
type HostCleanupInput struct {
	Host             uuid.UUID `json:"host"`
	Node             string    `json:"node"`
	ConfirmPermanent bool      `json:"confirm_permanent"`
}

// HostCleanupResult is the cleanup record and, when it was refused, the preflight.
type HostCleanupResult struct {
	Cleanup domain.HostCleanupOperation `json:"cleanup"`
	Report  *CleanupReport              `json:"report,omitempty"`
}

// CleanupInspectionTimeout bounds a preflight: an `sbx ls` (12 s), the verification of an
// export per member, and the pickup.
const CleanupInspectionTimeout = 10 * time.Minute

// HostMeasureTimeout bounds measuring a host's bytes on its node.
const HostMeasureTimeout = 30 * time.Second

// RemovalInspectionInput names a workspace (with its owner) on its host's node.
type RemovalInspectionInput struct {
	Node string       `json:"node"`
	Ref  WorkspaceRef `json:"ref"`
}

// RemovalInspectionTimeout bounds a removal inspection: up to 16 repositories at 4 s each
// per git call, and the byte count.
const RemovalInspectionTimeout = 3 * time.Minute

// NodeProbeTimeout bounds how long a probe waits for the node's worker to pick the task up
// and answer; a node that does not answer within it is reported as not serving.
const NodeProbeTimeout = 10 * time.Second

// NodeProbeInput names the node to probe.
type NodeProbeInput struct {
	Node string `json:"node"`
}

// SandboxProbeTimeout bounds a sandbox support probe: the probe's own 12 s and the pickup.
const SandboxProbeTimeout = 15 * time.Second

// SandboxInventoryTimeout bounds an inventory: one `sbx ls` (12 s), the markers on disk and
// the runtime hosts, plus the pickup.
const SandboxInventoryTimeout = 20 * time.Second

// ContinuityInspectionTimeout bounds an inspection: the store reads and the newest
// checkpoint's verification on the host's node, plus the pickup.
const ContinuityInspectionTimeout = 30 * time.Second

// HostProbeInput names a runtime host and the node it is pinned to.
type HostProbeInput struct {
	Node string    `json:"node"`
	Host uuid.UUID `json:"host"`
}

// RoomSessionInput starts (or continues) the entity workflow of one runtime session.
type RoomSessionInput struct {
	RuntimeSession uuid.UUID `json:"runtime_session"`
	AgentID        uuid.UUID `json:"agent_id"`
	RoomID         uuid.UUID `json:"room_id"`
	// State is carried through continue-as-new; nil on first start.
	State *RoomSessionState `json:"state,omitempty"`
}

// RoomSessionState is everything the workflow knows about its runtime; one serializable
// struct so continue-as-new carries it whole.
type RoomSessionState struct {
	Phase             domain.SessionPhase `json:"phase"`
	Node              string              `json:"node,omitempty"`
	Generation        int64               `json:"generation"`
	PID               int                 `json:"pid,omitempty"`
	ProviderSessionID string              `json:"provider_session_id,omitempty"`
	IdlePolicy        domain.IdlePolicy   `json:"idle_policy,omitempty"`
	InTurn            bool                `json:"in_turn"`
	Turns             int64               `json:"turns"`
	LastActivity      time.Time           `json:"last_activity"`
	IdleSecs          int                 `json:"idle_secs"`
	Lazy              bool                `json:"lazy"`
	// Held: stopped by an operator; stays dormant, messages queued, until restart.
	Held bool `json:"held"`
	// Crashed: the runtime died on its own and was not woken again yet.
	Crashed   bool   `json:"crashed"`
	Crashes   int    `json:"crashes"`
	LastError string `json:"last_error,omitempty"`
	// Pokes not yet served; WantLive asks for a runtime even without backlog.
	Pokes    int  `json:"pokes"`
	WantLive bool `json:"want_live"`
	// PlaceWaits counts the wakes in a row that found no node to run on; the session tries
	// again on a timer that backs off with it (0 once a node takes it or nothing waits).
	PlaceWaits int `json:"place_waits,omitempty"`
	// Host and Sandbox name a sandboxed session's runtime host; Leased: this session holds a
	// lease on it (taken before the runtime starts, released when it stops).
	Host    uuid.UUID `json:"host,omitempty"`
	Sandbox string    `json:"sandbox,omitempty"`
	Leased  bool      `json:"leased,omitempty"`
	// Failure is the permanent start failure the session holds in (phase failed), kept
	// through a removal so a re-add clears its record.
	Failure *domain.RuntimeFailure `json:"failure,omitempty"`
	// Warning is the live runtime's readiness warning ("" when none): presence degraded.
	Warning string `json:"warning,omitempty"`
	// Recycles counts the watchdog's recycles of the session; RecycleTimes are those within
	// domain.RecycleLoopWindow (a loop holds the session failed); LastRecycle is the latest.
	Recycles     int             `json:"recycles,omitempty"`
	RecycleTimes []time.Time     `json:"recycle_times,omitempty"`
	LastRecycle  *domain.Recycle `json:"last_recycle,omitempty"`
}

// RecycleSignal is the payload of SignalRecycle: what the node's watchdog measured.
type RecycleSignal struct {
	Recycle domain.Recycle `json:"recycle"`
}

// RoomSessionStatus is the answer of QueryState.
type RoomSessionStatus struct {
	Phase        domain.SessionPhase `json:"phase"`
	Presence     domain.Presence     `json:"presence"`
	Node         string              `json:"node,omitempty"`
	Generation   int64               `json:"generation"`
	PID          int                 `json:"pid,omitempty"`
	InTurn       bool                `json:"in_turn"`
	Held         bool                `json:"held"`
	Turns        int64               `json:"turns"`
	LastActivity time.Time           `json:"last_activity"`
	IdleSecs     int                 `json:"idle_secs"`
	LastError    string              `json:"last_error,omitempty"`
	Host         *uuid.UUID          `json:"host,omitempty"`
	Sandbox      string              `json:"sandbox,omitempty"`
	// Leased: the session holds a lease on its host (a runtime may run there).
	Leased bool `json:"leased,omitempty"`
	// Failure says why the session cannot start (phase failed).
	Failure *domain.RuntimeFailure `json:"failure,omitempty"`
	// Warning is the live runtime's readiness warning (presence degraded).
	Warning string `json:"warning,omitempty"`
	// Recycles counts the watchdog's recycles; LastRecycle says what it measured last.
	Recycles    int             `json:"recycles,omitempty"`
	LastRecycle *domain.Recycle `json:"last_recycle,omitempty"`
}

// RuntimeExitedSignal is the payload of SignalRuntimeExited.
type RuntimeExitedSignal struct {
	Generation int64                    `json:"generation"`
	Reason     domain.RuntimeExitReason `json:"reason"`
}

// StopRequest is the input of UpdateStop; Reason is one of domain.SessionStopReasons.
type StopRequest struct {
	Reason string `json:"reason"`
}

// RestartRequest is the input of UpdateRestart. OnlyIfBacklog (agent scope) brings the
// runtime back only when the room has messages waiting.
type RestartRequest struct {
	OnlyIfBacklog bool `json:"only_if_backlog"`
}

// StartFreshRequest is the input of UpdateStartFresh.
type StartFreshRequest struct {
	// EvidenceChecksum is the checksum of the session's continuity evidence the operator
	// inspected (GET /v1/sessions/{id}/continuity).
	EvidenceChecksum string `json:"evidence_checksum"`
}

// RemoveRequest is the input of UpdateRemove. Final ends the workflow (the agent is being
// deleted); otherwise the session retires and an authoritative re-add revives it.
type RemoveRequest struct {
	Final bool `json:"final"`
}

// ApplyConfigRequest is the input of UpdateApplyConfig: the template generation to apply.
type ApplyConfigRequest struct {
	Generation int64 `json:"generation"`
}

// RetrySignal is the payload of SignalRetry: what changed, for the log.
type RetrySignal struct {
	Reason string `json:"reason"`
}

// MoveSignal is the payload of SignalMove: the node Reconcile saw the runtime on.
type MoveSignal struct {
	Node string `json:"node"`
}

// RuntimeHostInput starts (or continues) the entity workflow of one runtime host.
type RuntimeHostInput struct {
	Host  uuid.UUID         `json:"host"`
	State *RuntimeHostState `json:"state,omitempty"`
}

// RuntimeHostState is the lease and sandbox state, carried through continue-as-new. The
// workflow is the lease: its member count survives a crash of any worker.
type RuntimeHostState struct {
	// Host is the record this workflow loaded (node, owner, sandbox name), carried so a
	// later run needs no store read.
	Host   *LoadHostResult `json:"host,omitempty"`
	Leases []uuid.UUID     `json:"leases"`
	// Ready: the sandbox was created or verified since it was last parked.
	Ready bool `json:"ready"`
	// ParkFailed: the final park failed and is retried.
	ParkFailed bool `json:"park_failed"`
	// Permits holds the members whose turn runs now (a member runs one turn at a time).
	Permits   []uuid.UUID `json:"permits,omitempty"`
	Quiesced  bool        `json:"quiesced"`
	LastError string      `json:"last_error,omitempty"`
	Created   int         `json:"created"`
	// Checkpoints counts the generations this host published.
	Checkpoints int `json:"checkpoints"`
	// ParkReason is the checkpoint reason of the last member's release (before_remove for a
	// removed room); "" is before_stop.
	ParkReason domain.CheckpointReason `json:"park_reason,omitempty"`
	// LastCheckpointAt: when the newest generation was published (or the host first served).
	LastCheckpointAt time.Time `json:"last_checkpoint_at,omitempty"`
	// Dirty: a member's turn ran since the last checkpoint (only turns change the provider
	// state worth capturing; a checkpoint of untouched or lost state would claim sessions it
	// does not hold).
	Dirty bool `json:"dirty,omitempty"`
	// Moves counts the times the host moved to another node (its own was fenced, or drained
	// while the host was parked).
	Moves int `json:"moves,omitempty"`
	// Unsaved is set while the checkpoint of the host's last teardown has not succeeded: the
	// provider state on the node is newer than every generation, so no member starts over it
	// until a checkpoint succeeds (retried every parkRetryAfter, or an operator's manual
	// one) or an operator discards it.
	Unsaved *UnsavedState `json:"unsaved,omitempty"`
}

// UnsavedState is a runtime host's failed teardown checkpoint.
type UnsavedState struct {
	Reason   domain.CheckpointReason `json:"reason"`
	Error    string                  `json:"error"`
	Since    time.Time               `json:"since"`
	Attempts int                     `json:"attempts"`
}

// Refusal is the host_fenced refusal of what (a room's start, a host restart) on a host whose
// teardown checkpoint failed, retried every retryEvery.
func (u UnsavedState) Refusal(host uuid.UUID, what string, retryEvery time.Duration) error {
	return Fail(fmt.Sprintf("%s: the %s checkpoint of runtime host %s failed (%s) and is retried every %s; "+
		"`jam host checkpoint %s` tries now, `jam host discard-unsaved %s --confirm` starts without it",
		what, u.Reason, host, u.Error, retryEvery, host, host), domain.ErrTypeHostFenced, nil)
}

// UnsavedRetry is how often a fenced host tries its teardown checkpoint again.
const UnsavedRetry = time.Minute

// DiscardUnsavedRequest is the input of UpdateDiscardUnsaved.
type DiscardUnsavedRequest struct {
	// Confirm acknowledges that the provider state on the node is held by no checkpoint.
	Confirm bool `json:"confirm"`
}

// RuntimeHostStatus is the answer of QueryHost.
type RuntimeHostStatus struct {
	Leases      []uuid.UUID `json:"leases"`
	Ready       bool        `json:"ready"`
	ParkFailed  bool        `json:"park_failed"`
	Controlling bool        `json:"controlling"`
	Permits     int         `json:"permits"`
	Quiesced    bool        `json:"quiesced"`
	LastError   string      `json:"last_error,omitempty"`
	Checkpoints int         `json:"checkpoints"`
	Moves       int         `json:"moves,omitempty"`
	// Unsaved: the host is fenced; its last teardown's checkpoint failed.
	Unsaved *UnsavedState `json:"unsaved,omitempty"`
}

// LeaseRequest is the input of UpdateAcquire, UpdateRelease, UpdatePermit and UpdateUnpermit.
type LeaseRequest struct {
	RuntimeSession uuid.UUID `json:"runtime_session"`
	// Node (acquire only) is the node placement chose for the member ("" when none). A host
	// on another node moves there when its own node is fenced and both reach one host store.
	Node string `json:"node,omitempty"`
	// Reason (release only) is why the member's runtime stopped.
	Reason domain.CheckpointReason `json:"reason,omitempty"`
}

// ControlRequest is the input of UpdateControl. Action is one of domain.HostActions.
type ControlRequest struct {
	Action         string `json:"action"`
	DiscardChanges bool   `json:"discard_changes,omitempty"`
	// Replacement (reset_sandbox only) recreates the host for a template edit that changed
	// its compatibility fingerprint: once the sandbox is destroyed, the host takes the
	// replacement fingerprint and its members the generation, before they come back.
	Replacement *CommitHostReplacementInput `json:"replacement,omitempty"`
}

// ControlMember is one member in a control's result.
type ControlMember struct {
	RuntimeSession uuid.UUID `json:"runtime_session"`
	RoomID         uuid.UUID `json:"room_id"`
	Alias          string    `json:"alias"`
	WasLive        bool      `json:"was_live"`
	Restarted      bool      `json:"restarted"`
}

// ControlResult lists every member a control affected.
type ControlResult struct {
	Action domain.HostAction `json:"action"`
	// Replaced: the host took a replacement fingerprint and its members the generation.
	Replaced         bool            `json:"replaced,omitempty"`
	Members          []ControlMember `json:"members"`
	SandboxDestroyed bool            `json:"sandbox_destroyed"`
}

// TemplateApplyResult says what an apply did: nothing when its generation was superseded,
// else each session asked to apply it and each host recreated for it. A session's own
// outcome (effective, or failed with its recovery target) is on the session.
type TemplateApplyResult struct {
	Superseded bool               `json:"superseded"`
	Sessions   []TemplateApplyOne `json:"sessions"`
	Hosts      []TemplateApplyOne `json:"hosts"`
}

// TemplateApplyOne is one session or host of an apply.
type TemplateApplyOne struct {
	ID       uuid.UUID `json:"id"`
	Replaced bool      `json:"replaced,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// WorkspaceOpInput is one requested operation on a managed workspace.
type WorkspaceOpInput struct {
	Workspace    uuid.UUID               `json:"workspace"`
	Action       domain.WorkspaceAction  `json:"action"`
	ExportID     uuid.UUID               `json:"export_id,omitempty"`
	Retention    domain.ArchiveRetention `json:"retention,omitempty"`
	ForceDiscard bool                    `json:"force_discard,omitempty"`
	// ConfirmPermanent is delete_export's own confirmation.
	ConfirmPermanent bool `json:"confirm_permanent,omitempty"`
	// Repo is a repository operation's request (validated by the API).
	Repo *domain.RepoRequest `json:"repo,omitempty"`
}

// WorkspaceOpResult is the finished operation, the export it made or restored, and, for a
// blocked archive, what blocked it.
type WorkspaceOpResult struct {
	Operation domain.WorkspaceOperation `json:"operation"`
	Export    *domain.WorkspaceExport   `json:"export,omitempty"`
	Blockers  []string                  `json:"blockers,omitempty"`
	// Resumed: an interrupted operation was finished rather than a new one started.
	Resumed bool `json:"resumed,omitempty"`
	// Repository is what a repository operation produced.
	Repository *domain.RepoResult `json:"repository,omitempty"`
}
