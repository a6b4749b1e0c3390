package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
)

// Backend is the least authority the built-in tools act through. Every method acts for the
// given identity only, fenced on its generation.
type Backend interface {
	// Current fails with ErrRetired unless id's generation is its session's current one.
	Current(ctx context.Context, id Identity) error
	// SendMessage posts a new message of id's agent to id's room.
	SendMessage(ctx context.Context, id Identity, text string) (domain.Message, error)
	// RoomContext reads id's room: name, participants and the newest limit messages.
	RoomContext(ctx context.Context, id Identity, limit int) (RoomContext, error)
	// Ask asks one human of id's room a question and waits for the answer or the deadline.
	Ask(ctx context.Context, id Identity, q QuestionRequest) (QuestionAnswer, error)
	// Repository runs one repository operation in id's own workspace and waits for it.
	Repository(ctx context.Context, id Identity, action domain.WorkspaceAction, req domain.RepoRequest) (domain.RepoResult, error)
}

// RoomContext is what jam_room_context answers.
type RoomContext struct {
	Room         string               `json:"room"`
	You          string               `json:"you"`
	Participants []ContextParticipant `json:"participants"`
	Messages     []ContextMessage     `json:"recent_messages"`
}

// ContextParticipant is one room participant.
type ContextParticipant struct {
	ID   uuid.UUID              `json:"id"`
	Kind domain.ParticipantKind `json:"kind"`
	Name string                 `json:"name"`
	You  bool                   `json:"you,omitempty"`
}

// ContextMessage is one transcript message.
type ContextMessage struct {
	ID         uuid.UUID              `json:"id"`
	Author     string                 `json:"author"`
	AuthorKind domain.ParticipantKind `json:"author_kind"`
	Text       string                 `json:"text"`
	ReplyTo    *uuid.UUID             `json:"reply_to,omitempty"`
	At         time.Time              `json:"at"`
}

// QuestionRequest is a jam_ask_question call.
type QuestionRequest struct {
	Text        string
	RecipientID *uuid.UUID
	TimeoutSecs *int
}

// QuestionAnswer is how a question ended.
type QuestionAnswer struct {
	QuestionID uuid.UUID
	State      domain.QuestionState
	Text       string
	By         string
	// Deferred: not answered in time for this call; the answer comes as the room message
	// that gives it, starting with Code, from Recipient (before Deadline, when one is set).
	Deferred  bool
	Code      string
	Recipient string
	Deadline  *time.Time
}

// ErrNoRecipient: the question names no human Jam may ask (none in the room, several and
// none chosen, or one who is not a human of the room). Its text is for the model.
type ErrNoRecipient struct{ Reason string }

func (e *ErrNoRecipient) Error() string { return e.Reason }

// Room context bounds.
const (
	defaultContextMessages = 20
	maxContextMessages     = 100
	maxContextText         = 2000
)

const (
	replyDescription = "Answer one room message: your text is posted to the room as a reply to it when your turn ends. " +
		"Call it once per message you answer; message_id is the id shown in the message's header."
	noReplyDescription = "Settle one room message without answering it in the room (it needs no answer, or another agent's " +
		"message should not be answered)."
	sendDescription = "Post a new message to your room now (not a reply to a particular message). Use it sparingly: " +
		"to report progress on long work or to start a topic; answer messages with " + domain.ToolReplyToMessage + "."
	contextDescription = "Read your room: its name, who is in it (humans and agents, with ids) and the most recent messages."
	askDescription     = "Ask a human in your room a question and wait for the answer. The question is posted to the room " +
		"with a short answer code; the human's reply comes back to you. With several humans in the room name the one " +
		"you ask (recipient_id from " + domain.ToolRoomContext + "). If no answer comes before the deadline, proceed " +
		"with your best judgment."
)

// Builtin is the registry every owned runtime gets.
func Builtin() *Registry {
	tools := []Tool{
		{Name: domain.ToolReplyToMessage, Description: replyDescription, Scopes: []domain.ToolScope{domain.ScopeSettle},
			InputSchema: json.RawMessage(`{"type":"object","properties":{"message_id":{"type":"string","description":"the id of the message you answer"},` +
				`"text":{"type":"string","description":"your reply, as it should appear in the room"}},"required":["message_id","text"],"additionalProperties":false}`),
			Handle: settle},
		{Name: domain.ToolNoReply, Description: noReplyDescription, Scopes: []domain.ToolScope{domain.ScopeSettle},
			InputSchema: json.RawMessage(`{"type":"object","properties":{"message_id":{"type":"string","description":"the id of the message"},` +
				`"reason":{"type":"string","description":"why it needs no answer"}},"required":["message_id"],"additionalProperties":false}`),
			Handle: settle},
		{Name: domain.ToolSendMessage, Description: sendDescription, Scopes: []domain.ToolScope{domain.ScopeRoomPost},
			InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","description":"the message"}},` +
				`"required":["text"],"additionalProperties":false}`),
			Handle: sendMessage},
		{Name: domain.ToolRoomContext, Description: contextDescription, Scopes: []domain.ToolScope{domain.ScopeRoomRead},
			InputSchema: json.RawMessage(`{"type":"object","properties":{"limit":{"type":"integer","minimum":0,"maximum":100,` +
				`"description":"how many recent messages (default 20)"}},"additionalProperties":false}`),
			Handle: roomContext},
		{Name: domain.ToolAskQuestion, Description: askDescription, Scopes: []domain.ToolScope{domain.ScopeAsk},
			InputSchema: json.RawMessage(`{"type":"object","properties":{"question":{"type":"string","description":"the question"},` +
				`"recipient_id":{"type":"string","description":"the participant id of the human you ask (optional when the room has one human)"},` +
				`"timeout_secs":{"type":"integer","minimum":0,"description":"how long to wait for the answer (0: indefinitely)"}},` +
				`"required":["question"],"additionalProperties":false}`),
			Handle: askQuestion},
	}
	tools = append(tools, repoTools()...)
	r, err := New(tools...)
	if err != nil {
		panic(fmt.Sprintf("built-in tools: %v", err)) // a programming error, caught by every test
	}
	return r
}

// AllScopes is every scope there is.
func AllScopes() []domain.ToolScope { return domain.ToolScopes.Values() }

// RuntimeScopes is what an owned runtime session is granted: everything, but the workspace
// scope only for a sandboxed runtime (its repository operations run in its guest).
func RuntimeScopes(sandboxed bool) []domain.ToolScope {
	out := []domain.ToolScope{domain.ScopeSettle, domain.ScopeRoomPost, domain.ScopeRoomRead, domain.ScopeAsk}
	if sandboxed {
		out = append(out, domain.ScopeWorkspace)
	}
	return out
}

// settle stages jam_reply_to_message / jam_no_reply in the caller's running turn.
func settle(_ context.Context, c Call) (string, error) {
	d, _, err := provider.ParseDisposition(c.Tool, c.Args)
	if err != nil {
		return "", &Refusal{Text: "Not staged: " + err.Error()}
	}
	if c.Stager == nil {
		err = provider.ErrNoTurn
	} else {
		err = c.Stager.StageDisposition(d)
	}
	text, ok := provider.DispositionAnswer(d, err)
	if !ok {
		return "", &Refusal{Text: text}
	}
	return text, nil
}

func sendMessage(ctx context.Context, c Call) (string, error) {
	var a struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(c.Args, &a); err != nil {
		return "", refuse("Not sent: arguments must be an object with text.")
	}
	if err := domain.ValidateMessageText(a.Text); err != nil {
		return "", refuse("Not sent: %v.", err)
	}
	m, err := c.Backend.SendMessage(ctx, c.Identity, a.Text)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Posted to the room as message %s.", m.ID), nil
}

func roomContext(ctx context.Context, c Call) (string, error) {
	var a struct {
		Limit *int `json:"limit"`
	}
	if len(c.Args) > 0 {
		if err := json.Unmarshal(c.Args, &a); err != nil {
			return "", refuse("arguments must be an object")
		}
	}
	limit := defaultContextMessages
	if a.Limit != nil {
		limit = min(max(*a.Limit, 0), maxContextMessages)
	}
	rc, err := c.Backend.RoomContext(ctx, c.Identity, limit)
	if err != nil {
		return "", err
	}
	for i := range rc.Messages {
		rc.Messages[i].Text = domain.Truncate(rc.Messages[i].Text, maxContextText)
	}
	b, err := json.Marshal(rc)
	if err != nil {
		return "", fmt.Errorf("encode room context: %w", err)
	}
	return string(b), nil
}

func askQuestion(ctx context.Context, c Call) (string, error) {
	var a struct {
		Question    string `json:"question"`
		RecipientID string `json:"recipient_id"`
		TimeoutSecs *int   `json:"timeout_secs"`
	}
	if err := json.Unmarshal(c.Args, &a); err != nil {
		return "", refuse("Not asked: arguments must be an object with a question.")
	}
	q := QuestionRequest{Text: strings.TrimSpace(a.Question), TimeoutSecs: a.TimeoutSecs}
	if q.Text == "" {
		return "", refuse("Not asked: the question is empty.")
	}
	if len(q.Text) > domain.MaxQuestionText {
		return "", refuse("Not asked: the question is longer than %d bytes.", domain.MaxQuestionText)
	}
	if a.TimeoutSecs != nil && (*a.TimeoutSecs < 0 || *a.TimeoutSecs > domain.MaxQuestionTimeoutSecs) {
		return "", refuse("Not asked: timeout_secs must be between 0 and %d.", domain.MaxQuestionTimeoutSecs)
	}
	if r := strings.TrimSpace(a.RecipientID); r != "" {
		id, err := uuid.Parse(r)
		if err != nil {
			return "", refuse("Not asked: recipient_id %q is not a participant id.", domain.Truncate(r, 80))
		}
		q.RecipientID = &id
	}
	ans, err := c.Backend.Ask(ctx, c.Identity, q)
	var nr *ErrNoRecipient
	switch {
	case errors.As(err, &nr):
		return "", refuse("Not asked: %s", nr.Reason)
	case err != nil:
		return "", err
	}
	if ans.Deferred {
		until := ""
		if ans.Deadline != nil {
			until = fmt.Sprintf(" If none comes by %s, proceed with your best judgment.", ans.Deadline.UTC().Format(time.RFC3339))
		}
		return fmt.Sprintf("Asked %s (answer code %s); no answer yet. The answer will reach you as a room message from %s "+
			"starting with %s, in a later turn: until then carry on with what does not depend on it, or end your turn.%s",
			ans.Recipient, ans.Code, ans.Recipient, ans.Code, until), nil
	}
	switch ans.State {
	case domain.QuestionAnswered:
		return fmt.Sprintf("%s answered: %s", ans.By, ans.Text), nil
	case domain.QuestionCancelled:
		return "The question was withdrawn: the human asked, or you, left the room. Proceed with your best judgment.", nil
	}
	return "No answer came before the deadline; proceed with your best judgment.", nil
}
