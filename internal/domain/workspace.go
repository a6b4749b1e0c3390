package domain

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// ManagedWorkspace is one runtime session's workspace on its runtime host. Its id is the
// runtime session's (one workspace per session).
type ManagedWorkspace struct {
	ID               uuid.UUID       `json:"id"`
	RuntimeHostID    uuid.UUID       `json:"runtime_host_id"`
	RuntimeSessionID uuid.UUID       `json:"runtime_session_id"`
	Source           WorkspaceSource `json:"source"`
	HostPath         string          `json:"host_path,omitempty"`
	State            WorkspaceState  `json:"state"`
	CreatedAt        time.Time       `json:"created_at"`
	UpdatedAt        time.Time       `json:"updated_at"`
}

// WorkspaceExport is one immutable export of a workspace (and the checkpoint generation it
// was taken with). Its owner triple never changes, so a restore can prove whose it is; the
// record outlives its bytes (DeletedAt) and its workspace.
type WorkspaceExport struct {
	ID               uuid.UUID  `json:"id"`
	WorkspaceID      uuid.UUID  `json:"workspace_id"`
	RuntimeHostID    uuid.UUID  `json:"runtime_host_id"`
	RuntimeSessionID uuid.UUID  `json:"runtime_session_id"`
	CheckpointID     *uuid.UUID `json:"checkpoint_id,omitempty"`
	ManifestChecksum string     `json:"manifest_checksum"`
	Bytes            int64      `json:"bytes"`
	CreatedAt        time.Time  `json:"created_at"`
	DeletedAt        *time.Time `json:"deleted_at,omitempty"`
}

// ArchiveRetention says which older exports an archive keeps.
type ArchiveRetention string

const (
	// RetainLatest keeps only the export the archive made.
	RetainLatest ArchiveRetention = "keep_latest"
	// RetainAll keeps every export.
	RetainAll ArchiveRetention = "keep_all"
)

var ArchiveRetentions = NewEnum("retention", RetainLatest, RetainAll)

func (v *ArchiveRetention) UnmarshalText(b []byte) error {
	return unmarshalEnum(ArchiveRetentions, b, v)
}

// WorkspaceAction is what a WorkspaceOp workflow was asked to do.
type WorkspaceAction string

const (
	WorkspaceActionArchive        WorkspaceAction = "archive"
	WorkspaceActionExport         WorkspaceAction = "export"
	WorkspaceActionRestore        WorkspaceAction = "restore"
	WorkspaceActionDeleteExport   WorkspaceAction = "delete_export"
	WorkspaceActionRetryReconcile WorkspaceAction = "retry_reconcile"
	// Repository operations in the session's workspace (git and gh in the guest).
	WorkspaceActionClone       WorkspaceAction = "clone"
	WorkspaceActionBranch      WorkspaceAction = "branch"
	WorkspaceActionCommit      WorkspaceAction = "commit"
	WorkspaceActionPush        WorkspaceAction = "push"
	WorkspaceActionPullRequest WorkspaceAction = "pull_request"
	WorkspaceActionChecks      WorkspaceAction = "checks"
)

var WorkspaceActions = NewEnum("action", WorkspaceActionArchive, WorkspaceActionExport, WorkspaceActionRestore,
	WorkspaceActionDeleteExport, WorkspaceActionRetryReconcile, WorkspaceActionClone, WorkspaceActionBranch,
	WorkspaceActionCommit, WorkspaceActionPush, WorkspaceActionPullRequest, WorkspaceActionChecks)

func (v *WorkspaceAction) UnmarshalText(b []byte) error { return unmarshalEnum(WorkspaceActions, b, v) }

// OpKind is the operation kind an action records: a restore is recorded as a reconcile
// (result restored_export) and an export deletion as a remove.
func (a WorkspaceAction) OpKind() WorkspaceOpKind {
	switch a {
	case WorkspaceActionArchive:
		return WorkspaceOpArchive
	case WorkspaceActionExport:
		return WorkspaceOpExport
	case WorkspaceActionDeleteExport:
		return WorkspaceOpRemove
	case WorkspaceActionClone:
		return WorkspaceOpClone
	case WorkspaceActionBranch:
		return WorkspaceOpBranch
	case WorkspaceActionCommit:
		return WorkspaceOpCommit
	case WorkspaceActionPush:
		return WorkspaceOpPush
	case WorkspaceActionPullRequest:
		return WorkspaceOpPullRequest
	case WorkspaceActionChecks:
		return WorkspaceOpChecks
	default:
		return WorkspaceOpReconcile
	}
}

// WorkspaceOpIntent is a workspace operation's immutable request, stored as the operation's
// intent so recovery finishes exactly what was asked (never parsed out of a result class).
type WorkspaceOpIntent struct {
	Action WorkspaceAction `json:"action"`
	// ExportID is the export an archive or export creates, or the one a restore or deletion
	// names.
	ExportID     uuid.UUID        `json:"export_id,omitempty"`
	Retention    ArchiveRetention `json:"retention,omitempty"`
	ForceDiscard bool             `json:"force_discard,omitempty"`
	// Repo is a repository operation's validated request.
	Repo *RepoRequest `json:"repo,omitempty"`
	// Template: a clone of one of the template's repositories, run by the runtime's
	// preparation on its node rather than by the workspace's WorkspaceOp workflow.
	Template bool `json:"template,omitempty"`
}

// Encode is the intent as stored.
func (i WorkspaceOpIntent) Encode() string {
	b, _ := json.Marshal(i)
	return string(b)
}

// DecodeWorkspaceOpIntent reads a stored intent.
func DecodeWorkspaceOpIntent(s string) (WorkspaceOpIntent, error) {
	var i WorkspaceOpIntent
	if err := json.Unmarshal([]byte(s), &i); err != nil {
		return i, fmt.Errorf("workspace operation intent: %w", err)
	}
	if !WorkspaceActions.Has(i.Action) {
		return i, fmt.Errorf("workspace operation intent: unknown action %q", i.Action)
	}
	return i, nil
}

// Bounded result classes of workspace operations.
const (
	ResultArchived       = "archived"
	ResultExported       = "exported"
	ResultRestoredExport = "restored_export"
	ResultExportDeleted  = "export_deleted"
	ResultReconciled     = "reconciled"
	ResultRemovalBlocked = "removal_blocked"
	ResultRefused        = "refused"
	ResultFailed         = "failed"
	// ResultInterrupted: a repository operation cut by a crash; it is never replayed.
	ResultInterrupted = "interrupted"
	ResultCloned      = "cloned"
	ResultBranched    = "branched"
	ResultCommitted   = "committed"
	ResultPushed      = "pushed"
	ResultPullRequest = "pull_request"
	ResultChecked     = "checks"
)

// RetentionAge is the age past which a kept export or checkpoint payload is an automatic
// cleanup candidate. Retention is advisory: Jam reports candidates and deletes nothing on
// its own.
const RetentionAge = 30 * 24 * time.Hour

// CleanupCandidate reports whether a kept export or checkpoint payload created at created is
// an automatic cleanup candidate at now: older than RetentionAge, not the newest generation
// of its workspace or host, and not referenced by continuity evidence.
func CleanupCandidate(created, now time.Time, newest, referenced bool) bool {
	return !newest && !referenced && now.Sub(created) > RetentionAge
}
