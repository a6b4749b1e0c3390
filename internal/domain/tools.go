package domain

import (
	"crypto/rand"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
)

// The runtime tools Jam offers owned agents (internal/tools holds their schemas and
// handlers). The settlement pair is ToolReplyToMessage and ToolNoReply.
const (
	ToolSendMessage = "jam_send_message"
	ToolRoomContext = "jam_room_context"
	ToolAskQuestion = "jam_ask_question"
	// The repository tools: git and gh in the caller's own workspace, as workspace
	// operations.
	ToolRepoClone       = "jam_repo_clone"
	ToolRepoBranch      = "jam_repo_branch"
	ToolRepoCommit      = "jam_repo_commit"
	ToolRepoPush        = "jam_repo_push"
	ToolRepoPullRequest = "jam_repo_pull_request"
	ToolRepoChecks      = "jam_repo_checks"
)

// ToolScope is one authority a runtime tool needs; a runtime session is granted a set.
type ToolScope string

const (
	// ScopeSettle: settle the messages of the caller's running turn.
	ScopeSettle ToolScope = "settle"
	// ScopeRoomPost: post new messages to the caller's room.
	ScopeRoomPost ToolScope = "room_post"
	// ScopeRoomRead: read the caller's room (name, participants, recent transcript).
	ScopeRoomRead ToolScope = "room_read"
	// ScopeAsk: ask a human in the caller's room a question and wait for the answer.
	ScopeAsk ToolScope = "ask"
	// ScopeWorkspace: run repository operations in the caller's own managed workspace
	// (granted to sandboxed runtimes, whose git and gh run in the guest).
	ScopeWorkspace ToolScope = "workspace"
)

var ToolScopes = NewEnum("tool_scope", ScopeSettle, ScopeRoomPost, ScopeRoomRead, ScopeAsk, ScopeWorkspace)

func (v *ToolScope) UnmarshalText(b []byte) error { return unmarshalEnum(ToolScopes, b, v) }

// SettingMaxAgentHops bounds agent-to-agent chains: a message more than this many agent
// hops past the last human message is kept and shown as context, but wakes no one.
const SettingMaxAgentHops = "rooms.max_agent_hops"

// DefaultMaxAgentHops is SettingMaxAgentHops' default.
const DefaultMaxAgentHops = 6

// AgentHopsWake reports whether a message with hops agent hops wakes its recipients under
// the hop limit max.
func AgentHopsWake(hops, max int) bool { return hops <= max }

// NextAgentHops is the hop count of an agent's message that follows one with prev hops.
func NextAgentHops(prev int) int { return prev + 1 }

// SettingQuestionTimeoutSecs is the question deadline used when neither the request, the
// agent nor JAM_QUESTION_TIMEOUT_SECS sets one; 0 waits indefinitely.
const SettingQuestionTimeoutSecs = "runtime.question.timeout_secs"

// DefaultQuestionTimeout is the runtime default of a question's wait.
const DefaultQuestionTimeout = 15 * time.Minute

// MaxQuestionTimeoutSecs bounds every question deadline source.
const MaxQuestionTimeoutSecs = 7 * 24 * 3600

// Question limits: what an agent sends is bounded before it is stored or shown.
const (
	MaxQuestionText = 4000
	MaxAnswerText   = 8000
)

// QuestionState is where a runtime's question to a human stands.
type QuestionState string

const (
	// QuestionPending waits for the recipient's answer.
	QuestionPending QuestionState = "pending"
	// QuestionAnswered: the recipient (or an operator) answered.
	QuestionAnswered QuestionState = "answered"
	// QuestionExpired: the deadline passed; the agent proceeded without an answer.
	QuestionExpired QuestionState = "expired"
	// QuestionCancelled: the asking runtime went away before an answer came.
	QuestionCancelled QuestionState = "cancelled"
)

var QuestionStates = NewEnum("question_state", QuestionPending, QuestionAnswered, QuestionExpired, QuestionCancelled)

func (v *QuestionState) UnmarshalText(b []byte) error { return unmarshalEnum(QuestionStates, b, v) }

// Question is one runtime's question to one human in its room.
type Question struct {
	ID             uuid.UUID
	RoomID         uuid.UUID
	AgentID        uuid.UUID
	RuntimeSession uuid.UUID
	// Recipient is the human participant's name who is asked.
	Recipient string
	Text      string
	// Code is the short answer code the human starts a reply with ("Q7K2 yes").
	Code  string
	State QuestionState
	// Answer, AnsweredBy and AnswerMessageID are set once answered.
	Answer          string
	AnsweredBy      string
	AnswerMessageID *uuid.UUID
	// MessageID is the room message that asked the question.
	MessageID *uuid.UUID
	Deadline  *time.Time
	CreatedAt time.Time
	// AnsweredAt is when it left pending: answered, expired or cancelled.
	AnsweredAt *time.Time
	// DeliveredAt is when the outcome was handed to the asking runtime; an answer that came
	// while nobody waited is handed to the runtime's next identical ask, once.
	DeliveredAt *time.Time
	// DeferredAt is when the asking tool call returned unanswered (its client would not wait
	// longer): the answer then reaches the agent as the room message that gives it.
	DeferredAt *time.Time
}

// questionCodeAlphabet avoids look-alike characters (0/O, 1/I/L).
const questionCodeAlphabet = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"

// NewQuestionCode is a fresh four-character answer code.
func NewQuestionCode() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = questionCodeAlphabet[int(b[i])%len(questionCodeAlphabet)]
	}
	return string(b)
}

var questionAnswer = regexp.MustCompile(`(?s)^\s*\[?([A-Za-z0-9]{4})\]?(?:\s*[:\-–]\s*|\s+|$)(.*?)\s*$`)

// ParseQuestionAnswer recognises a room message that answers a question by its code
// ("Q7K2 yes, go ahead" or "Q7K2: yes"): the upper-cased code and the answer text.
func ParseQuestionAnswer(text string) (code, answer string, ok bool) {
	m := questionAnswer.FindStringSubmatch(text)
	if m == nil {
		return "", "", false
	}
	code = strings.ToUpper(m[1])
	for _, c := range code {
		if !strings.ContainsRune(questionCodeAlphabet, c) {
			return "", "", false
		}
	}
	return code, m[2], true
}

// QuestionMessage is the room message in which an agent asks recipient a question: it
// tells the human how to answer by code (a reply to the message answers too).
func QuestionMessage(recipient, code, text string) string {
	return "Question for " + recipient + " (answer with \"" + code + " your answer\"): " + text
}
