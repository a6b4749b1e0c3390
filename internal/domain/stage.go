package domain

// WorkflowStage is where a Jam workflow is now, as its JamStage search attribute and the
// Temporal Web UI show it. A room session's stage is its SessionPhase.
type WorkflowStage string

// A runtime host's stages.
const (
	StageLoading       WorkflowStage = "loading"
	StageServing       WorkflowStage = "serving"
	StagePreparing     WorkflowStage = "preparing"
	StageSandboxBusy   WorkflowStage = "sandbox_busy"
	StageControlling   WorkflowStage = "controlling"
	StageCheckpointing WorkflowStage = "checkpointing"
	StageParked        WorkflowStage = "parked"
	StageParkFailed    WorkflowStage = "park_failed"
	// StageFenced: the checkpoint of the host's last teardown failed; no member starts over
	// the unsaved provider state until a checkpoint succeeds or an operator discards it.
	StageFenced WorkflowStage = "fenced"
)

// An operation's stages (workspace operations, template applies).
const (
	StageBeginning  WorkflowStage = "beginning"
	StageStopping   WorkflowStage = "stopping_member"
	StageInspecting WorkflowStage = "inspecting"
	StageExporting  WorkflowStage = "exporting"
	StagePruning    WorkflowStage = "pruning"
	StageRemoving   WorkflowStage = "removing"
	StageRestoring  WorkflowStage = "restoring"
	StageDeleting   WorkflowStage = "deleting"
	StageFinishing  WorkflowStage = "finishing"
	// StageRepository: a repository operation's git or gh call is running.
	StageRepository WorkflowStage = "repository"
	StagePlanning   WorkflowStage = "planning"
	StageApplying   WorkflowStage = "applying"
	StageDone       WorkflowStage = "done"
)

// WorkflowStages are every stage name a workflow other than RoomSession publishes.
var WorkflowStages = NewEnum("workflow_stage", StageLoading, StageServing, StagePreparing, StageSandboxBusy,
	StageControlling, StageCheckpointing, StageParked, StageParkFailed, StageBeginning, StageStopping, StageInspecting,
	StageExporting, StagePruning, StageRemoving, StageRestoring, StageDeleting, StageFinishing, StagePlanning,
	StageApplying, StageDone, StageRepository, StageFenced)
