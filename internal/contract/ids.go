package contract

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// Workflow ids are "<Type>:<key>". They are built only here, and every builder has an
// inverse parser so an id seen in the Temporal UI can be traced back to its record.

const (
	TypeRoomSession          = "RoomSession"
	TypeReconcile            = "Reconcile"
	TypeRuntimeHost          = "RuntimeHost"
	TypeTemplateApply        = "TemplateApply"
	TypeWorkspaceOp          = "WorkspaceOp"
	TypeHostCleanup          = "HostCleanup"
	TypeContinuityReset      = "ContinuityReset"
	TypeCheckpointDeletion   = "CheckpointDeletion"
	TypeNodeProbe            = "NodeProbe"
	TypeSandboxProbe         = "SandboxProbe"
	TypeSandboxInventory     = "SandboxInventory"
	TypeContinuityInspection = "ContinuityInspection"
	TypeCleanupInspection    = "CleanupInspection"
	TypeHostMeasure          = "HostMeasure"
	TypeHostNetwork          = "HostNetwork"
	TypeRemovalInspection    = "RemovalInspection"
)

func uuidID(typ string, id uuid.UUID) string { return typ + ":" + id.String() }

func parseUUIDID(typ, id string) (uuid.UUID, error) {
	key, err := keyOf(typ, id)
	if err != nil {
		return uuid.Nil, err
	}
	u, err := domain.ParseID("workflow_id", key)
	if err != nil {
		return uuid.Nil, fmt.Errorf("workflow id %q: %w", id, err)
	}
	return u, nil
}

func keyOf(typ, id string) (string, error) {
	key, ok := strings.CutPrefix(id, typ+":")
	if !ok || key == "" {
		return "", fmt.Errorf("workflow id %q is not a %s id", id, typ)
	}
	return key, nil
}

// RoomSessionID is the entity workflow of one runtime session.
func RoomSessionID(runtimeSession uuid.UUID) string { return uuidID(TypeRoomSession, runtimeSession) }

// ParseRoomSessionID inverts RoomSessionID.
func ParseRoomSessionID(id string) (uuid.UUID, error) { return parseUUIDID(TypeRoomSession, id) }

// RuntimeHostID is the entity workflow of one runtime host.
func RuntimeHostID(host uuid.UUID) string { return uuidID(TypeRuntimeHost, host) }

// ParseRuntimeHostID inverts RuntimeHostID.
func ParseRuntimeHostID(id string) (uuid.UUID, error) { return parseUUIDID(TypeRuntimeHost, id) }

// TemplateApplyID names the apply of one saved template generation.
func TemplateApplyID(template uuid.UUID, generation int64) string {
	return fmt.Sprintf("%s:%s:%d", TypeTemplateApply, template, generation)
}

// ParseTemplateApplyID inverts TemplateApplyID.
func ParseTemplateApplyID(id string) (uuid.UUID, int64, error) {
	key, err := keyOf(TypeTemplateApply, id)
	if err != nil {
		return uuid.Nil, 0, err
	}
	tmpl, gen, ok := strings.Cut(key, ":")
	if !ok {
		return uuid.Nil, 0, fmt.Errorf("workflow id %q has no generation", id)
	}
	t, err := domain.ParseID("workflow_id", tmpl)
	if err != nil {
		return uuid.Nil, 0, fmt.Errorf("workflow id %q: %w", id, err)
	}
	g, err := strconv.ParseInt(gen, 10, 64)
	if err != nil || g < 1 || strconv.FormatInt(g, 10) != gen {
		return uuid.Nil, 0, fmt.Errorf("workflow id %q: generation must be a positive integer", id)
	}
	return t, g, nil
}

// WorkspaceOpID is the single running operation of one workspace (started with conflict policy FAIL).
func WorkspaceOpID(workspace uuid.UUID) string { return uuidID(TypeWorkspaceOp, workspace) }

// ParseWorkspaceOpID inverts WorkspaceOpID.
func ParseWorkspaceOpID(id string) (uuid.UUID, error) { return parseUUIDID(TypeWorkspaceOp, id) }

// HostCleanupID is the cleanup of one runtime host.
func HostCleanupID(host uuid.UUID) string { return uuidID(TypeHostCleanup, host) }

// ParseHostCleanupID inverts HostCleanupID.
func ParseHostCleanupID(id string) (uuid.UUID, error) { return parseUUIDID(TypeHostCleanup, id) }

// ContinuityResetID is the start-fresh reset of one runtime host.
func ContinuityResetID(host uuid.UUID) string { return uuidID(TypeContinuityReset, host) }

// ParseContinuityResetID inverts ContinuityResetID.
func ParseContinuityResetID(id string) (uuid.UUID, error) {
	return parseUUIDID(TypeContinuityReset, id)
}

// CheckpointDeletionID is the payload deletion of one checkpoint.
func CheckpointDeletionID(checkpoint uuid.UUID) string {
	return uuidID(TypeCheckpointDeletion, checkpoint)
}

// ParseCheckpointDeletionID inverts CheckpointDeletionID.
func ParseCheckpointDeletionID(id string) (uuid.UUID, error) {
	return parseUUIDID(TypeCheckpointDeletion, id)
}

// ContinuityInspectionID is the continuity inspection of one runtime host; concurrent
// requests share one run.
func ContinuityInspectionID(host uuid.UUID) string { return uuidID(TypeContinuityInspection, host) }

// ParseContinuityInspectionID inverts ContinuityInspectionID.
func ParseContinuityInspectionID(id string) (uuid.UUID, error) {
	return parseUUIDID(TypeContinuityInspection, id)
}

// CleanupInspectionID is the cleanup preflight of one runtime host; concurrent requests
// share one run.
func CleanupInspectionID(host uuid.UUID) string { return uuidID(TypeCleanupInspection, host) }

// ParseCleanupInspectionID inverts CleanupInspectionID.
func ParseCleanupInspectionID(id string) (uuid.UUID, error) {
	return parseUUIDID(TypeCleanupInspection, id)
}

// HostMeasureID measures one runtime host's bytes on its node.
func HostMeasureID(host uuid.UUID) string { return uuidID(TypeHostMeasure, host) }

// ParseHostMeasureID inverts HostMeasureID.
func ParseHostMeasureID(id string) (uuid.UUID, error) { return parseUUIDID(TypeHostMeasure, id) }

// HostNetworkID inspects one runtime host's sandbox network on its node.
func HostNetworkID(host uuid.UUID) string { return uuidID(TypeHostNetwork, host) }

// ParseHostNetworkID inverts HostNetworkID.
func ParseHostNetworkID(id string) (uuid.UUID, error) { return parseUUIDID(TypeHostNetwork, id) }

// RemovalInspectionID is the removal inspection of one workspace.
func RemovalInspectionID(workspace uuid.UUID) string { return uuidID(TypeRemovalInspection, workspace) }

// ParseRemovalInspectionID inverts RemovalInspectionID.
func ParseRemovalInspectionID(id string) (uuid.UUID, error) {
	return parseUUIDID(TypeRemovalInspection, id)
}

// NodeProbeID is the probe of one node; concurrent probes of a node share one run.
func NodeProbeID(node string) string { return TypeNodeProbe + ":" + node }

// ParseNodeProbeID inverts NodeProbeID.
func ParseNodeProbeID(id string) (string, error) { return parseNodeID(TypeNodeProbe, id) }

// SandboxProbeID is the sandbox support probe of one node; concurrent probes share one run.
func SandboxProbeID(node string) string { return TypeSandboxProbe + ":" + node }

// ParseSandboxProbeID inverts SandboxProbeID.
func ParseSandboxProbeID(id string) (string, error) { return parseNodeID(TypeSandboxProbe, id) }

// SandboxInventoryID is the sandbox inventory of one node; concurrent requests share one run.
func SandboxInventoryID(node string) string { return TypeSandboxInventory + ":" + node }

// ParseSandboxInventoryID inverts SandboxInventoryID.
func ParseSandboxInventoryID(id string) (string, error) {
	return parseNodeID(TypeSandboxInventory, id)
}

func parseNodeID(typ, id string) (string, error) {
	node, err := keyOf(typ, id)
	if err != nil {
		return "", err
	}
	if err := domain.ValidateNodeName(node); err != nil {
		return "", fmt.Errorf("workflow id %q: %w", id, err)
	}
	return node, nil
}

// WorkflowTypes are every Jam workflow type.
var WorkflowTypes = []string{TypeRoomSession, TypeReconcile, TypeRuntimeHost, TypeTemplateApply, TypeWorkspaceOp,
	TypeHostCleanup, TypeContinuityReset, TypeCheckpointDeletion, TypeNodeProbe, TypeSandboxProbe, TypeSandboxInventory,
	TypeContinuityInspection, TypeCleanupInspection, TypeHostMeasure, TypeRemovalInspection, TypeHostNetwork, TypeGitHubReadiness,
	TypeTemplateCheck}

// IsWorkflowType reports whether name is a Jam workflow type.
func IsWorkflowType(name string) bool {
	for _, t := range WorkflowTypes {
		if t == name {
			return true
		}
	}
	return false
}

// ParseWorkflowType names the Jam workflow type of a workflow id: "<Type>:<key>", or the
// Reconcile schedule's runs ("Reconcile-<time>").
func ParseWorkflowType(id string) (string, error) {
	typ, key, ok := strings.Cut(id, ":")
	if ok && key != "" && IsWorkflowType(typ) {
		return typ, nil
	}
	if strings.HasPrefix(id, ReconcileScheduleID+"-") {
		return TypeReconcile, nil
	}
	return "", fmt.Errorf("%q is not a Jam workflow id", id)
}

// ReconcileScheduleID names the Temporal Schedule that runs Reconcile (its runs are
// "Reconcile-<time>").
const ReconcileScheduleID = "Reconcile"

// ReconcileReport is what one Reconcile run found and did.
type ReconcileReport struct {
	// Poked sessions had backlog; each got an inbound poke.
	Poked int `json:"poked"`
	// Started sessions had backlog but no running workflow (a start or a poke was lost).
	Started []uuid.UUID `json:"started,omitempty"`
	// Deferred sessions exceeded this run's bound and wait for the next run.
	Deferred int `json:"deferred"`
	// StaleNodes missed three heartbeats in a row; their sessions wake elsewhere.
	StaleNodes []string `json:"stale_nodes,omitempty"`
	// Retried sessions had failed for want of an adapter a live node now has.
	Retried int `json:"retried,omitempty"`
	// Moved sessions ran on a draining node that a node sharing their host store can relieve;
	// each was told to leave at its next turn boundary.
	Moved int `json:"moved,omitempty"`
}
