package contract

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/workspace"
)

// CaptureCheckpointResult describes the published generation.
type CaptureCheckpointResult struct {
	ID           uuid.UUID `json:"id"`
	Files        int       `json:"files"`
	Linked       int       `json:"linked"`
	PayloadBytes int64     `json:"payload_bytes"`
	// Skipped: the host has no member with provider state to capture.
	Skipped bool `json:"skipped,omitempty"`
}

// TemplateApplyInput names the generation of a template to apply.
type TemplateApplyInput struct {
	Template   uuid.UUID `json:"template"`
	Generation int64     `json:"generation"`
}

// CommitHostReplacementInput is a host recreated for a template generation.
type CommitHostReplacementInput struct {
	Host        uuid.UUID `json:"host"`
	Template    uuid.UUID `json:"template"`
	Generation  int64     `json:"generation"`
	Fingerprint string    `json:"fingerprint"`
}

// ContinuityReport is what inspection found, with a checksum over the evidence: an explicit
// start-fresh must name it, so it acts only on the state the operator saw.
type ContinuityReport struct {
	Host       uuid.UUID               `json:"host"`
	Status     domain.ContinuityStatus `json:"status"`
	Detail     string                  `json:"detail,omitempty"`
	Checkpoint *uuid.UUID              `json:"checkpoint,omitempty"`
	// CheckpointState is the newest checkpoint's verification on disk (complete, incomplete,
	// corrupt, missing).
	CheckpointState string `json:"checkpoint_state,omitempty"`
	// CheckpointProviderVersion is the provider version that took the newest checkpoint.
	CheckpointProviderVersion string              `json:"checkpoint_provider_version,omitempty"`
	Sessions                  []ContinuitySession `json:"sessions"`
	RuntimeRunning            bool                `json:"runtime_running"`
	CanStartFresh             bool                `json:"can_start_fresh"`
	EvidenceChecksum          string              `json:"evidence_checksum"`
}

// CleanupReport is the preflight of a whole-host cleanup: what would be removed, what is
// kept, and every reason it may not run yet.
type CleanupReport struct {
	Host     uuid.UUID       `json:"host"`
	Blockers []string        `json:"blockers"`
	Members  []CleanupMember `json:"members"`
	Sandbox  CleanupSandbox  `json:"sandbox"`
	// PlannedRuntimeHostBytes is what the host root holds; RetainedExportBytes what its
	// exports hold (never removed by cleanup).
	PlannedRuntimeHostBytes int64 `json:"planned_runtime_host_bytes"`
	RetainedExportBytes     int64 `json:"retained_export_bytes"`
}

// CleanupMember is one member's preservation as the preflight sees it.
type CleanupMember struct {
	RuntimeSession  uuid.UUID              `json:"runtime_session_id"`
	Membership      domain.MembershipState `json:"membership"`
	Source          domain.WorkspaceSource `json:"workspace_source,omitempty"`
	WorkspaceState  domain.WorkspaceState  `json:"workspace_state,omitempty"`
	VerifiedExport  *uuid.UUID             `json:"verified_export,omitempty"`
	RunningOp       *uuid.UUID             `json:"running_operation,omitempty"`
	LiveInWorker    bool                   `json:"live_in_worker"`
	NeedsPreserving bool                   `json:"needs_preserving"`
}

// HostCapacity is the bytes a runtime host's root holds on its node, per session workspace.
type HostCapacity struct {
	RootBytes      int64               `json:"root_bytes"`
	WorkspaceBytes map[uuid.UUID]int64 `json:"workspace_bytes"`
}

// HostLeases reaches the RuntimeHost workflows from an activity (client calls; the
// implementation lives beside the workflows, which this package cannot import).
//
// Every call carries an update id derived from the calling activity, so a retried activity
// attaches to the update its earlier attempt sent instead of sending a second one.
type HostLeases interface {
	// Acquire makes the host's sandbox ready for the member and counts its lease; node is
	// where placement put the member (LeaseRequest.Node).
	Acquire(ctx context.Context, updateID string, host, session uuid.UUID, node string) (HostLease, error)
	// Release drops the member's lease; the last release parks the sandbox (checkpointing
	// with reason when a turn ran).
	Release(ctx context.Context, updateID string, host, session uuid.UUID, reason domain.CheckpointReason) error
	// Permit and Unpermit bracket one turn of the member (the checkpoint coordinator).
	Permit(ctx context.Context, updateID string, host, session uuid.UUID) error
	Unpermit(ctx context.Context, updateID string, host, session uuid.UUID) error
	// Settle returns once the host's newest checkpoint holds its provider state as of now
	// (UpdateSettle); a host whose workflow is not running has nothing to settle.
	Settle(ctx context.Context, updateID string, host uuid.UUID) error
	// Replace recreates the host once (a reset_sandbox control) for a template edit that
	// changed its compatibility fingerprint, preserving every member.
	Replace(ctx context.Context, updateID string, rep CommitHostReplacementInput) (replaced bool, err error)
}

// MemberControl reaches the RoomSession workflows of a host's members.
type MemberControl interface {
	// StopMember stops the member's runtime with reason and reports whether it was live.
	StopMember(ctx context.Context, updateID string, session uuid.UUID, reason domain.SessionStopReason) (wasLive bool, err error)
	// RestartMember asks the member to come back live; it does not wait for the runtime.
	RestartMember(ctx context.Context, session uuid.UUID) error
	// RetireMember ends the member's workflow for good (its session was replaced).
	RetireMember(ctx context.Context, updateID string, session uuid.UUID) error
	// Wake starts or pokes the workflow of a bound session.
	Wake(ctx context.Context, b domain.Binding) error
	// ApplyConfig asks the member's workflow to move its runtime to generation gen (at its
	// turn boundary); handled=false when no workflow runs for it (no runtime to replace).
	ApplyConfig(ctx context.Context, updateID string, session uuid.UUID, gen int64) (handled bool, err error)
}

// HostLease is a member's lease on its runtime host.
type HostLease struct {
	Host        uuid.UUID `json:"host"`
	Node        string    `json:"node"`
	SandboxName string    `json:"sandbox_name"`
	Created     bool      `json:"created"`
	Fenced      bool      `json:"fenced"`
}

// LoadHostResult is what the RuntimeHost workflow needs of its record.
type LoadHostResult struct {
	Node        string                  `json:"node"`
	Placement   domain.Placement        `json:"placement"`
	State       domain.RuntimeHostState `json:"state"`
	SandboxName string                  `json:"sandbox_name"`
	AgentID     uuid.UUID               `json:"agent_id"`
}

// NodeReport is what a node says about itself.
type NodeReport struct {
	Node             string    `json:"node"`
	Hostname         string    `json:"hostname"`
	PID              int       `json:"pid"`
	Version          string    `json:"version"`
	GoVersion        string    `json:"go_version"`
	OS               string    `json:"os"`
	Arch             string    `json:"arch"`
	DataDir          string    `json:"data_dir"`
	DataDirFreeBytes uint64    `json:"data_dir_free_bytes"`
	StartedAt        time.Time `json:"started_at"`
	ReportedAt       time.Time `json:"reported_at"`
	// CLIs are the provider CLIs the node resolved for this report; CLIsUnanswered says why
	// there are none when they did not all answer in time.
	CLIs           []domain.NodeCLI `json:"clis,omitempty"`
	CLIsUnanswered string           `json:"clis_unanswered,omitempty"`
}

// WorkspaceRef names a workspace with its immutable owner.
type WorkspaceRef struct {
	Workspace uuid.UUID `json:"workspace"`
	Host      uuid.UUID `json:"host"`
	Session   uuid.UUID `json:"session"`
	// Export is the export the step creates, verifies, restores or deletes.
	Export uuid.UUID `json:"export,omitempty"`
}

// RemovalReport is a fresh removal inspection of one session workspace.
type RemovalReport struct {
	Repositories workspace.RepoInventory `json:"repositories"`
	Blockers     []string                `json:"blockers"`
	Bytes        int64                   `json:"bytes"`
}

// ContinuitySession is one member's continuity evidence.
type ContinuitySession struct {
	RuntimeSession    uuid.UUID `json:"runtime_session"`
	ProviderSessionID string    `json:"provider_session_id"`
	// Captured: the newest checkpoint holds this exact provider session.
	Captured bool `json:"captured"`
	// ProviderVersion is the version the session's provider last reported ("" unknown).
	ProviderVersion string `json:"provider_version,omitempty"`
	// LastResume is the latest resume observation from the newest checkpoint, if any.
	LastResume *ResumeEvidence `json:"last_resume,omitempty"`
}

// CleanupSandbox is the host's sandbox as the node's inventory reports it.
type CleanupSandbox struct {
	Name        string                    `json:"name,omitempty"`
	Disposition domain.SandboxDisposition `json:"disposition,omitempty"`
	Status      domain.SandboxStatus      `json:"status,omitempty"`
	// Absent: Docker confirmed it has no such sandbox.
	Absent bool `json:"absent"`
	// Unavailable: the inventory could not be read (a blocker, never taken for absence).
	Unavailable string `json:"unavailable,omitempty"`
}

// ResumeEvidence is one recorded resume attempt.
type ResumeEvidence struct {
	ID         uuid.UUID            `json:"id"`
	Outcome    domain.ResumeOutcome `json:"outcome"`
	Detail     string               `json:"detail,omitempty"`
	RecordedAt time.Time            `json:"recorded_at"`
}
