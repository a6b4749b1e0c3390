package domain

import (
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
)

// WorkspaceOperation is one operation on a managed workspace. Its identity, scope, kind,
// intent and start time are immutable; its state only moves forward.
type WorkspaceOperation struct {
	ID               uuid.UUID        `json:"id"`
	WorkspaceID      uuid.UUID        `json:"workspace_id"`
	RuntimeHostID    uuid.UUID        `json:"runtime_host_id"`
	RuntimeSessionID uuid.UUID        `json:"runtime_session_id"`
	Kind             WorkspaceOpKind  `json:"kind"`
	State            WorkspaceOpState `json:"state"`
	// Intent is the operation's immutable request as JSON (retention, export id, ...), so
	// recovery never parses it out of ResultClass.
	Intent string `json:"intent"`
	// ResultClass is a bounded, redacted classification of the outcome.
	ResultClass string     `json:"result_class"`
	Error       string     `json:"error"`
	StartedAt   time.Time  `json:"started_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
}

// workspaceOpArrows are the only legal state changes: six arrows out of pending and running.
var workspaceOpArrows = map[WorkspaceOpState][]WorkspaceOpState{
	OpPending: {OpRunning, OpFailed, OpCancelled},
	OpRunning: {OpSucceeded, OpFailed, OpCancelled},
}

// CheckWorkspaceOperation validates writing next over prev (nil when the record is new).
// It returns changed=false for an identical write, which must append no event.
func CheckWorkspaceOperation(prev *WorkspaceOperation, next WorkspaceOperation) (changed bool, err error) {
	record := fmt.Sprintf("workspace operation %s", next.ID)
	if err := next.validate(); err != nil {
		return false, err
	}
	if prev == nil {
		if next.State != OpPending && next.State != OpRunning {
			return false, &TransitionError{Record: record, Reason: fmt.Sprintf("a new operation starts pending or running, not %s", next.State)}
		}
		return true, nil
	}
	switch {
	case prev.ID != next.ID, prev.WorkspaceID != next.WorkspaceID, prev.RuntimeHostID != next.RuntimeHostID,
		prev.RuntimeSessionID != next.RuntimeSessionID, prev.Kind != next.Kind, prev.Intent != next.Intent,
		!prev.StartedAt.Equal(next.StartedAt):
		return false, &TransitionError{Record: record, Reason: "identity, scope, kind, intent and start time are immutable"}
	}
	if prev.sameMutable(next) {
		return false, nil
	}
	if prev.State.Terminal() {
		return false, &TransitionError{Record: record, Reason: fmt.Sprintf("%s is terminal", prev.State)}
	}
	if prev.State != next.State && !slices.Contains(workspaceOpArrows[prev.State], next.State) {
		return false, &TransitionError{Record: record, Reason: fmt.Sprintf("%s cannot move to %s", prev.State, next.State)}
	}
	return true, nil
}

func (o WorkspaceOperation) validate() error {
	var v Validations
	if o.ID == uuid.Nil {
		v.Add("id", "required")
	}
	if o.WorkspaceID == uuid.Nil {
		v.Add("workspace_id", "required")
	}
	if !WorkspaceOpKinds.Has(o.Kind) {
		v.AddErr("kind", mustParse(WorkspaceOpKinds, string(o.Kind)))
	}
	if !WorkspaceOpStates.Has(o.State) {
		v.AddErr("state", mustParse(WorkspaceOpStates, string(o.State)))
	}
	if o.StartedAt.IsZero() {
		v.Add("started_at", "required")
	}
	if o.State.Terminal() != (o.FinishedAt != nil) {
		v.Add("finished_at", "set exactly when the state is terminal")
	}
	if len(o.ResultClass) > 128 {
		v.Add("result_class", "at most 128 characters")
	}
	return v.Err()
}

func (o WorkspaceOperation) sameMutable(n WorkspaceOperation) bool {
	return o.State == n.State && o.ResultClass == n.ResultClass && o.Error == n.Error &&
		equalTimePtr(o.FinishedAt, n.FinishedAt)
}

// HostCleanupOperation is the forward-only record of removing one whole runtime host.
type HostCleanupOperation struct {
	ID                      uuid.UUID    `json:"id"`
	RuntimeHostID           uuid.UUID    `json:"runtime_host_id"`
	Stage                   CleanupStage `json:"stage"`
	PlannedRuntimeHostBytes int64        `json:"planned_runtime_host_bytes"`
	RemovedRuntimeHostBytes int64        `json:"removed_runtime_host_bytes"`
	RetainedExportBytes     int64        `json:"retained_export_bytes"`
	LastError               string       `json:"last_error"`
	CreatedAt               time.Time    `json:"created_at"`
	UpdatedAt               time.Time    `json:"updated_at"`
}

// CheckHostCleanup validates writing next over prev (nil when new). Stages advance one at a
// time (the root is never removed before the sandbox) and nothing follows succeeded.
func CheckHostCleanup(prev *HostCleanupOperation, next HostCleanupOperation) (changed bool, err error) {
	record := fmt.Sprintf("host cleanup %s", next.ID)
	var v Validations
	if next.ID == uuid.Nil {
		v.Add("id", "required")
	}
	if next.RuntimeHostID == uuid.Nil {
		v.Add("runtime_host_id", "required")
	}
	if !CleanupStages.Has(next.Stage) {
		v.AddErr("stage", mustParse(CleanupStages, string(next.Stage)))
	}
	if next.CreatedAt.IsZero() {
		v.Add("created_at", "required")
	}
	if next.PlannedRuntimeHostBytes < 0 || next.RemovedRuntimeHostBytes < 0 || next.RetainedExportBytes < 0 {
		v.Add("bytes", "must not be negative")
	}
	if err := v.Err(); err != nil {
		return false, err
	}
	if prev == nil {
		if next.Stage != CleanupPrepared {
			return false, &TransitionError{Record: record, Reason: fmt.Sprintf("a new cleanup starts %s, not %s", CleanupPrepared, next.Stage)}
		}
		return true, nil
	}
	if prev.ID != next.ID || prev.RuntimeHostID != next.RuntimeHostID || !prev.CreatedAt.Equal(next.CreatedAt) ||
		prev.PlannedRuntimeHostBytes != next.PlannedRuntimeHostBytes || prev.RetainedExportBytes != next.RetainedExportBytes {
		return false, &TransitionError{Record: record, Reason: "identity, host, plan and creation time are immutable"}
	}
	if prev.Stage == next.Stage && prev.RemovedRuntimeHostBytes == next.RemovedRuntimeHostBytes && prev.LastError == next.LastError {
		return false, nil
	}
	if prev.Stage == CleanupSucceeded {
		return false, &TransitionError{Record: record, Reason: "nothing follows succeeded"}
	}
	if step := CleanupStages.Index(next.Stage) - CleanupStages.Index(prev.Stage); step != 0 && step != 1 {
		return false, &TransitionError{Record: record, Reason: fmt.Sprintf("%s cannot move to %s", prev.Stage, next.Stage)}
	}
	return true, nil
}

func mustParse[T ~string](e Enum[T], s string) error {
	_, err := e.Parse(s)
	return err
}

func equalTimePtr(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}
