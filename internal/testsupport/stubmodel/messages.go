package stubmodel

import (
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
)

// reminders are the <system-reminder> blocks Claude Code adds to a user message (its
// environment, skills, date); they are Claude's, not the user's words, except one: a user
// message that arrived while Claude worked is handed to the model inside a reminder
// (appended to a tool result), and a model sees it as the user speaking.
var (
	reminders = regexp.MustCompile(`(?s)<system-reminder>(.*?)</system-reminder>`)
	midRun    = regexp.MustCompile(`(?s)^\s*The user sent a new message while you were working:\s*(.*?)\s*$`)
)

// userText is a message's text without Claude Code's reminders, messages that arrived mid-
// run kept.
func userText(content json.RawMessage) string {
	return strings.TrimSpace(reminders.ReplaceAllStringFunc(textOf(content), func(block string) string {
		return strings.Join(arrivedMidRun(block), "\n")
	}))
}

// arrivedMidRun lists the user messages text hands the model in reminders.
func arrivedMidRun(text string) []string {
	var out []string
	for _, m := range reminders.FindAllStringSubmatch(text, -1) {
		if u := midRun.FindStringSubmatch(m[1]); u != nil {
			out = append(out, u[1])
		}
	}
	return out
}

// messagesRequest is the part of an Anthropic Messages request the server reads.
type messagesRequest struct {
	Model    string          `json:"model"`
	System   json.RawMessage `json:"system"`
	Stream   bool            `json:"stream"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name string `json:"name"`
	} `json:"tools"`
}

// messages answers POST /v1/messages (any query string: Claude Code sends ?beta=true) with
// the Anthropic event stream: message_start, content blocks (text, then a tool_use when
// scripted), message_delta with the stop reason and usage, message_stop.
func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		writeAnthropicError(w, http.StatusBadRequest, "invalid_request_error", "unreadable body")
		return
	}
	var req messagesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeAnthropicError(w, http.StatusBadRequest, "invalid_request_error", "body is not JSON")
		return
	}
	rec := Request{Dialect: DialectMessages, Path: r.URL.Path, Body: body}
	if sys := textOf(req.System); sys != "" {
		rec.Messages = append(rec.Messages, Message{Role: "system", Text: sys})
	}
	for _, m := range req.Messages {
		results := toolResults(m.Content)
		if len(results) == 0 {
			// A message of only tool results is the agent continuing, not a user speaking...
			rec.Messages = append(rec.Messages, Message{Role: m.Role, Text: userText(m.Content)})
		} else if said := arrivedMidRun(strings.Join(results, "\n")); len(said) > 0 {
			// ...unless the user spoke while the agent worked (Claude Code's steering).
			rec.Messages = append(rec.Messages, Message{Role: m.Role, Text: strings.Join(said, "\n")})
		}
		rec.ToolResults = append(rec.ToolResults, results...)
		rec.ToolCalls = append(rec.ToolCalls, toolUses(m.Content)...)
		rec.AfterToolResult = len(results) > 0
	}
	for _, t := range req.Tools {
		rec.Tools = append(rec.Tools, t.Name)
	}
	reply, id := s.record(rec)
	switch reply.Fail {
	case FailOverloaded:
		writeAnthropicError(w, 529, "overloaded_error", "Overloaded")
		return
	case FailContextLength:
		writeAnthropicError(w, http.StatusBadRequest, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum")
		return
	}
	in, out := 10*len(req.Messages), len(reply.Text)/4+1
	stop := "end_turn"
	if reply.ToolCall != nil {
		stop = "tool_use"
	}
	msgID := "msg_stub_" + id
	if !req.Stream {
		var content []any
		if reply.Text != "" {
			content = append(content, map[string]any{"type": "text", "text": reply.Text})
		}
		if c := reply.ToolCall; c != nil {
			content = append(content, map[string]any{"type": "tool_use", "id": c.callID("toolu_stub_", id), "name": c.Name, "input": json.RawMessage(c.arguments())})
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": msgID, "type": "message", "role": "assistant", "model": req.Model,
			"content": content, "stop_reason": stop, "usage": map[string]any{"input_tokens": in, "output_tokens": out}})
		return
	}
	e := startSSE(w)
	e.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": msgID, "type": "message",
		"role": "assistant", "model": req.Model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": in, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}})
	index := 0
	if reply.Text != "" {
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "text", "text": ""}})
		for _, piece := range chunks(reply.Text, reply.Chunks) {
			if !pause(r, reply.ChunkDelay) {
				return
			}
			e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index,
				"delta": map[string]any{"type": "text_delta", "text": piece}})
		}
		e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	if c := reply.ToolCall; c != nil {
		e.event("content_block_start", map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "tool_use", "id": c.callID("toolu_stub_", id), "name": c.Name, "input": map[string]any{}}})
		e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": c.arguments()}})
		e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
	}
	e.event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": out}})
	e.event("message_stop", map[string]any{"type": "message_stop"})
}

// toolResults lists the text of the tool_result blocks of a message content.
// toolUses lists the inputs (JSON) of the tool_use blocks of a message content.
func toolUses(content json.RawMessage) []string {
	var blocks []struct {
		Type  string          `json:"type"`
		Input json.RawMessage `json:"input"`
	}
	if json.Unmarshal(content, &blocks) != nil {
		return nil
	}
	var out []string
	for _, b := range blocks {
		if b.Type == "tool_use" {
			out = append(out, string(b.Input))
		}
	}
	return out
}

func toolResults(content json.RawMessage) []string {
	var blocks []struct {
		Type    string          `json:"type"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(content, &blocks) != nil {
		return nil
	}
	var out []string
	for _, b := range blocks {
		if b.Type == "tool_result" {
			out = append(out, outputText(b.Content))
		}
	}
	return out
}

func writeAnthropicError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}
