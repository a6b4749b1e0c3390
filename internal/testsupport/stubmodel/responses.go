package stubmodel

import (
	"encoding/json"
	"net/http"
	"time"
)

// responsesRequest is the part of a Responses request the server reads.
type responsesRequest struct {
	Model        string            `json:"model"`
	Instructions string            `json:"instructions"`
	Stream       bool              `json:"stream"`
	Input        []json.RawMessage `json:"input"`
	Tools        []struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"tools"`
}

// responsesItem is one input item: a message, a function call or a call's output.
type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Output    json.RawMessage `json:"output"`
	Arguments string          `json:"arguments"`
}

// responses answers POST /v1/responses with the Responses event stream Codex consumes:
// response.created, the output items (a message streamed by output_text deltas, then a
// function_call when scripted), and response.completed with usage.
func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, apiError("invalid_request_error", "unreadable body"))
		return
	}
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeJSON(w, http.StatusBadRequest, apiError("invalid_request_error", "body is not JSON"))
		return
	}
	rec := Request{Dialect: DialectResponses, Path: r.URL.Path, Body: body}
	if req.Instructions != "" {
		rec.Messages = append(rec.Messages, Message{Role: "system", Text: req.Instructions})
	}
	for _, raw := range req.Input {
		var it responsesItem
		if json.Unmarshal(raw, &it) != nil {
			continue
		}
		switch it.Type {
		case "message", "":
			rec.Messages = append(rec.Messages, Message{Role: it.Role, Text: textOf(it.Content)})
		case "function_call_output":
			rec.ToolResults = append(rec.ToolResults, outputText(it.Output))
		case "function_call":
			rec.ToolCalls = append(rec.ToolCalls, it.Arguments)
		}
		rec.AfterToolResult = it.Type == "function_call_output"
	}
	for _, t := range req.Tools {
		if t.Name != "" {
			rec.Tools = append(rec.Tools, t.Name)
		}
	}
	reply, id := s.record(rec)
	if reply.Fail != "" {
		writeFailure(w, reply.Fail)
		return
	}
	respID, msgID := "resp_stub_"+id, "msg_stub_"+id
	response := func(status string, output []any, usage any) map[string]any {
		out := map[string]any{"id": respID, "object": "response", "created_at": time.Now().Unix(), "status": status,
			"model": Model, "output": output}
		if usage != nil {
			out["usage"] = usage
		}
		return out
	}
	e := startSSE(w)
	seq := 0
	emit := func(typ string, fields map[string]any) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		e.event(typ, fields)
	}
	emit("response.created", map[string]any{"response": response("in_progress", []any{}, nil)})
	var output []any
	index := 0
	if reply.Text != "" {
		emit("response.output_item.added", map[string]any{"output_index": index, "item": map[string]any{
			"id": msgID, "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}})
		emit("response.content_part.added", map[string]any{"item_id": msgID, "output_index": index, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
		for _, piece := range chunks(reply.Text, reply.Chunks) {
			if !pause(r, reply.ChunkDelay) {
				return
			}
			emit("response.output_text.delta", map[string]any{"item_id": msgID, "output_index": index, "content_index": 0, "delta": piece})
		}
		part := map[string]any{"type": "output_text", "text": reply.Text, "annotations": []any{}}
		emit("response.output_text.done", map[string]any{"item_id": msgID, "output_index": index, "content_index": 0, "text": reply.Text})
		emit("response.content_part.done", map[string]any{"item_id": msgID, "output_index": index, "content_index": 0, "part": part})
		item := map[string]any{"id": msgID, "type": "message", "status": "completed", "role": "assistant", "content": []any{part}}
		emit("response.output_item.done", map[string]any{"output_index": index, "item": item})
		output = append(output, item)
		index++
	}
	if c := reply.ToolCall; c != nil {
		fcID, callID := "fc_stub_"+id, c.callID("call_stub_", id)
		item := map[string]any{"id": fcID, "type": "function_call", "status": "in_progress", "call_id": callID, "name": c.Name, "arguments": ""}
		emit("response.output_item.added", map[string]any{"output_index": index, "item": item})
		args := c.arguments()
		emit("response.function_call_arguments.delta", map[string]any{"item_id": fcID, "output_index": index, "delta": args})
		emit("response.function_call_arguments.done", map[string]any{"item_id": fcID, "output_index": index, "arguments": args})
		done := map[string]any{"id": fcID, "type": "function_call", "status": "completed", "call_id": callID, "name": c.Name, "arguments": args}
		emit("response.output_item.done", map[string]any{"output_index": index, "item": done})
		output = append(output, done)
	}
	in, out := 10*len(rec.Messages), len(reply.Text)/4+1
	emit("response.completed", map[string]any{"response": response("completed", output, map[string]any{
		"input_tokens": in, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": out, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": in + out})})
}

// outputText flattens a function_call_output's output (a string or content parts).
func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return textOf(raw)
}
