package claudecode

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
)

// canUseTool answers Claude's request to run a tool: Jam's own tools are Jam's to allow;
// any other goes to the permission broker (only during a turn, whose end cancels the ask;
// claude may cancel it too). An allowed call runs with its input unchanged.
func (r *Runtime) canUseTool(id string, raw json.RawMessage) {
	req, ok := decode[struct {
		ToolName    string          `json:"tool_name"`
		DisplayName string          `json:"display_name"`
		Description string          `json:"description"`
		Title       string          `json:"title"`
		Input       json.RawMessage `json:"input"`
		ToolUseID   string          `json:"tool_use_id"`
	}](r, "can_use_tool", raw)
	if !ok {
		r.refuse(id, "unreadable request")
		return
	}
	input := req.Input
	if len(input) == 0 || string(input) == "null" {
		input = json.RawMessage(`{}`)
	}
	allow := map[string]any{"behavior": "allow", "updatedInput": input}
	if r.Spec.MCP != nil && strings.HasPrefix(req.ToolName, toolPrefix(r.Spec.MCP.Name)) {
		r.respond(id, allow)
		return
	}
	r.mu.Lock()
	ts := r.turn
	var ctx context.Context
	var cancel context.CancelFunc
	if ts != nil {
		ctx, cancel = context.WithCancel(ts.Ctx)
		r.asks[id] = cancel
	}
	r.mu.Unlock()
	if ts == nil {
		r.respond(id, deny("Jam is not running a turn; the tool was not allowed."))
		return
	}
	defer func() {
		r.mu.Lock()
		delete(r.asks, id)
		r.mu.Unlock()
		cancel()
	}()
	title := toolTitle(req.ToolName, input)
	if req.Title != "" {
		title = req.Title
	}
	pr := provider.PermissionRequest{AgentID: r.Spec.AgentID, RoomID: r.Spec.RoomID, RuntimeSession: r.Spec.RuntimeSession,
		ToolKey: toolKey(req.ToolName), Title: domain.Truncate(title, domain.MaxPermissionTitle),
		Summary: domain.Truncate(strings.TrimSpace(req.Description+"\n"+string(input)), 2000)}
	r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentPermissionRequest, Text: pr.Title,
		Permission: &provider.PermissionAsk{ToolKey: pr.ToolKey, Title: pr.Title}})
	ans, err := r.Spec.AskPermission(ctx, pr)
	switch {
	case err != nil && ctx.Err() != nil:
		r.respond(id, deny("The request was withdrawn before anyone decided."))
	case err != nil:
		r.Log.Warn("permission broker failed; denying", "error", err)
		r.respond(id, deny("Jam could not ask for permission; the tool was not allowed."))
	case ans.Decision == domain.PermissionAllowOnce || ans.Decision == domain.PermissionAllowAlways:
		r.respond(id, allow)
	default:
		why := "Denied by the room's decider."
		if ans.Reason != "" {
			why = "Denied: " + domain.Truncate(ans.Reason, 500)
		}
		r.respond(id, deny(why))
	}
}

func deny(message string) map[string]any {
	return map[string]any{"behavior": "deny", "message": message}
}

// toolKey groups Claude's tools the way always-rules key them: running commands, editing
// files, reading, fetching, else the tool's own name.
func toolKey(tool string) string {
	switch tool {
	case "Bash", "BashOutput", "KillShell", "Monitor":
		return "execute"
	case "Edit", "MultiEdit", "Write", "NotebookEdit":
		return "edit"
	case "Read", "Glob", "Grep", "LS":
		return "read"
	case "WebFetch", "WebSearch":
		return "fetch"
	}
	return strings.ToLower(domain.Truncate(tool, 100))
}
