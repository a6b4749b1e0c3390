package provider

import (
	"encoding/json"
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

// DispositionTools are the two settlement tools of tool-capable runtimes, the same for every
// adapter.
func DispositionTools() []ToolSpec {
	return []ToolSpec{
		{Name: domain.ToolReplyToMessage,
			Description: "Answer one room message: your text is posted to the room as a reply to it when your turn ends. " +
				"Call it once per message you answer; message_id is the id shown in the message's header.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"message_id":{"type":"string","description":"the id of the message you answer"},` +
				`"text":{"type":"string","description":"your reply, as it should appear in the room"}},"required":["message_id","text"],"additionalProperties":false}`)},
		{Name: domain.ToolNoReply,
			Description: "Settle one room message without answering it in the room (it needs no answer, or another agent's message should not be answered).",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"message_id":{"type":"string","description":"the id of the message"},` +
				`"reason":{"type":"string","description":"why it needs no answer"}},"required":["message_id"],"additionalProperties":false}`)},
	}
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
	case err != nil:
		return "Not staged: " + err.Error(), false
	case d.Kind == domain.DispositionReply:
		return "Reply staged; it is posted to the room when your turn ends.", true
	default:
		return "Message settled without a reply when your turn ends.", true
	}
}
