package domain

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// OperationKind is what a long operation does. Each answers 202 with an operation resource
// (GET /v1/operations/{id}) once its workflow or update has durably started.
type OperationKind string

const (
	OpKindHostControl      OperationKind = "host_control"
	OpKindCheckpoint       OperationKind = "checkpoint_create"
	OpKindCheckpointDelete OperationKind = "checkpoint_delete"
	OpKindStartFresh       OperationKind = "start_fresh"
	OpKindHostCleanup      OperationKind = "host_cleanup"
	OpKindWorkspace        OperationKind = "workspace_operation"
	OpKindTemplateApply    OperationKind = "template_apply"
	// OpKindDiscardUnsaved lifts a fenced host's checkpoint fence without a checkpoint.
	OpKindDiscardUnsaved OperationKind = "discard_unsaved"
)

var OperationKinds = NewEnum("kind", OpKindHostControl, OpKindCheckpoint, OpKindCheckpointDelete,
	OpKindStartFresh, OpKindHostCleanup, OpKindWorkspace, OpKindTemplateApply, OpKindDiscardUnsaved)

func (v *OperationKind) UnmarshalText(b []byte) error { return unmarshalEnum(OperationKinds, b, v) }

// OperationStatus is where a long operation is.
type OperationStatus string

const (
	OperationRunning   OperationStatus = "running"
	OperationSucceeded OperationStatus = "succeeded"
	OperationFailed    OperationStatus = "failed"
)

var OperationStatuses = NewEnum("status", OperationRunning, OperationSucceeded, OperationFailed)

func (v *OperationStatus) UnmarshalText(b []byte) error {
	return unmarshalEnum(OperationStatuses, b, v)
}

// TargetKind names what an operation acts on.
type TargetKind string

const (
	TargetHost       TargetKind = "runtime_host"
	TargetCheckpoint TargetKind = "checkpoint"
	TargetWorkspace  TargetKind = "workspace"
	TargetTemplate   TargetKind = "template"
	TargetSession    TargetKind = "runtime_session"
)

// Operation is the record of one long operation: the workflow (and, for an operation that
// is an update of an entity workflow, the update) that carries it. Its progress is read
// from Temporal; the outcome is recorded here once known.
type Operation struct {
	ID           uuid.UUID
	Kind         OperationKind
	TargetKind   TargetKind
	TargetID     string
	WorkflowID   string
	RunID        string
	UpdateID     string
	Status       OperationStatus
	Result       json.RawMessage
	FailureClass string
	FailureCode  string
	FailureText  string
	HTTPStatus   int
	CreatedAt    time.Time
	FinishedAt   *time.Time
}
