package domain

import (
	"encoding/json"
	"regexp"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// ParticipantKind says who a room participant is.
type ParticipantKind string

const (
	ParticipantHuman ParticipantKind = "human"
	ParticipantAgent ParticipantKind = "agent"
)

var ParticipantKinds = NewEnum("participant_kind", ParticipantHuman, ParticipantAgent)

func (v *ParticipantKind) UnmarshalText(b []byte) error { return unmarshalEnum(ParticipantKinds, b, v) }

// InboundState is the state of one message in one agent's durable inbound queue.
type InboundState string

const (
	InboundQueued    InboundState = "queued"
	InboundDelivered InboundState = "delivered"
	InboundSettled   InboundState = "settled"
)

var InboundStates = NewEnum("inbound_state", InboundQueued, InboundDelivered, InboundSettled)

func (v *InboundState) UnmarshalText(b []byte) error { return unmarshalEnum(InboundStates, b, v) }

// Settlement is how an agent settled an inbound message.
type Settlement string

const (
	SettledReply Settlement = "reply"
	SettledAck   Settlement = "ack"
)

var Settlements = NewEnum("settlement", SettledReply, SettledAck)

func (v *Settlement) UnmarshalText(b []byte) error { return unmarshalEnum(Settlements, b, v) }

// EventKind names an entry of the event log streamed by GET /v1/events.
type EventKind string

const (
	EventAgentCreated   EventKind = "agent_created"
	EventAgentUpdated   EventKind = "agent_updated"
	EventAgentDeleted   EventKind = "agent_deleted"
	EventAgentRunIntent EventKind = "agent_run_intent"
	EventRoomCreated    EventKind = "room_created"
	// EventRoomAdded and EventRoomRemoved are membership changes; for an owned agent they
	// are what binds and unbinds its runtime.
	EventRoomAdded      EventKind = "room_added"
	EventRoomRemoved    EventKind = "room_removed"
	EventSessionBound   EventKind = "session_bound"
	EventMessagePosted  EventKind = "message_posted"
	EventInboundQueued  EventKind = "inbound_queued"
	EventMessageSettled EventKind = "message_settled"
	EventTemplateSaved  EventKind = "template_saved"
	// EventRuntimeActivity mirrors one provider AgentEvent onto the stream.
	EventRuntimeActivity EventKind = "runtime_activity"
	// EventRuntimeExited: a node's registry saw a runtime's child process die.
	EventRuntimeExited EventKind = "runtime_exited"
	// EventRuntimeStopped: Jam tore a runtime down on purpose (idle reap, stop, restart,
	// removal), with the checkpoint reason it gave the provider.
	EventRuntimeStopped           EventKind = "runtime_stopped"
	EventRuntimePermissionAsked   EventKind = "runtime_permission_requested"
	EventRuntimePermissionDecided EventKind = "runtime_permission_decided"
	// EventRuntimeFailed: a runtime cannot start for a reason retrying will not fix; its
	// session holds in the failed phase (with the class and reason) until something changes.
	EventRuntimeFailed EventKind = "runtime_failed"
	// EventRuntimeReadiness: a live runtime's readiness warning appeared, changed or
	// cleared (warning ""); the session is degraded while it has one.
	EventRuntimeReadiness EventKind = "runtime_readiness"
	// EventThreadReplaced: a session's provider thread could not be resumed and the session
	// continues on a new one (its resume policy is fresh, or an operator started it fresh);
	// the payload names the abandoned thread and why.
	EventThreadReplaced EventKind = "runtime_thread_replaced"
	// EventRuntimeRecycled: the watchdog found a live runtime over a bound (memory, idle
	// CPU, a wedged turn) and restarted it on its own thread; the payload says what it
	// measured, the session's recycle count, and whether it now holds failed.
	EventRuntimeRecycled EventKind = "runtime_recycled"
	// EventOperationStarted and EventOperationFinished follow a long operation (GET
	// /v1/operations/{id}); finished carries its status and failure class.
	EventOperationStarted  EventKind = "operation_started"
	EventOperationFinished EventKind = "operation_finished"
	// EventQuestionAsked and EventQuestionAnswered follow a runtime's question to a human
	// (jam_ask_question); answered also covers expired and cancelled ones (its state says).
	EventQuestionAsked    EventKind = "question_asked"
	EventQuestionAnswered EventKind = "question_answered"
)

var EventKinds = NewEnum("event_kind",
	EventAgentCreated, EventAgentUpdated, EventAgentDeleted, EventAgentRunIntent, EventRoomCreated,
	EventRoomAdded, EventRoomRemoved, EventSessionBound, EventMessagePosted, EventInboundQueued,
	EventMessageSettled, EventTemplateSaved, EventRuntimeActivity, EventRuntimeExited,
	EventRuntimeStopped, EventRuntimePermissionAsked, EventRuntimePermissionDecided, EventRuntimeFailed, EventRuntimeReadiness, EventThreadReplaced, EventRuntimeRecycled,
	EventOperationStarted, EventOperationFinished, EventQuestionAsked, EventQuestionAnswered)

func (v *EventKind) UnmarshalText(b []byte) error { return unmarshalEnum(EventKinds, b, v) }

// StreamControl names the frames of the event stream that are not log events.
type StreamControl string

const (
	// StreamOpen is the first frame; its id is the stream's position.
	StreamOpen StreamControl = "open"
	// StreamGap: events before missed_before were pruned from the log.
	StreamGap StreamControl = "gap"
	// StreamReset: the client's Last-Event-ID is ahead of the log; the stream starts now.
	StreamReset StreamControl = "reset"
	// StreamOverflow precedes the disconnect of a client that fell a buffer behind.
	StreamOverflow StreamControl = "overflow"
)

var StreamControls = NewEnum("stream_control", StreamOpen, StreamGap, StreamReset, StreamOverflow)

// Agent is one local agent identity.
type Agent struct {
	ID        uuid.UUID
	Name      string
	Kind      AgentKind
	Briefing  string
	RunIntent RunIntent
	// HasAPIKey is true for attached agents, whose key is stored only as a hash.
	HasAPIKey bool
	// QuestionTimeoutSecs, when set, is how long the agent's questions to humans wait for
	// an answer (0: indefinitely), before JAM_QUESTION_TIMEOUT_SECS and the setting.
	QuestionTimeoutSecs *int
	CreatedAt           time.Time
	UpdatedAt           time.Time
}

// Room is a chat room.
type Room struct {
	ID        uuid.UUID
	Name      string
	CreatedAt time.Time
}

// Participant is a human or an agent in a room.
type Participant struct {
	ID        uuid.UUID
	RoomID    uuid.UUID
	Kind      ParticipantKind
	AgentID   *uuid.UUID
	HumanName string
	Active    bool
	CreatedAt time.Time
	RemovedAt *time.Time
}

// Message is one entry of a room's durable transcript.
type Message struct {
	ID            uuid.UUID
	Seq           int64
	RoomID        uuid.UUID
	AuthorKind    ParticipantKind
	AuthorAgentID *uuid.UUID
	AuthorHuman   string
	Text          string
	// ReplyTo is the message this one settles as a reply.
	ReplyTo *uuid.UUID
	// A long reply is posted as ordered parts: Part of Parts (from 1; 0 and 0 for a
	// message that is whole), each after the first continuing the part before it.
	Continues   *uuid.UUID
	Part, Parts int
	// AgentHops counts the agent messages in this one's chain since the last human message
	// (0 for a human's): past the room's hop limit a message wakes no one (AgentHopsWake).
	AgentHops int
	CreatedAt time.Time
	// Quiet is not stored: the post that wrote the message sets it when the message is past
	// the room's hop limit, so the caller pokes no one (its recipients got context rows).
	Quiet bool
}

// Inbound is one message in one agent's queue.
type Inbound struct {
	AgentID        uuid.UUID
	MessageID      uuid.UUID
	RoomID         uuid.UUID
	Seq            int64
	State          InboundState
	Settlement     Settlement
	ReplyMessageID *uuid.UUID
	LeaseID        *uuid.UUID
	DeliveryCount  int
	CreatedAt      time.Time
	DeliveredAt    *time.Time
	SettledAt      *time.Time
	// ContextOnly: the message is past the room's agent hop limit; it reaches the agent as
	// context with its next turn but wakes nothing and is never claimed by a receive.
	ContextOnly bool
}

// Event is one entry of the event log.
type Event struct {
	ID        int64
	Kind      EventKind
	RoomID    *uuid.UUID
	AgentID   *uuid.UUID
	Payload   json.RawMessage
	CreatedAt time.Time
}

// Limits of names and message texts.
const (
	MaxNameLen        = 80
	MaxBriefingLen    = 16 << 10
	MaxMessageBytes   = 64 << 10
	MaxHumanNameBytes = 64
)

var namePattern = regexp.MustCompile(`^[\p{L}\p{N}][\p{L}\p{N} ._'-]*$`)

// ValidateName checks a display name of an agent, room or human.
func ValidateName(field, name string, max int) error {
	if name == "" {
		return &ValidationError{Field: field, Detail: "required"}
	}
	if !utf8.ValidString(name) || utf8.RuneCountInString(name) > max || !namePattern.MatchString(name) {
		return &ValidationError{Field: field, Detail: "must be letters, digits, spaces and . _ ' - (at most " + strconv.Itoa(max) + " characters), starting with a letter or digit"}
	}
	return nil
}

// ValidateMessageText checks a message body: not blank, valid UTF-8, bounded.
func ValidateMessageText(text string) error {
	switch {
	case len(text) == 0 || isBlank(text):
		return &ValidationError{Field: "text", Detail: "must not be empty"}
	case !utf8.ValidString(text):
		return &ValidationError{Field: "text", Detail: "must be valid UTF-8"}
	case hasControl(text):
		return &ValidationError{Field: "text", Detail: "must not contain control characters other than tab and newlines"}
	case len(text) > MaxMessageBytes:
		return &ValidationError{Field: "text", Detail: "at most " + strconv.Itoa(MaxMessageBytes) + " bytes"}
	}
	return nil
}

// hasControl reports C0 control characters other than tab, newline and carriage return
// (NUL, which Postgres text cannot hold, among them) and DEL.
func hasControl(s string) bool {
	for _, r := range s {
		if (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0x7f {
			return true
		}
	}
	return false
}

// ValidateText checks free text such as a briefing: valid UTF-8, bounded, no control
// characters other than tab and newlines.
func ValidateText(field, text string, max int) error {
	if !utf8.ValidString(text) || len(text) > max || hasControl(text) {
		return &ValidationError{Field: field, Detail: "must be UTF-8 text of at most " + strconv.Itoa(max) + " bytes without control characters"}
	}
	return nil
}

func isBlank(s string) bool {
	for _, r := range s {
		if r != ' ' && r != '\t' && r != '\n' && r != '\r' {
			return false
		}
	}
	return true
}
