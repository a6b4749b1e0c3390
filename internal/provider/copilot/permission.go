package copilot

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
)

// permissionRequest is what Copilot asks permission for; kind says which fields it fills.
type permissionRequest struct {
	Kind            string `json:"kind"`
	ToolCallID      string `json:"toolCallId"`
	ToolName        string `json:"toolName"`
	ServerName      string `json:"serverName"`
	FullCommandText string `json:"fullCommandText"`
	Intention       string `json:"intention"`
	FileName        string `json:"fileName"`
	Path            string `json:"path"`
	URL             string `json:"url"`
}

// Copilot's permission result kinds.
const (
	approveOnce       = "approve-once"
	approveForSession = "approve-for-session"
	reject            = "reject"
)

// permission answers a permission.requested event: Jam's own tools are Jam's to approve
// (the registry checks each call's scope); everything else goes to the permission broker,
// during a turn only, and the turn's end withdraws the ask.
func (r *Runtime) permission(ts *turnState, raw json.RawMessage) {
	d, ok := decode[struct {
		RequestID         string            `json:"requestId"`
		PermissionRequest permissionRequest `json:"permissionRequest"`
	}](r, "permission.requested", raw)
	if !ok || d.RequestID == "" {
		return
	}
	p := d.PermissionRequest
	kind := reject
	switch {
	case p.Kind == "custom-tool" && r.isJamTool(p.ToolName):
		kind = approveOnce
	case ts != nil:
		kind = r.askBroker(ts, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), InterruptGrace)
	defer cancel()
	err := r.conn().Call(ctx, "session.permissions.handlePendingPermissionRequest",
		map[string]any{"sessionId": r.sessionID(), "requestId": d.RequestID, "result": permissionResult(kind)}, nil)
	if err != nil {
		r.Log.Debug("answering a copilot permission request failed", "error", err)
	}
}

// askBroker asks the permission broker and maps its decision to Copilot's result kind.
func (r *Runtime) askBroker(ts *turnState, p permissionRequest) string {
	req := provider.PermissionRequest{AgentID: r.Spec.AgentID, RoomID: r.Spec.RoomID, RuntimeSession: r.Spec.RuntimeSession}
	switch p.Kind {
	case "shell":
		req.ToolKey, req.Title = "execute", "run "+p.FullCommandText
		if p.FullCommandText == "" {
			req.Title = "run a command"
		}
	case "write":
		req.ToolKey, req.Title = "edit", "change "+orDefault(p.FileName, "files")
	case "read":
		req.ToolKey, req.Title = "read", "read "+orDefault(p.Path, "files")
	case "url":
		req.ToolKey, req.Title = "fetch", "fetch "+orDefault(p.URL, "a URL")
	case "mcp":
		req.ToolKey, req.Title = "execute", fmt.Sprintf("use %s from %s", orDefault(p.ToolName, "a tool"), orDefault(p.ServerName, "an MCP server"))
	default:
		req.ToolKey, req.Title = "execute", "use "+orDefault(p.ToolName, p.Kind)
	}
	req.Title = domain.Truncate(req.Title, domain.MaxPermissionTitle)
	req.Summary = domain.Truncate(p.Intention, 2000)
	r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentPermissionRequest, Text: req.Title,
		Permission: &provider.PermissionAsk{ToolKey: req.ToolKey, Title: req.Title}})
	ans, err := r.Spec.AskPermission(ts.Ctx, req)
	if err != nil {
		if ts.Ctx.Err() == nil {
			r.Log.Warn("permission broker failed; rejecting", "error", err)
		}
		return reject
	}
	switch ans.Decision {
	case domain.PermissionAllowOnce:
		return approveOnce
	case domain.PermissionAllowAlways:
		return approveForSession
	}
	return reject
}

// isJamTool reports whether name is one of Jam's tools in this session.
func (r *Runtime) isJamTool(name string) bool {
	for _, s := range r.Tools.Specs() {
		if s.Name == name {
			return true
		}
	}
	return false
}

// externalTool runs an external_tool.requested call through Jam's tool registry, bound to
// this runtime instance (a repeated call id gets its first result), and hands Copilot the
// result. A call outside a turn lives as long as the runtime: settlement tools refuse it.
func (r *Runtime) externalTool(raw json.RawMessage) {
	d, ok := decode[struct {
		RequestID  string          `json:"requestId"`
		ToolCallID string          `json:"toolCallId"`
		ToolName   string          `json:"toolName"`
		Arguments  json.RawMessage `json:"arguments"`
	}](r, "external_tool.requested", raw)
	if !ok || d.RequestID == "" {
		return
	}
	ctx, cancel := r.ToolContext()
	defer cancel()
	args := d.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	res := r.Tools.Call(ctx, d.ToolCallID, d.ToolName, args)
	result := any(res.Text)
	if res.IsError {
		result = map[string]any{"textResultForLlm": res.Text, "resultType": "failure"}
	}
	actx, cancel := context.WithTimeout(context.Background(), InterruptGrace)
	defer cancel()
	err := r.conn().Call(actx, "session.tools.handlePendingToolCall",
		map[string]any{"sessionId": r.sessionID(), "requestId": d.RequestID, "result": result}, nil)
	if err != nil {
		r.Log.Debug("answering a copilot tool call failed", "tool", d.ToolName, "error", err)
	}
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

// permissionResult is the result object of a decision; a rejection says why, so the agent
// can carry on without the tool.
func permissionResult(kind string) map[string]any {
	res := map[string]any{"kind": kind}
	if kind == reject {
		res["feedback"] = "Denied by the room's permission policy; do not retry it, carry on without it."
	}
	return res
}
