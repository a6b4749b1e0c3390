package stubmodel

import (
	"encoding/json"
	"net/http"
	"time"
)

// chatRequest is the part of a Chat Completions request the server reads.
type chatRequest struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			Function struct {
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tools"`
}

// chat answers POST /v1/chat/completions: a stream of chat.completion.chunk events ending
// in a finish reason and usage, then [DONE]; or one chat.completion when not streaming.
func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, apiError("invalid_request_error", "unreadable body"))
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError("invalid_request_error", "body is not JSON"))
		return
	}
	rec := Request{Dialect: DialectChat, Path: r.URL.Path, Body: body}
	for _, m := range req.Messages {
		text := textOf(m.Content)
		if m.Role == "tool" {
			rec.ToolResults = append(rec.ToolResults, text)
		}
		rec.Messages = append(rec.Messages, Message{Role: m.Role, Text: text})
		for _, c := range m.ToolCalls {
			rec.ToolCalls = append(rec.ToolCalls, c.Function.Arguments)
		}
	}
	for _, t := range req.Tools {
		rec.Tools = append(rec.Tools, t.Function.Name)
	}
	rec.AfterToolResult = len(req.Messages) > 0 && req.Messages[len(req.Messages)-1].Role == "tool"
	reply, id := s.record(rec)
	if reply.Fail != "" {
		writeFailure(w, reply.Fail)
		return
	}
	id = "chatcmpl-stub-" + id
	usage := map[string]any{"prompt_tokens": 10 * len(req.Messages), "completion_tokens": len(reply.Text)/4 + 1}
	usage["total_tokens"] = usage["prompt_tokens"].(int) + usage["completion_tokens"].(int)
	finish := "stop"
	var toolCalls []map[string]any
	if reply.ToolCall != nil {
		finish = "tool_calls"
		toolCalls = []map[string]any{{"index": 0, "id": reply.ToolCall.callID("call_stub_", id), "type": "function",
			"function": map[string]any{"name": reply.ToolCall.Name, "arguments": reply.ToolCall.arguments()}}}
	}
	if !req.Stream {
		msg := map[string]any{"role": "assistant", "content": reply.Text}
		if toolCalls != nil {
			msg["tool_calls"] = toolCalls
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "chat.completion", "created": time.Now().Unix(),
			"model": Model, "choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return
	}
	e := startSSE(w)
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": Model,
			"choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	e.event("", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for _, piece := range chunks(reply.Text, reply.Chunks) {
		if !pause(r, reply.ChunkDelay) {
			return
		}
		e.event("", chunk(map[string]any{"content": piece}, nil))
	}
	if toolCalls != nil {
		e.event("", chunk(map[string]any{"tool_calls": toolCalls}, nil))
	}
	last := chunk(map[string]any{}, finish)
	last["usage"] = usage
	e.event("", last)
	e.event("", "[DONE]")
}

// pause waits d unless the client went away first.
func pause(r *http.Request, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

func apiError(typ, msg string) map[string]any {
	return map[string]any{"error": map[string]any{"type": typ, "message": msg}}
}

// writeFailure answers a scripted failure the way OpenAI-style servers do.
func writeFailure(w http.ResponseWriter, f Failure) {
	switch f {
	case FailContextLength:
		e := apiError("invalid_request_error", "This model's maximum context length is 8192 tokens; your messages resulted in more.")
		e["error"].(map[string]any)["code"] = "context_length_exceeded"
		writeJSON(w, http.StatusBadRequest, e)
	default:
		writeJSON(w, http.StatusServiceUnavailable, apiError("overloaded_error", "The server is overloaded; try again later."))
	}
}
