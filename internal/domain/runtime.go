package domain

import (
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
)

// AgentEventKind names one entry of the provider-neutral runtime event stream that every
// owned adapter reports through (docs/architecture.md §6).
type AgentEventKind string

const (
	AgentTurnStarted          AgentEventKind = "turn_started"
	AgentTurnComplete         AgentEventKind = "turn_complete"
	AgentTextDelta            AgentEventKind = "assistant_text_delta"
	AgentTextFinal            AgentEventKind = "assistant_text_final"
	AgentThought              AgentEventKind = "thought"
	AgentToolCall             AgentEventKind = "tool_call"
	AgentToolResult           AgentEventKind = "tool_result"
	AgentUsage                AgentEventKind = "usage"
	AgentRateLimits           AgentEventKind = "rate_limits"
	AgentContextGauge         AgentEventKind = "context_gauge"
	AgentStatus               AgentEventKind = "status"
	AgentPermissionRequest    AgentEventKind = "permission_request"
	AgentQuestion             AgentEventKind = "question"
	AgentDispositionStaged    AgentEventKind = "disposition_staged"
	AgentRuntimeIdentity      AgentEventKind = "runtime_identity"
	AgentProviderSessionBound AgentEventKind = "provider_session_bound"
	AgentCompaction           AgentEventKind = "compaction"
	AgentError                AgentEventKind = "error"
)

var AgentEventKinds = NewEnum("agent_event_kind",
	AgentTurnStarted, AgentTurnComplete, AgentTextDelta, AgentTextFinal, AgentThought, AgentToolCall,
	AgentToolResult, AgentUsage, AgentRateLimits, AgentContextGauge, AgentStatus, AgentPermissionRequest,
	AgentQuestion, AgentDispositionStaged, AgentRuntimeIdentity, AgentProviderSessionBound, AgentCompaction,
	AgentError)

func (v *AgentEventKind) UnmarshalText(b []byte) error { return unmarshalEnum(AgentEventKinds, b, v) }

// TurnOutcome is how a provider turn ended. Only Complete settles anything.
type TurnOutcome string

const (
	TurnComplete  TurnOutcome = "complete"
	TurnFailed    TurnOutcome = "failed"
	TurnCancelled TurnOutcome = "cancelled"
)

var TurnOutcomes = NewEnum("turn_outcome", TurnComplete, TurnFailed, TurnCancelled)

func (v *TurnOutcome) UnmarshalText(b []byte) error { return unmarshalEnum(TurnOutcomes, b, v) }

// DispositionKind is what a runtime decided to do with one inbound message of its turn.
type DispositionKind string

const (
	// DispositionReply: jam_reply_to_message {message_id, text}.
	DispositionReply DispositionKind = "reply"
	// DispositionNoReply: jam_no_reply {message_id, reason}; settles as an acknowledgement.
	DispositionNoReply DispositionKind = "no_reply"
)

var DispositionKinds = NewEnum("disposition", DispositionReply, DispositionNoReply)

func (v *DispositionKind) UnmarshalText(b []byte) error { return unmarshalEnum(DispositionKinds, b, v) }

// The settlement tool names owned tool-capable runtimes are given.
const (
	ToolReplyToMessage = "jam_reply_to_message"
	ToolNoReply        = "jam_no_reply"
)

// MaxDispositionsPerTurn bounds how many dispositions one turn may stage.
const MaxDispositionsPerTurn = 32

// PermissionDecision is an operator's (or a rule's) answer to a runtime permission request.
type PermissionDecision string

const (
	PermissionAllowOnce   PermissionDecision = "allow_once"
	PermissionAllowAlways PermissionDecision = "allow_always"
	PermissionDeny        PermissionDecision = "deny"
)

var PermissionDecisions = NewEnum("decision", PermissionAllowOnce, PermissionAllowAlways, PermissionDeny)

func (v *PermissionDecision) UnmarshalText(b []byte) error {
	return unmarshalEnum(PermissionDecisions, b, v)
}

// Allows reports whether the decision lets the tool run.
func (d PermissionDecision) Allows() bool {
	return d == PermissionAllowOnce || d == PermissionAllowAlways
}

// PermissionState is the state of one runtime permission request.
type PermissionState string

const (
	PermissionPending PermissionState = "pending"
	PermissionAllowed PermissionState = "allowed"
	PermissionDenied  PermissionState = "denied"
	// PermissionExpired: the deadline passed with no decision; the runtime was denied.
	PermissionExpired PermissionState = "expired"
	// PermissionCancelled: the turn or runtime that asked ended first.
	PermissionCancelled PermissionState = "cancelled"
)

var PermissionStates = NewEnum("state", PermissionPending, PermissionAllowed, PermissionDenied,
	PermissionExpired, PermissionCancelled)

func (v *PermissionState) UnmarshalText(b []byte) error { return unmarshalEnum(PermissionStates, b, v) }

// Permission is one runtime permission request and its outcome.
type Permission struct {
	ID             uuid.UUID
	AgentID        uuid.UUID
	RoomID         *uuid.UUID
	RuntimeSession *uuid.UUID
	// ToolKey identifies the kind of action for always-rules (e.g. "edit", "execute").
	ToolKey   string
	Title     string
	Summary   string
	State     PermissionState
	Decision  PermissionDecision
	DecidedBy string
	Reason    string
	CreatedAt time.Time
	DecidedAt *time.Time
	Deadline  *time.Time
}

// Permission limits: what a provider sends is bounded before it is stored or shown.
const (
	MaxPermissionTitle   = 200
	MaxPermissionSummary = 2000
	MaxPermissionToolKey = 64
)

// Truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

var permissionReply = regexp.MustCompile(`(?i)^\s*(approve|deny)\s+([0-9a-f-]{8,36})\s*$`)

// ParsePermissionReply recognises a human room reply that decides a pending permission:
// "approve <id>" allows once, "deny <id>" denies. id may be a unique prefix of at least
// eight characters.
func ParsePermissionReply(text string) (PermissionDecision, string, bool) {
	m := permissionReply.FindStringSubmatch(text)
	if m == nil {
		return "", "", false
	}
	d := PermissionAllowOnce
	if strings.EqualFold(m[1], "deny") {
		d = PermissionDeny
	}
	return d, strings.ToLower(m[2]), true
}

// RuntimeExitReason says why the node registry reported a runtime gone.
type RuntimeExitReason string

const (
	// RuntimeExitedIdle: the child died between turns.
	RuntimeExitedIdle RuntimeExitReason = "exited_between_turns"
	// RuntimeExitedTurn: the child died during a turn.
	RuntimeExitedTurn RuntimeExitReason = "exited_during_turn"
	// RuntimeStoppedWithWorker: the node's worker stopped and tore its runtimes down.
	RuntimeStoppedWithWorker RuntimeExitReason = "stopped_with_worker"
	// RuntimeFenced: the node lost its store for long enough that another node sharing its
	// host store may run the room, so its worker tore the runtime down.
	RuntimeFenced RuntimeExitReason = "fenced"
)

var RuntimeExitReasons = NewEnum("runtime_exit_reason", RuntimeExitedIdle, RuntimeExitedTurn, RuntimeStoppedWithWorker,
	RuntimeFenced)
