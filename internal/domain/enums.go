package domain

// AgentKind says who runs an agent: Jam (owned) or the user (attached).
type AgentKind string

const (
	AgentOwned    AgentKind = "owned"
	AgentAttached AgentKind = "attached"
)

var AgentKinds = NewEnum("kind", AgentOwned, AgentAttached)

func (v *AgentKind) UnmarshalText(b []byte) error { return unmarshalEnum(AgentKinds, b, v) }

// RunIntent is an agent's persisted run intent; a kept stop survives a restart of Jam.
type RunIntent string

const (
	RunIntentRunning RunIntent = "running"
	RunIntentStopped RunIntent = "stopped"
)

var RunIntents = NewEnum("run_intent", RunIntentRunning, RunIntentStopped)

func (v *RunIntent) UnmarshalText(b []byte) error { return unmarshalEnum(RunIntents, b, v) }

// Transport is how Jam talks to an agent runtime.
type Transport string

const (
	TransportCodexAppServer Transport = "codex-app-server"
	TransportCopilotSDK     Transport = "copilot-sdk"
	TransportClaudeCodeCLI  Transport = "claude-code-cli"
	TransportACP            Transport = "acp"
	TransportOpenCode       Transport = "opencode"
	TransportCursorACP      Transport = "cursor-acp"
	TransportAttachInbox    Transport = "attach-inbox"
	// TransportPTY is legacy: it is recognised so old records load, and refused everywhere else.
	TransportPTY Transport = "pty"
)

var Transports = NewEnum("transport",
	TransportCodexAppServer, TransportCopilotSDK, TransportClaudeCodeCLI, TransportACP,
	TransportOpenCode, TransportCursorACP, TransportAttachInbox, TransportPTY)

// UnmarshalText accepts every transport (records of attached agents and legacy ones load);
// an unknown name is refused with the transports a template may choose.
func (v *Transport) UnmarshalText(b []byte) error {
	if !Transports.Has(Transport(b)) {
		return unknownTransport()
	}
	*v = Transport(b)
	return nil
}

// Placement says whether a runtime host serves one session or every room of an agent.
type Placement string

const (
	PlacementShared    Placement = "shared_agent_host"
	PlacementDedicated Placement = "dedicated_session_host"
)

var Placements = NewEnum("placement", PlacementShared, PlacementDedicated)

func (v *Placement) UnmarshalText(b []byte) error { return unmarshalEnum(Placements, b, v) }

// ConfigurationSource says who configures a sandbox: Jam, or the operator's Docker environment files.
type ConfigurationSource string

const (
	ConfigJamManaged        ConfigurationSource = "jam_managed"
	ConfigDockerEnvironment ConfigurationSource = "docker_environment"
)

var ConfigurationSources = NewEnum("configuration_source", ConfigJamManaged, ConfigDockerEnvironment)

func (v *ConfigurationSource) UnmarshalText(b []byte) error {
	return unmarshalEnum(ConfigurationSources, b, v)
}

// WorkspaceSource says where a sandboxed runtime's workspace bytes come from.
type WorkspaceSource string

const (
	WorkspaceManaged          WorkspaceSource = "managed"
	WorkspacePrivateHostClone WorkspaceSource = "private_host_clone"
	WorkspaceDirectHost       WorkspaceSource = "direct_host"
)

var WorkspaceSources = NewEnum("workspace_source", WorkspaceManaged, WorkspacePrivateHostClone, WorkspaceDirectHost)

func (v *WorkspaceSource) UnmarshalText(b []byte) error { return unmarshalEnum(WorkspaceSources, b, v) }

// NetworkProfile is the network intent of a sandboxed runtime.
type NetworkProfile string

const (
	NetworkDeveloper  NetworkProfile = "developer"
	NetworkProduction NetworkProfile = "production"
)

var NetworkProfiles = NewEnum("network_profile", NetworkDeveloper, NetworkProduction)

func (v *NetworkProfile) UnmarshalText(b []byte) error { return unmarshalEnum(NetworkProfiles, b, v) }

// RuntimeHostState is the lifecycle of one execution boundary.
type RuntimeHostState string

const (
	HostProvisioning RuntimeHostState = "provisioning"
	HostActive       RuntimeHostState = "active"
	HostParked       RuntimeHostState = "parked"
	HostArchived     RuntimeHostState = "archived"
	HostRemoved      RuntimeHostState = "removed"
)

var RuntimeHostStates = NewEnum("runtime_host_state", HostProvisioning, HostActive, HostParked, HostArchived, HostRemoved)

func (v *RuntimeHostState) UnmarshalText(b []byte) error {
	return unmarshalEnum(RuntimeHostStates, b, v)
}

// MembershipState says whether a runtime session is running on its host.
type MembershipState string

const (
	MembershipActive  MembershipState = "active"
	MembershipDormant MembershipState = "dormant"
)

var MembershipStates = NewEnum("membership_state", MembershipActive, MembershipDormant)

func (v *MembershipState) UnmarshalText(b []byte) error { return unmarshalEnum(MembershipStates, b, v) }

// WorkspaceState is the lifecycle of a managed workspace.
type WorkspaceState string

const (
	WorkspacePlanned             WorkspaceState = "planned"
	WorkspaceProvisioning        WorkspaceState = "provisioning"
	WorkspaceReady               WorkspaceState = "ready"
	WorkspaceRecovering          WorkspaceState = "recovering"
	WorkspaceProvisionFailed     WorkspaceState = "provision_failed"
	WorkspaceNeedsReconciliation WorkspaceState = "needs_reconciliation"
	WorkspaceRemovalBlocked      WorkspaceState = "removal_blocked"
	WorkspaceArchived            WorkspaceState = "archived"
	WorkspaceRemoved             WorkspaceState = "removed"
)

var WorkspaceStates = NewEnum("workspace_state",
	WorkspacePlanned, WorkspaceProvisioning, WorkspaceReady, WorkspaceRecovering, WorkspaceProvisionFailed,
	WorkspaceNeedsReconciliation, WorkspaceRemovalBlocked, WorkspaceArchived, WorkspaceRemoved)

func (v *WorkspaceState) UnmarshalText(b []byte) error { return unmarshalEnum(WorkspaceStates, b, v) }

// WorkspaceOpKind is what a workspace operation does.
type WorkspaceOpKind string

const (
	WorkspaceOpProvision   WorkspaceOpKind = "provision"
	WorkspaceOpClone       WorkspaceOpKind = "clone"
	WorkspaceOpBranch      WorkspaceOpKind = "branch"
	WorkspaceOpCommit      WorkspaceOpKind = "commit"
	WorkspaceOpPush        WorkspaceOpKind = "push"
	WorkspaceOpPullRequest WorkspaceOpKind = "pull_request"
	WorkspaceOpChecks      WorkspaceOpKind = "checks"
	WorkspaceOpArchive     WorkspaceOpKind = "archive"
	WorkspaceOpExport      WorkspaceOpKind = "export"
	WorkspaceOpRestore     WorkspaceOpKind = "restore"
	WorkspaceOpRemove      WorkspaceOpKind = "remove"
	WorkspaceOpReconcile   WorkspaceOpKind = "reconcile"
)

var WorkspaceOpKinds = NewEnum("kind",
	WorkspaceOpProvision, WorkspaceOpClone, WorkspaceOpBranch, WorkspaceOpCommit, WorkspaceOpPush,
	WorkspaceOpPullRequest, WorkspaceOpChecks, WorkspaceOpArchive, WorkspaceOpExport, WorkspaceOpRestore,
	WorkspaceOpRemove, WorkspaceOpReconcile)

func (v *WorkspaceOpKind) UnmarshalText(b []byte) error { return unmarshalEnum(WorkspaceOpKinds, b, v) }

// WorkspaceOpState is the forward-only state of a workspace operation.
type WorkspaceOpState string

const (
	OpPending   WorkspaceOpState = "pending"
	OpRunning   WorkspaceOpState = "running"
	OpSucceeded WorkspaceOpState = "succeeded"
	OpFailed    WorkspaceOpState = "failed"
	OpCancelled WorkspaceOpState = "cancelled"
)

var WorkspaceOpStates = NewEnum("state", OpPending, OpRunning, OpSucceeded, OpFailed, OpCancelled)

func (v *WorkspaceOpState) UnmarshalText(b []byte) error {
	return unmarshalEnum(WorkspaceOpStates, b, v)
}

// Terminal reports whether no transition may leave this state.
func (v WorkspaceOpState) Terminal() bool {
	return v == OpSucceeded || v == OpFailed || v == OpCancelled
}

// CleanupStage is the forward-only stage of a whole-host cleanup, in execution order.
type CleanupStage string

const (
	CleanupPrepared       CleanupStage = "prepared"
	CleanupSandboxRemoved CleanupStage = "sandbox_removed"
	CleanupRootRemoved    CleanupStage = "root_removed"
	CleanupSucceeded      CleanupStage = "succeeded"
)

var CleanupStages = NewEnum("stage", CleanupPrepared, CleanupSandboxRemoved, CleanupRootRemoved, CleanupSucceeded)

func (v *CleanupStage) UnmarshalText(b []byte) error { return unmarshalEnum(CleanupStages, b, v) }

// CheckpointReason is why a provider checkpoint was taken.
type CheckpointReason string

const (
	CheckpointAfterTurn    CheckpointReason = "after_turn"
	CheckpointBeforeStop   CheckpointReason = "before_stop"
	CheckpointBeforeReset  CheckpointReason = "before_reset"
	CheckpointBeforeRemove CheckpointReason = "before_remove"
	CheckpointManual       CheckpointReason = "manual"
)

var CheckpointReasons = NewEnum("reason",
	CheckpointAfterTurn, CheckpointBeforeStop, CheckpointBeforeReset, CheckpointBeforeRemove, CheckpointManual)

func (v *CheckpointReason) UnmarshalText(b []byte) error {
	return unmarshalEnum(CheckpointReasons, b, v)
}

// ResumeOutcome is the immutable result of one exact-resume attempt.
type ResumeOutcome string

const (
	ResumeSucceeded ResumeOutcome = "succeeded"
	ResumeFailed    ResumeOutcome = "failed"
)

var ResumeOutcomes = NewEnum("outcome", ResumeSucceeded, ResumeFailed)

func (v *ResumeOutcome) UnmarshalText(b []byte) error { return unmarshalEnum(ResumeOutcomes, b, v) }

// PendingChangeStatus is the state of a configuration change that a live runtime has not accepted yet.
type PendingChangeStatus string

const (
	PendingRequested PendingChangeStatus = "requested"
	PendingApplying  PendingChangeStatus = "applying"
	PendingFailed    PendingChangeStatus = "failed"
)

var PendingChangeStatuses = NewEnum("pending_change_status", PendingRequested, PendingApplying, PendingFailed)

func (v *PendingChangeStatus) UnmarshalText(b []byte) error {
	return unmarshalEnum(PendingChangeStatuses, b, v)
}

// SandboxSupport classifies whether this node can run sandboxed runtimes. Host-native
// runtimes never depend on it.
type SandboxSupport string

const (
	SandboxSupported  SandboxSupport = "ok"
	SandboxAbsent     SandboxSupport = "absent"
	SandboxTooOld     SandboxSupport = "too_old"
	SandboxDaemonDown SandboxSupport = "daemon_down"
)

var SandboxSupports = NewEnum("sandbox_support", SandboxSupported, SandboxAbsent, SandboxTooOld, SandboxDaemonDown)

func (v *SandboxSupport) UnmarshalText(b []byte) error { return unmarshalEnum(SandboxSupports, b, v) }

// SandboxStatus is a sandbox's state as `sbx ls` reports it.
type SandboxStatus string

const (
	SandboxRunning SandboxStatus = "running"
	SandboxStopped SandboxStatus = "stopped"
)

// HostAction is a host-scope lifecycle control of a runtime host. Its scope is the host's
// durable membership, never the row an operator clicked.
type HostAction string

const (
	// HostStop stops every member and parks the sandbox.
	HostStop HostAction = "stop"
	// HostRestart stops every member, parks the sandbox, and restarts the members that were live.
	HostRestart HostAction = "restart"
	// HostResetSandbox stops every member, destroys the sandbox once (verified), and restarts
	// the members that were live in a fresh one.
	HostResetSandbox HostAction = "reset_sandbox"
)

var HostActions = NewEnum("action", HostStop, HostRestart, HostResetSandbox)

func (v *HostAction) UnmarshalText(b []byte) error { return unmarshalEnum(HostActions, b, v) }

// StopReason is the RoomSession stop reason a host action stops members with.
func (a HostAction) StopReason() SessionStopReason {
	switch a {
	case HostRestart:
		return StopHostRestart
	case HostResetSandbox:
		return StopHostReset
	default:
		return StopHostStop
	}
}

// SandboxDisposition is what the sandbox inventory concludes about one Jam-named sandbox or
// owner marker. It is a report: no disposition authorizes a mutation.
type SandboxDisposition string

const (
	DispositionHealthy SandboxDisposition = "healthy"
	// DispositionPersistedWithoutOwnerMarker: Docker has a sandbox with a Jam name but no host
	// marker proves Jam made it.
	DispositionPersistedWithoutOwnerMarker SandboxDisposition = "persisted_without_owner_marker"
	// DispositionOwnerWithoutDocker: a marker whose runtime host still exists, sandbox absent.
	DispositionOwnerWithoutDocker SandboxDisposition = "owner_without_docker"
	// DispositionOrphanOwnerMarker: a marker whose sandbox and runtime host are both gone.
	DispositionOrphanOwnerMarker SandboxDisposition = "orphan_owner_marker"
	// DispositionDedicatedCompatibility: a legacy session-owned marker that reuse would accept
	// only after a live nonce check.
	DispositionDedicatedCompatibility SandboxDisposition = "dedicated_session_compatibility_verification_required"
	// DispositionOwnershipMismatch: the marker's plan is not the runtime host's, or its name
	// does not derive from its owner.
	DispositionOwnershipMismatch SandboxDisposition = "ownership_mismatch"
)

var SandboxDispositions = NewEnum("disposition", DispositionHealthy, DispositionPersistedWithoutOwnerMarker,
	DispositionOwnerWithoutDocker, DispositionOrphanOwnerMarker, DispositionDedicatedCompatibility,
	DispositionOwnershipMismatch)

func (v *SandboxDisposition) UnmarshalText(b []byte) error {
	return unmarshalEnum(SandboxDispositions, b, v)
}
