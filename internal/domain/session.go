package domain

import (
	"time"

	"github.com/google/uuid"
)

// HostSession is the routing row of one room binding: the configuration the room's runtime
// runs with, its desired and effective generations and any pending change.
type HostSession struct {
	RuntimeSessionID    uuid.UUID
	AgentID             uuid.UUID
	TemplateID          uuid.UUID
	Alias               string
	RoomID              uuid.UUID
	Config              TemplateConfig
	DesiredGeneration   int64
	EffectiveGeneration int64
	PendingChange       *PendingChange
	// ProviderSessionID is the provider thread/session the runtime session is bound to.
	ProviderSessionID string
	// ProviderVersion is the version its provider last reported ("" unknown).
	ProviderVersion string
	// ProviderSessionKind is the ThreadKind of the bound provider session ("" unknown).
	ProviderSessionKind string
	// Failure is the permanent start failure the session holds in (nil when none).
	Failure *RuntimeFailure
	// Recycles counts the provider watchdog's recycles; LastRecycle is the latest (nil: none).
	Recycles    int
	LastRecycle *Recycle
	Removed     bool
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// PendingChange is a configuration change a live runtime has not accepted yet.
type PendingChange struct {
	Status     PendingChangeStatus `json:"status"`
	Generation int64               `json:"generation"`
	Reason     string              `json:"reason,omitempty"`
	// RecoveryTarget is the generation recovery treats as authoritative after a failure.
	RecoveryTarget int64 `json:"recovery_target,omitempty"`
	// Thread and ThreadKind are the provider thread a candidate of another thread kind
	// started: bound only when the generation is committed, so a candidate that never is
	// leaves the session its old thread.
	Thread     string `json:"thread,omitempty"`
	ThreadKind string `json:"thread_kind,omitempty"`
}

// Binding ties one runtime session to one room for one agent. An inactive binding is a
// tombstone that an authoritative re-add of the same room reuses.
type Binding struct {
	ID               uuid.UUID
	AgentID          uuid.UUID
	RoomID           uuid.UUID
	RuntimeSessionID uuid.UUID
	Active           bool
	Generation       int64
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// SessionAlias names a room session made from a template: "<template alias>-<room id>".
func SessionAlias(templateAlias string, room uuid.UUID) string {
	return templateAlias + "-" + room.String()
}

// Presence is how a room session's runtime appears to clients.
type Presence string

const (
	PresenceLive         Presence = "live"
	PresenceDormant      Presence = "dormant"
	PresenceDisconnected Presence = "disconnected"
	PresenceUnknown      Presence = "unknown"
	// PresenceFailed: the runtime cannot start until something changes (see the session's
	// failure).
	PresenceFailed Presence = "failed"
	// PresenceDegraded: the runtime is live with a readiness warning (a CLI that cannot
	// resume its sessions, one whose connection to Jam's tools failed): it answers, with
	// the caveat the warning says. It clears when the warning does.
	PresenceDegraded Presence = "degraded"
)

var Presences = NewEnum("presence", PresenceLive, PresenceDormant, PresenceDisconnected, PresenceUnknown, PresenceFailed,
	PresenceDegraded)

func (v *Presence) UnmarshalText(b []byte) error { return unmarshalEnum(Presences, b, v) }

// SessionPhase is where a RoomSession workflow is in its lifecycle.
type SessionPhase string

const (
	// PhaseDormant: registered, no runtime; the next message wakes it.
	PhaseDormant SessionPhase = "dormant"
	// PhaseStarting: a runtime is being prepared.
	PhaseStarting SessionPhase = "starting"
	// PhaseLive: a runtime is up and serves turns.
	PhaseLive SessionPhase = "live"
	// PhaseStopping: the runtime is being torn down.
	PhaseStopping SessionPhase = "stopping"
	// PhaseRetired: the room binding was removed; a re-add revives the same session.
	PhaseRetired SessionPhase = "retired"
	// PhaseFailed: the runtime could not start for a reason retrying will not fix. Messages
	// stay queued and no poke wakes it; a restart, a template save, a node that gains the
	// missing adapter or a node restarted since (its environment may have changed) does.
	PhaseFailed SessionPhase = "failed"
)

var SessionPhases = NewEnum("session_phase", PhaseDormant, PhaseStarting, PhaseLive, PhaseStopping, PhaseRetired, PhaseFailed)

// FailureClass says why a runtime cannot start, for people and for what may wake it again.
type FailureClass string

const (
	// FailureAdapterMissing: no live node has an adapter for the template's transport.
	FailureAdapterMissing FailureClass = "adapter_missing"
	// FailureExecutableRefused: the provider's executable cannot be resolved or verified.
	FailureExecutableRefused FailureClass = "executable_refused"
	// FailureExactResumeUnavailable: the bound provider session cannot be resumed exactly;
	// an explicit start-fresh is the way on.
	FailureExactResumeUnavailable FailureClass = "exact_resume_unavailable"
	// FailureNotReady: the provider did not finish its start handshake within its bound.
	FailureNotReady FailureClass = "not_ready"
	// FailureEnvRefused: the template names a variable no runtime may receive.
	FailureEnvRefused FailureClass = "env_refused"
	// FailureInvalidConfiguration: the configuration cannot run where it was placed.
	FailureInvalidConfiguration FailureClass = "invalid_configuration"
	// FailureSandbox: the node cannot run the sandbox (no usable sbx, a missing service
	// secret, a sandbox that is not provably Jam's, an incompatible host).
	FailureSandbox FailureClass = "sandbox_unavailable"
	// FailureRepository: one of the template's repositories could not be cloned.
	FailureRepository FailureClass = "repository_unavailable"
	// FailureCredentialMissing: a credential the template names (the model provider's key
	// variable) is not in the provider's environment on the node; setting it there and
	// restarting the node, or saving the template, lets it start.
	FailureCredentialMissing FailureClass = "credential_missing"
	// FailureStartFailed: the provider failed its start (it exited, or refused the
	// handshake) on every attempt.
	FailureStartFailed FailureClass = "start_failed"
	// FailureRecycleLoop: the watchdog recycled the runtime RecycleLoopCount times within
	// RecycleLoopWindow; restarting it again would only loop. A restart or a template
	// change (a higher ceiling) lets it start.
	FailureRecycleLoop FailureClass = "recycle_loop"
)

var FailureClasses = NewEnum("failure_class", FailureAdapterMissing, FailureExecutableRefused,
	FailureExactResumeUnavailable, FailureNotReady, FailureEnvRefused, FailureInvalidConfiguration, FailureSandbox,
	FailureRepository, FailureCredentialMissing, FailureStartFailed, FailureRecycleLoop)

func (v *FailureClass) UnmarshalText(b []byte) error { return unmarshalEnum(FailureClasses, b, v) }

// RuntimeFailure is a permanent start failure a session holds in.
type RuntimeFailure struct {
	Class  FailureClass `json:"class"`
	Reason string       `json:"reason"`
	At     time.Time    `json:"at"`
}

func (v *SessionPhase) UnmarshalText(b []byte) error { return unmarshalEnum(SessionPhases, b, v) }

// SessionStopReason is why a room session's runtime is stopped by request.
type SessionStopReason string

const (
	// StopOperator: an operator stopped this one room (session scope).
	StopOperator SessionStopReason = "operator"
	// StopAgent: the agent was stopped (agent scope); the session stays down until start.
	StopAgent SessionStopReason = "agent_stopped"
	// StopAgentDeleting: the agent is being deleted.
	StopAgentDeleting SessionStopReason = "agent_deleting"
	// StopHostStop, StopHostRestart, StopHostReset: a host-scope control stopped every member
	// of the session's runtime host (reset: before its sandbox is destroyed).
	StopHostStop    SessionStopReason = "host_stop"
	StopHostRestart SessionStopReason = "host_restart"
	StopHostReset   SessionStopReason = "host_reset"
)

// SessionStopReasons is parsed by the RoomSession stop validator, not by JSON decoding, so
// a bogus reason is a validation rejection rather than an undecodable update.
var SessionStopReasons = NewEnum("reason", StopOperator, StopAgent, StopAgentDeleting, StopHostStop, StopHostRestart, StopHostReset)

// DefaultIdleSecs is the idle-reap threshold when neither JAM_OWNED_RUNTIME_IDLE_SECS nor
// the setting says otherwise.
const DefaultIdleSecs = 600

// RuntimeHost is one execution boundary: one provider process and, sandboxed, one microVM.
type RuntimeHost struct {
	ID          uuid.UUID
	AgentID     uuid.UUID
	TemplateID  uuid.UUID
	Placement   Placement
	State       RuntimeHostState
	Node        string
	Sandboxed   bool
	SandboxName string
	// Compatibility is the host's CompatibilityFingerprint.
	Compatibility string
	CreatedAt     time.Time
	UpdatedAt     time.Time
}
