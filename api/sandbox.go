package api

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/sandbox"
	"github.com/jam-dev/jam/internal/store"
)

// SandboxSupportBody is the body of GET /v1/sandbox/support.
type SandboxSupportBody struct {
	Node       string          `json:"node"`
	Support    sandbox.Support `json:"support"`
	WorkflowID string          `json:"workflow_id"`
}

// sandboxSupport asks one node's worker to classify its `sbx`.
func (s *Server) sandboxSupport(c *gin.Context) error {
	node, err := s.nodeQuery(c)
	if err != nil {
		return err
	}
	var out sandbox.Support
	run, err := s.askNode(c, node, contract.SandboxProbeID(node), contract.SandboxProbeTimeout, contract.TypeSandboxProbe, &out)
	if err != nil {
		return err
	}
	// The answer is the node's newest: placement reads it from the node row. The row may be
	// gone (an operator cleared it); the answer still stands.
	if err := s.cfg.Store.SetNodeSandbox(c.Request.Context(), node, out.Status); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	c.JSON(http.StatusOK, SandboxSupportBody{Node: node, Support: out, WorkflowID: run.GetID()})
	return nil
}

// nodeQuery is the node a sandbox question is for: ?node=, or the only registered node when
// there is exactly one.
func (s *Server) nodeQuery(c *gin.Context) (string, error) {
	node := c.Query("node")
	if node == "" {
		nodes, err := s.cfg.Store.ListNodes(c.Request.Context())
		if err != nil {
			return "", err
		}
		if len(nodes) != 1 {
			return "", validationError(domain.Validations{{Field: "node", Detail: "required when more than one node (or none) is registered"}})
		}
		return nodes[0].Name, nil
	}
	if err := domain.ValidateNodeName(node); err != nil {
		return "", err
	}
	if _, err := s.cfg.Store.GetNode(c.Request.Context(), node); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return "", notFound("node", err)
		}
		return "", err
	}
	return node, nil
}
