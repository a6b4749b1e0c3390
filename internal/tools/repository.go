package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/jam-dev/jam/internal/domain"
)

// repoTool describes one repository tool: its action and the arguments it takes.
type repoTool struct {
	name, description string
	action            domain.WorkspaceAction
	properties        string
	required          string
}

var repoToolDefs = []repoTool{
	{domain.ToolRepoClone, "Clone a git repository into your workspace (https://, ssh://, git:// or user@host:path URLs). " +
		"It becomes the directory dir (default: the repository's name).", domain.WorkspaceActionClone,
		`"url":{"type":"string","description":"the repository URL"},"dir":{"type":"string","description":"directory name in your workspace (optional)"},` +
			`"branch":{"type":"string","description":"branch to check out (optional)"}`, `["url"]`},
	{domain.ToolRepoBranch, "Create a branch in a repository of your workspace and switch to it.", domain.WorkspaceActionBranch,
		`"dir":{"type":"string","description":"the repository's directory in your workspace"},"branch":{"type":"string","description":"the new branch"}`, `["dir","branch"]`},
	{domain.ToolRepoCommit, "Commit every change in a repository of your workspace, authored by you.", domain.WorkspaceActionCommit,
		`"dir":{"type":"string","description":"the repository's directory in your workspace"},"message":{"type":"string","description":"the commit message"}`, `["dir","message"]`},
	{domain.ToolRepoPush, "Push a branch of a repository of your workspace (default: the current branch, to origin).", domain.WorkspaceActionPush,
		`"dir":{"type":"string","description":"the repository's directory in your workspace"},"branch":{"type":"string","description":"branch (optional)"},` +
			`"remote":{"type":"string","description":"remote (optional, default origin)"}`, `["dir"]`},
	{domain.ToolRepoPullRequest, "Open a pull request for the current (or named) branch with gh, or update the open one's title and body.",
		domain.WorkspaceActionPullRequest,
		`"dir":{"type":"string","description":"the repository's directory in your workspace"},"title":{"type":"string"},"body":{"type":"string"},` +
			`"base":{"type":"string","description":"base branch (optional)"},"branch":{"type":"string","description":"head branch (optional)"}`, `["dir","title"]`},
	{domain.ToolRepoChecks, "Read the checks of the pull request of the current (or named) branch.", domain.WorkspaceActionChecks,
		`"dir":{"type":"string","description":"the repository's directory in your workspace"},"branch":{"type":"string","description":"head branch (optional)"}`, `["dir"]`},
}

// repoTools are the repository tools, each a workspace operation on the caller's own
// workspace: no workspace, room or session can be named.
func repoTools() []Tool {
	out := make([]Tool, 0, len(repoToolDefs))
	for _, d := range repoToolDefs {
		action := d.action
		out = append(out, Tool{Name: d.name, Description: d.description, Scopes: []domain.ToolScope{domain.ScopeWorkspace},
			InputSchema: json.RawMessage(`{"type":"object","properties":{` + d.properties + `},"required":` + d.required +
				`,"additionalProperties":false}`),
			Handle: func(ctx context.Context, c Call) (string, error) { return repository(ctx, c, action) }})
	}
	return out
}

func repository(ctx context.Context, c Call, action domain.WorkspaceAction) (string, error) {
	var req domain.RepoRequest
	dec := json.NewDecoder(strings.NewReader(string(c.Args)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.AuthorName != "" || req.AuthorEmail != "" {
		return "", refuse("Not run: the arguments do not fit this tool's schema.")
	}
	if err := domain.ValidateRepoRequest(action, &req); err != nil {
		return "", refuse("Not run: %v.", err)
	}
	res, err := c.Backend.Repository(ctx, c.Identity, action, req)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(res)
	if err != nil {
		return "", fmt.Errorf("encode repository result: %w", err)
	}
	return "Done: " + string(b), nil
}
