package api

import (
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/workspace"
)

// The REST shapes of what workflows and node probes report. They are the API's own types,
// mapped field by field from the contract's, so a change to a workflow's payload never
// silently changes a response: the mapping (and the OpenAPI test) must change with it.

// HostLeaseBody is a RuntimeHost workflow's lease state.
type HostLeaseBody struct {
	Leases      []uuid.UUID `json:"leases"`
	Ready       bool        `json:"ready"`
	ParkFailed  bool        `json:"park_failed"`
	Controlling bool        `json:"controlling"`
	Permits     int         `json:"permits"`
	Quiesced    bool        `json:"quiesced"`
	LastError   string      `json:"last_error,omitempty"`
	Checkpoints int         `json:"checkpoints"`
	// Moves counts the times the host moved to another node (its own was fenced, or drained
	// while the host was parked).
	Moves int `json:"moves,omitempty"`
	// Unsaved: the host is fenced because its last teardown's checkpoint failed; no member
	// starts until a checkpoint succeeds or an operator discards it.
	Unsaved *UnsavedBody `json:"unsaved,omitempty"`
}

// UnsavedBody is a fenced host's failed teardown checkpoint.
type UnsavedBody struct {
	Reason   domain.CheckpointReason `json:"reason"`
	Error    string                  `json:"error"`
	Since    time.Time               `json:"since"`
	Attempts int                     `json:"attempts"`
}

func hostLeaseBody(s contract.RuntimeHostStatus) *HostLeaseBody {
	b := &HostLeaseBody{Leases: s.Leases, Ready: s.Ready, ParkFailed: s.ParkFailed, Controlling: s.Controlling,
		Permits: s.Permits, Quiesced: s.Quiesced, LastError: s.LastError, Checkpoints: s.Checkpoints,
		Moves: s.Moves}
	if u := s.Unsaved; u != nil {
		b.Unsaved = &UnsavedBody{Reason: u.Reason, Error: u.Error, Since: u.Since.UTC(), Attempts: u.Attempts}
	}
	return b
}

// ContinuityReportBody is a continuity inspection of a host.
type ContinuityReportBody struct {
	Host                      uuid.UUID               `json:"host"`
	Status                    domain.ContinuityStatus `json:"status"`
	Detail                    string                  `json:"detail,omitempty"`
	Checkpoint                *uuid.UUID              `json:"checkpoint,omitempty"`
	CheckpointState           string                  `json:"checkpoint_state,omitempty"`
	CheckpointProviderVersion string                  `json:"checkpoint_provider_version,omitempty"`
	Sessions                  []ContinuitySessionBody `json:"sessions"`
	RuntimeRunning            bool                    `json:"runtime_running"`
	CanStartFresh             bool                    `json:"can_start_fresh"`
	EvidenceChecksum          string                  `json:"evidence_checksum"`
}

// ContinuitySessionBody is one bound session of a continuity inspection.
type ContinuitySessionBody struct {
	RuntimeSession    uuid.UUID           `json:"runtime_session"`
	ProviderSessionID string              `json:"provider_session_id"`
	Captured          bool                `json:"captured"`
	ProviderVersion   string              `json:"provider_version,omitempty"`
	LastResume        *ResumeEvidenceBody `json:"last_resume,omitempty"`
}

// ResumeEvidenceBody is a recorded resume observation.
type ResumeEvidenceBody struct {
	ID         uuid.UUID            `json:"id"`
	Outcome    domain.ResumeOutcome `json:"outcome"`
	Detail     string               `json:"detail,omitempty"`
	RecordedAt time.Time            `json:"recorded_at"`
}

func continuityReportBody(r contract.ContinuityReport) ContinuityReportBody {
	out := ContinuityReportBody{Host: r.Host, Status: r.Status, Detail: r.Detail, Checkpoint: r.Checkpoint,
		CheckpointState: r.CheckpointState, CheckpointProviderVersion: r.CheckpointProviderVersion,
		Sessions: make([]ContinuitySessionBody, len(r.Sessions)), RuntimeRunning: r.RuntimeRunning,
		CanStartFresh: r.CanStartFresh, EvidenceChecksum: r.EvidenceChecksum}
	for i, s := range r.Sessions {
		out.Sessions[i] = ContinuitySessionBody{RuntimeSession: s.RuntimeSession, ProviderSessionID: s.ProviderSessionID,
			Captured: s.Captured, ProviderVersion: s.ProviderVersion}
		if e := s.LastResume; e != nil {
			out.Sessions[i].LastResume = &ResumeEvidenceBody{ID: e.ID, Outcome: e.Outcome, Detail: e.Detail, RecordedAt: e.RecordedAt}
		}
	}
	return out
}

// NodeReportBody is what a node says of itself when probed.
type NodeReportBody struct {
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
	// CLIs are the provider CLIs the node resolved for this report (also recorded on the
	// node); CLIsUnanswered says why there are none when they did not all answer in time.
	CLIs           []domain.NodeCLI `json:"clis,omitempty"`
	CLIsUnanswered string           `json:"clis_unanswered,omitempty"`
}

func nodeReportBody(r contract.NodeReport) NodeReportBody {
	return NodeReportBody{Node: r.Node, Hostname: r.Hostname, PID: r.PID, Version: r.Version, GoVersion: r.GoVersion,
		OS: r.OS, Arch: r.Arch, DataDir: r.DataDir, DataDirFreeBytes: r.DataDirFreeBytes, StartedAt: r.StartedAt,
		ReportedAt: r.ReportedAt, CLIs: r.CLIs, CLIsUnanswered: r.CLIsUnanswered}
}

// CleanupReportBody is a host cleanup preflight.
type CleanupReportBody struct {
	Host                    uuid.UUID           `json:"host"`
	Blockers                []string            `json:"blockers"`
	Members                 []CleanupMemberBody `json:"members"`
	Sandbox                 CleanupSandboxBody  `json:"sandbox"`
	PlannedRuntimeHostBytes int64               `json:"planned_runtime_host_bytes"`
	RetainedExportBytes     int64               `json:"retained_export_bytes"`
}

// CleanupMemberBody is one member of a host cleanup preflight.
type CleanupMemberBody struct {
	RuntimeSession  uuid.UUID              `json:"runtime_session_id"`
	Membership      domain.MembershipState `json:"membership"`
	Source          domain.WorkspaceSource `json:"workspace_source,omitempty"`
	WorkspaceState  domain.WorkspaceState  `json:"workspace_state,omitempty"`
	VerifiedExport  *uuid.UUID             `json:"verified_export,omitempty"`
	RunningOp       *uuid.UUID             `json:"running_operation,omitempty"`
	LiveInWorker    bool                   `json:"live_in_worker"`
	NeedsPreserving bool                   `json:"needs_preserving"`
}

// CleanupSandboxBody is the sandbox part of a host cleanup preflight.
type CleanupSandboxBody struct {
	Name        string                    `json:"name,omitempty"`
	Disposition domain.SandboxDisposition `json:"disposition,omitempty"`
	Status      domain.SandboxStatus      `json:"status,omitempty"`
	Absent      bool                      `json:"absent"`
	Unavailable string                    `json:"unavailable,omitempty"`
}

func cleanupReportBody(r contract.CleanupReport) CleanupReportBody {
	out := CleanupReportBody{Host: r.Host, Blockers: r.Blockers, Members: make([]CleanupMemberBody, len(r.Members)),
		Sandbox: CleanupSandboxBody{Name: r.Sandbox.Name, Disposition: r.Sandbox.Disposition, Status: r.Sandbox.Status,
			Absent: r.Sandbox.Absent, Unavailable: r.Sandbox.Unavailable},
		PlannedRuntimeHostBytes: r.PlannedRuntimeHostBytes, RetainedExportBytes: r.RetainedExportBytes}
	if out.Blockers == nil {
		out.Blockers = []string{}
	}
	for i, m := range r.Members {
		out.Members[i] = CleanupMemberBody{RuntimeSession: m.RuntimeSession, Membership: m.Membership, Source: m.Source,
			WorkspaceState: m.WorkspaceState, VerifiedExport: m.VerifiedExport, RunningOp: m.RunningOp,
			LiveInWorker: m.LiveInWorker, NeedsPreserving: m.NeedsPreserving}
	}
	return out
}

// RemovalReportBody is a workspace removal inspection.
type RemovalReportBody struct {
	Repositories workspace.RepoInventory `json:"repositories"`
	Blockers     []string                `json:"blockers"`
	Bytes        int64                   `json:"bytes"`
}

func removalReportBody(r contract.RemovalReport) RemovalReportBody {
	out := RemovalReportBody{Repositories: r.Repositories, Blockers: r.Blockers, Bytes: r.Bytes}
	if out.Blockers == nil {
		out.Blockers = []string{}
	}
	return out
}

// HostControlResult is the result of a host control (the operation's result).
type HostControlResult struct {
	Action           domain.HostAction   `json:"action"`
	Replaced         bool                `json:"replaced,omitempty"`
	Members          []HostControlMember `json:"members"`
	SandboxDestroyed bool                `json:"sandbox_destroyed"`
}

// HostControlMember is one member a host control affected.
type HostControlMember struct {
	RuntimeSession uuid.UUID `json:"runtime_session"`
	RoomID         uuid.UUID `json:"room_id"`
	Alias          string    `json:"alias"`
	WasLive        bool      `json:"was_live"`
	Restarted      bool      `json:"restarted"`
}

func hostControlResult(r contract.ControlResult) HostControlResult {
	out := HostControlResult{Action: r.Action, Replaced: r.Replaced, Members: make([]HostControlMember, len(r.Members)),
		SandboxDestroyed: r.SandboxDestroyed}
	for i, m := range r.Members {
		out.Members[i] = HostControlMember{RuntimeSession: m.RuntimeSession, RoomID: m.RoomID, Alias: m.Alias,
			WasLive: m.WasLive, Restarted: m.Restarted}
	}
	return out
}

// HostCleanupResultBody is the result of a host cleanup (the operation's result).
type HostCleanupResultBody struct {
	Cleanup domain.HostCleanupOperation `json:"cleanup"`
	Report  *CleanupReportBody          `json:"report,omitempty"`
}

func hostCleanupResultBody(r contract.HostCleanupResult) HostCleanupResultBody {
	out := HostCleanupResultBody{Cleanup: r.Cleanup}
	if r.Report != nil {
		rep := cleanupReportBody(*r.Report)
		out.Report = &rep
	}
	return out
}
