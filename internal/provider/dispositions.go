package provider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
)

// ToolSpec is a tool Jam offers a runtime: a name, what it is for, and a JSON schema of its
// arguments.
type ToolSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// ToolResult is what a tool call tells the model.
type ToolResult struct {
	Text    string `json:"text"`
	IsError bool   `json:"is_error,omitempty"`
}

// ToolCaller is Jam's runtime tools as one runtime instance may call them: the registry
// (internal/tools) bound to the instance's identity. Adapters project Specs into their
// provider's native tool mechanism and route calls through Call.
type ToolCaller interface {
	Specs() []ToolSpec
	// Call runs one tool call. callID is the provider's id of the call ("" when it has
	// none): a retried id is answered with the first result.
	Call(ctx context.Context, callID, name string, args json.RawMessage) ToolResult
}

// DispositionStager is implemented by every adapter's runtime: it stages a settlement
// disposition in the running turn, under the turn's settlement rules.
type DispositionStager interface {
	StageDisposition(d Disposition) error
}

// MCPEndpoint is where a runtime reaches Jam's tools over MCP: a Streamable HTTP URL with
// its per-instance bearer token, and the stdio bridge command (`jam mcp`) for providers
// that take only stdio MCP servers.
type MCPEndpoint struct {
	// Name is the server's name in the provider's configuration ("jam").
	Name string
	URL  string
	// Token authenticates this runtime instance; it is revoked at teardown.
	Token string
	// BridgeCommand and BridgeArgs run the stdio bridge ("" when no bridge is available).
	BridgeCommand string
	BridgeArgs    []string
	BridgeEnv     []string
}

// Headers are the HTTP headers that authenticate a request to the endpoint.
func (e MCPEndpoint) Headers() map[string]string {
	return map[string]string{"Authorization": "Bearer " + e.Token}
}

// ParseDisposition reads a settlement tool call's arguments into a disposition; ok is false
// when the tool is not a settlement tool.
func ParseDisposition(tool string, args json.RawMessage) (d Disposition, ok bool, err error) {
	var a struct {
		MessageID string `json:"message_id"`
		Text      string `json:"text"`
		Reason    string `json:"reason"`
	}
	switch tool {
	case domain.ToolReplyToMessage:
		d.Kind = domain.DispositionReply
	case domain.ToolNoReply:
		d.Kind = domain.DispositionNoReply
	default:
		return Disposition{}, false, nil
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return Disposition{}, true, fmt.Errorf("%w: arguments are not a JSON object", ErrInvalidDisposition)
	}
	id, err := uuid.Parse(strings.TrimSpace(a.MessageID))
	if err != nil {
		return Disposition{}, true, fmt.Errorf("%w: message_id %q is not a message id", ErrInvalidDisposition, domain.Truncate(a.MessageID, 80))
	}
	d.MessageID, d.Text, d.Reason = id, a.Text, domain.Truncate(a.Reason, 1000)
	return d, true, nil
}

// DispositionAnswer is what a settlement tool call tells the model: staged, or why not.
func DispositionAnswer(d Disposition, err error) (text string, ok bool) {
	switch {
	case errors.Is(err, ErrNoTurn):
		return "Not staged: no turn is running.", false
	case err != nil:
		return "Not staged: " + err.Error(), false
	case d.Kind == domain.DispositionReply:
		return "Reply staged; it is posted to the room when your turn ends.", true
	default:
		return "Message settled without a reply when your turn ends.", true
	}
}

// QuestionAsker is implemented by a ToolCaller that may ask a human of the room: an
// adapter maps its provider's native ask (Codex request_user_input) onto it. answered is
// false when no answer came before the deadline: the provider proceeds without one.
type QuestionAsker interface {
	AskQuestion(ctx context.Context, question string) (answer string, answered bool, err error)
}
