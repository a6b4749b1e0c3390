package acp

import (
	"context"
	"fmt"
	"strings"

	sdk "github.com/coder/acp-go-sdk"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
)

// client is Jam's side of the ACP connection: it maps the agent's session updates to
// AgentEvents and answers its permission requests through the broker.
type client struct{ r *Runtime }

var _ sdk.Client = (*client)(nil)

// SessionUpdate maps one streamed update of the running turn. Updates outside a turn (the
// replay of session/load, command lists) and for another session are dropped.
func (c *client) SessionUpdate(_ context.Context, n sdk.SessionNotification) error {
	r := c.r
	t := r.CurrentTurn()
	r.mu.Lock()
	session := r.session
	r.mu.Unlock()
	if t == nil || n.SessionId != session {
		return nil
	}
	u := n.Update
	switch {
	case u.AgentMessageChunk != nil:
		if text := textOf(u.AgentMessageChunk.Content); text != "" {
			t.Settle.AddText(text)
			r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentTextDelta, Text: text})
		}
	case u.AgentThoughtChunk != nil:
		if text := textOf(u.AgentThoughtChunk.Content); text != "" {
			r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentThought, Text: text})
		}
	case u.ToolCall != nil:
		tc := u.ToolCall
		r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentToolCall, Tool: &provider.ToolCall{
			ID: bounded(string(tc.ToolCallId)), Title: bounded(tc.Title), Kind: string(tc.Kind), Status: string(tc.Status)}})
	case u.ToolCallUpdate != nil:
		tu := u.ToolCallUpdate
		call := &provider.ToolCall{ID: bounded(string(tu.ToolCallId))}
		if tu.Title != nil {
			call.Title = bounded(*tu.Title)
		}
		if tu.Kind != nil {
			call.Kind = string(*tu.Kind)
		}
		kind := domain.AgentToolCall
		if tu.Status != nil {
			call.Status = string(*tu.Status)
			if *tu.Status == sdk.ToolCallStatusCompleted || *tu.Status == sdk.ToolCallStatusFailed {
				kind = domain.AgentToolResult
			}
		}
		r.Stamper.Emit(provider.AgentEvent{Kind: kind, Tool: call})
	case u.UsageUpdate != nil:
		// ACP's usage_update is a context gauge, not per-turn usage: it becomes a status line.
		r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentStatus,
			Text: fmt.Sprintf("context %d/%d tokens", u.UsageUpdate.Used, u.UsageUpdate.Size)})
	case u.Plan != nil:
		r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentStatus, Text: fmt.Sprintf("plan with %d entries", len(u.Plan.Entries))})
	}
	return nil
}

// RequestPermission asks the broker and maps its decision onto the agent's options. A turn
// that ends while the request is pending answers "cancelled", as the protocol requires.
func (c *client) RequestPermission(ctx context.Context, p sdk.RequestPermissionRequest) (sdk.RequestPermissionResponse, error) {
	r := c.r
	cancelled := sdk.RequestPermissionResponse{Outcome: sdk.RequestPermissionOutcome{Cancelled: &sdk.RequestPermissionOutcomeCancelled{}}}
	t := r.CurrentTurn()
	if t == nil {
		return cancelled, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(t.Ctx, cancel)
	defer stop()

	req := provider.PermissionRequest{AgentID: r.Spec.AgentID, RoomID: r.Spec.RoomID, RuntimeSession: r.Spec.RuntimeSession,
		ToolKey: toolKey(p.ToolCall), Title: titleOf(p.ToolCall), Summary: summaryOf(p)}
	r.Stamper.Emit(provider.AgentEvent{Kind: domain.AgentPermissionRequest, Text: req.Title,
		Permission: &provider.PermissionAsk{ToolKey: req.ToolKey, Title: req.Title}})
	ans, err := r.Spec.AskPermission(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return cancelled, nil
		}
		r.Log.Warn("permission broker failed; denying", "err", err)
		ans = provider.PermissionAnswer{Decision: domain.PermissionDeny, Reason: "the permission broker failed"}
	}
	if id, ok := pickOption(p.Options, ans.Decision); ok {
		return sdk.RequestPermissionResponse{Outcome: sdk.RequestPermissionOutcome{
			Selected: &sdk.RequestPermissionOutcomeSelected{OptionId: id}}}, nil
	}
	return cancelled, nil
}

// pickOption finds the agent's option for a decision, falling back to the nearest kind.
func pickOption(opts []sdk.PermissionOption, d domain.PermissionDecision) (sdk.PermissionOptionId, bool) {
	var prefs []sdk.PermissionOptionKind
	switch d {
	case domain.PermissionAllowOnce:
		prefs = []sdk.PermissionOptionKind{sdk.PermissionOptionKindAllowOnce, sdk.PermissionOptionKindAllowAlways}
	case domain.PermissionAllowAlways:
		prefs = []sdk.PermissionOptionKind{sdk.PermissionOptionKindAllowAlways, sdk.PermissionOptionKindAllowOnce}
	default:
		prefs = []sdk.PermissionOptionKind{sdk.PermissionOptionKindRejectOnce, sdk.PermissionOptionKindRejectAlways}
	}
	for _, k := range prefs {
		for _, o := range opts {
			if o.Kind == k {
				return o.OptionId, true
			}
		}
	}
	return "", false
}

func toolKey(tc sdk.ToolCallUpdate) string {
	if tc.Kind != nil && *tc.Kind != "" {
		return domain.Truncate(string(*tc.Kind), domain.MaxPermissionToolKey)
	}
	return "other"
}

func titleOf(tc sdk.ToolCallUpdate) string {
	if tc.Title != nil && strings.TrimSpace(*tc.Title) != "" {
		return domain.Truncate(*tc.Title, domain.MaxPermissionTitle)
	}
	return "tool call " + bounded(string(tc.ToolCallId))
}

func summaryOf(p sdk.RequestPermissionRequest) string {
	var b strings.Builder
	for _, l := range p.ToolCall.Locations {
		fmt.Fprintf(&b, "%s\n", l.Path)
	}
	names := make([]string, len(p.Options))
	for i, o := range p.Options {
		names[i] = o.Name
	}
	fmt.Fprintf(&b, "options: %s", strings.Join(names, ", "))
	return domain.Truncate(b.String(), domain.MaxPermissionSummary)
}

func textOf(c sdk.ContentBlock) string {
	if c.Text != nil {
		return c.Text.Text
	}
	return ""
}

func bounded(s string) string { return domain.Truncate(s, 256) }

// The agent may not touch Jam's files or terminals: Jam advertises neither capability.

func (c *client) ReadTextFile(context.Context, sdk.ReadTextFileRequest) (sdk.ReadTextFileResponse, error) {
	return sdk.ReadTextFileResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodFsReadTextFile)
}

func (c *client) WriteTextFile(context.Context, sdk.WriteTextFileRequest) (sdk.WriteTextFileResponse, error) {
	return sdk.WriteTextFileResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodFsWriteTextFile)
}

func (c *client) CreateTerminal(context.Context, sdk.CreateTerminalRequest) (sdk.CreateTerminalResponse, error) {
	return sdk.CreateTerminalResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalCreate)
}

func (c *client) KillTerminal(context.Context, sdk.KillTerminalRequest) (sdk.KillTerminalResponse, error) {
	return sdk.KillTerminalResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalKill)
}

func (c *client) TerminalOutput(context.Context, sdk.TerminalOutputRequest) (sdk.TerminalOutputResponse, error) {
	return sdk.TerminalOutputResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalOutput)
}

func (c *client) ReleaseTerminal(context.Context, sdk.ReleaseTerminalRequest) (sdk.ReleaseTerminalResponse, error) {
	return sdk.ReleaseTerminalResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalRelease)
}

func (c *client) WaitForTerminalExit(context.Context, sdk.WaitForTerminalExitRequest) (sdk.WaitForTerminalExitResponse, error) {
	return sdk.WaitForTerminalExitResponse{}, sdk.NewMethodNotFound(sdk.ClientMethodTerminalWaitForExit)
}
