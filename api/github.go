package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// githubReadiness is GET /v1/workspaces/{id}/github?repo=OWNER/NAME...: whether the
// workspace's guest can reach and authenticate to GitHub and each named repository (at most
// 16), answered by its node within the reference's bounds. It reads only and never reads
// the credential itself.
func (s *Server) githubReadiness(c *gin.Context) error {
	repos := c.QueryArray("repo")
	if err := domain.ValidateGitHubRepos(repos); err != nil {
		return err
	}
	ws, h, err := s.workspaceHost(c)
	if err != nil {
		return err
	}
	var out contract.GitHubReadiness
	if _, err := s.askNodeWith(c, h.Node, contract.GitHubReadinessID(ws.ID, repos), contract.GitHubReadinessTimeout,
		contract.TypeGitHubReadiness, contract.GitHubReadinessInput{Node: h.Node, Repos: repos,
			Ref: contract.WorkspaceRef{Workspace: ws.ID, Host: ws.RuntimeHostID, Session: ws.RuntimeSessionID}}, &out); err != nil {
		return err
	}
	c.JSON(http.StatusOK, out)
	return nil
}
