package codex

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/provider/jsonrpc"
)

// serverRequest answers the app-server's requests: settlement tool calls, and command and
// file-change approvals through the permission broker. Anything else is declined.
func (r *Runtime) serverRequest(method string, raw json.RawMessage) (any, *jsonrpc.Error) {
	switch method {
	case "item/tool/call":
		p, ok := paramsOf[struct {
			ThreadID  string          `json:"threadId"`
			CallID    string          `json:"callId"`
			Tool      string          `json:"tool"`
			Arguments json.RawMessage `json:"arguments"`
		}](r, method, raw)
		if !ok || (p.ThreadID != "" && p.ThreadID != r.threadID()) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid params"}
		}
		return r.toolCall(p.CallID, p.Tool, p.Arguments), nil
	case "item/commandExecution/requestApproval", "item/fileChange/requestApproval":
		return r.approval(method, raw), nil
	case "item/tool/requestUserInput":
		return r.userInput(raw), nil
	}
	r.Log.Debug("codex server request declined", "method", method)
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "Jam does not handle " + method}
}

// toolCall runs one dynamic tool call through Jam's tool registry, bound to this runtime
// instance (the registry answers a repeated call id with its first result). A call outside
// a turn runs with the runtime's lifetime as its context: settlement tools refuse it.
func (r *Runtime) toolCall(callID, tool string, args json.RawMessage) map[string]any {
	ctx, cancel := r.ToolContext()
	defer cancel()
	res := r.Tools.Call(ctx, callID, tool, args)
	return toolResult(res.Text, !res.IsError)
}

func toolResult(text string, ok bool) map[string]any {
	return map[string]any{"contentItems": []map[string]any{{"type": "inputText", "text": text}}, "success": ok}
}

// approval asks the permission broker whether Codex may run a command or change files.
// Only a request during a turn is asked; the turn's end cancels it.
func (r *Runtime) approval(method string, raw json.RawMessage) map[string]any {
	p, _ := paramsOf[struct {
		Reason  string          `json:"reason"`
		Command json.RawMessage `json:"command"`
		Cwd     string          `json:"cwd"`
		ItemID  string          `json:"itemId"`
	}](r, method, raw)
	r.mu.Lock()
	ts := r.turn
	r.mu.Unlock()
	if ts == nil {
		return map[string]any{"decision": "cancel"}
	}
	req := provider.PermissionRequest{AgentID: r.Spec.AgentID, RoomID: r.Spec.RoomID, RuntimeSession: r.Spec.RuntimeSession}
	switch method {
	case "item/commandExecution/requestApproval":
		req.ToolKey, req.Title = "execute", "run "+commandText(p.Command)
		if cmd := commandText(p.Command); cmd == "" {
			req.Title = "run a command"
		}
	default:
		req.ToolKey, req.Title = "edit", "change files"
	}
	req.Title = domain.Truncate(req.Title, domain.MaxPermissionTitle)
	req.Summary = domain.Truncate(p.Reason, 2000)
	if p.Cwd != "" {
		req.Summary = domain.Truncate(fmt.Sprintf("%s (in %s)", p.Reason, p.Cwd), 2000)
	}
	r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentPermissionRequest, Text: req.Title,
		Permission: &provider.PermissionAsk{ToolKey: req.ToolKey, Title: req.Title}})
	ctx, cancel := context.WithCancel(ts.Ctx)
	defer cancel()
	ans, err := r.Spec.AskPermission(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return map[string]any{"decision": "cancel"}
		}
		r.Log.Warn("permission broker failed; declining", "error", err)
		return map[string]any{"decision": "decline"}
	}
	switch ans.Decision {
	case domain.PermissionAllowOnce:
		return map[string]any{"decision": "accept"}
	case domain.PermissionAllowAlways:
		return map[string]any{"decision": "acceptForSession"}
	}
	return map[string]any{"decision": "decline"}
}

// userInput answers Codex's request_user_input through Jam's question broker: each
// question goes to the room's human in turn; one left unanswered (the deadline passed, or
// this runtime may not ask) gets no answers, and Codex proceeds without.
func (r *Runtime) userInput(raw json.RawMessage) map[string]any {
	p, _ := paramsOf[struct {
		Questions []struct {
			ID       string `json:"id"`
			Header   string `json:"header"`
			Question string `json:"question"`
			IsSecret bool   `json:"isSecret"`
			Options  []struct {
				Label       string `json:"label"`
				Description string `json:"description"`
			} `json:"options"`
		} `json:"questions"`
	}](r, "item/tool/requestUserInput", raw)
	answers := map[string]any{}
	r.mu.Lock()
	ts := r.turn
	r.mu.Unlock()
	asker, ok := r.Tools.(provider.QuestionAsker)
	for _, q := range p.Questions {
		got := []string{}
		if ok && ts != nil && !q.IsSecret {
			// A secret is never asked in the room: the transcript is not a secret store.
			text := q.Question
			if q.Header != "" {
				text = q.Header + ": " + text
			}
			for _, o := range q.Options {
				text += "\n- " + o.Label
				if o.Description != "" {
					text += " (" + o.Description + ")"
				}
			}
			ans, answered, err := asker.AskQuestion(ts.Ctx, text)
			switch {
			case err != nil:
				r.Log.Warn("request_user_input not asked", "error", err)
			case answered:
				got = []string{ans}
			}
		}
		answers[q.ID] = map[string]any{"answers": got}
	}
	return map[string]any{"answers": answers}
}
