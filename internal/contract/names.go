package contract

// Signal, update and query names of the entity

// RoomSession
const (
	// SignalInbound is a poke: the room may have backlog. The database queue is the truth.
	SignalInbound = "inbound"
	// SignalRuntimeExited: the node saw the session's child die between turns.
	SignalRuntimeExited = "runtimeExited"
	UpdateStop          = "stop"
	UpdateRestart       = "restart"
	UpdateRemove        = "remove"
	UpdateApplyConfig   = "applyConfig"
	// UpdateStartFresh starts a session held failed for want of an exact resume on a new
	// provider thread, under the evidence an operator confirmed.
	UpdateStartFresh = "startFresh"
	// QueryState answers the session's RoomSessionStatus.
	QueryState = "state"
)

// SignalMove tells a session whose runtime runs on a draining node that another node sharing
// its host store can take it: the runtime stops at its next turn boundary, and the next wake
// places it again.
const SignalMove = "move"

// SignalRecycle tells a session that its node's watchdog found the live runtime over a
// bound (memory, idle CPU, a wedged turn, which the node has interrupted): at its next turn
// boundary the runtime is stopped and started again on the same provider thread.
const SignalRecycle = "recycle"

// SignalRetry tells a session held in a permanent start failure that something changed (a
// template save, a node that gained the missing adapter): it tries once more.
const SignalRetry = "retry"

// RuntimeHost
const (
	// UpdateAcquire takes a member's lease; the sandbox is ready when it completes.
	UpdateAcquire = "acquire"
	// UpdateRelease drops a member's lease; the last release parks the sandbox.
	UpdateRelease = "release"
	// UpdateControl runs a host-scope Stop, Restart or ResetSandbox.
	UpdateControl = "control"
	// UpdatePermit and UpdateUnpermit bracket a member's turn; UpdateQuiesce waits until no
	// turn runs and holds new ones back until UpdateResume (the checkpoint coordinator).
	UpdatePermit   = "permit"
	UpdateUnpermit = "unpermit"
	UpdateQuiesce  = "quiesce"
	UpdateResume   = "resume"
	// UpdateCheckpoint captures a manual checkpoint with every member's turn quiesced.
	UpdateCheckpoint = "checkpoint"
	// UpdateSettle returns once the host's provider state as of now is held by its newest
	// checkpoint: a park in progress finishes first, and a turn run since the newest
	// generation is captured (before_stop). An archive exports what its stopped member wrote.
	UpdateSettle = "settle"
	// UpdateDiscardUnsaved lifts a host's checkpoint fence without a checkpoint: the
	// operator accepts that the provider state on its disk is held by no checkpoint.
	UpdateDiscardUnsaved = "discardUnsaved"
	// QueryHost answers the host's RuntimeHostStatus.
	QueryHost = "host"
)
