package api

import (
	"github.com/gin-gonic/gin"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// RepositoryRequest is the body of POST /v1/workspaces/{id}/repositories/{action}; each
// action reads only its own fields (see domain.RepoRequest).
type RepositoryRequest struct {
	URL     string `json:"url,omitempty"`
	Dir     string `json:"dir,omitempty"`
	Branch  string `json:"branch,omitempty"`
	Base    string `json:"base,omitempty"`
	Remote  string `json:"remote,omitempty"`
	Message string `json:"message,omitempty"`
	Title   string `json:"title,omitempty"`
	Body    string `json:"body,omitempty"`
}

// repositoryActions are the route names of the repository actions.
var repositoryActions = map[string]domain.WorkspaceAction{
	"clone": domain.WorkspaceActionClone, "branch": domain.WorkspaceActionBranch, "commit": domain.WorkspaceActionCommit,
	"push": domain.WorkspaceActionPush, "pull-request": domain.WorkspaceActionPullRequest, "checks": domain.WorkspaceActionChecks,
}

// repositoryOp validates a repository operation completely before anything is recorded or
// run (a hostile URL, ref or message is a 400 and nothing runs), then starts it as the
// workspace's WorkspaceOp: 202 with the operation, whose result carries the commit, the pull
// request URL or the checks table.
func (s *Server) repositoryOp(c *gin.Context) error {
	action, ok := repositoryActions[c.Param("action")]
	if !ok {
		return notFound("repository action", nil)
	}
	var body RepositoryRequest
	if err := decodeJSON(c, &body); err != nil {
		return err
	}
	req := domain.RepoRequest{URL: body.URL, Dir: body.Dir, Branch: body.Branch, Base: body.Base, Remote: body.Remote,
		Message: body.Message, Title: body.Title, Body: body.Body}
	if err := domain.ValidateRepoRequest(action, &req); err != nil {
		return err
	}
	ws, err := lookup(c, "workspace", s.cfg.Store.GetManagedWorkspace)
	if err != nil {
		return err
	}
	return s.startWorkspaceOp(c, contract.WorkspaceOpInput{Workspace: ws.ID, Action: action, Repo: &req})
}
