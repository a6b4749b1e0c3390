package api

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
)

// OperatorDecider is how a permission decided through the API records its decider.
const OperatorDecider = "operator"

// PermissionBody is a runtime permission request. Decision, DecidedBy and DecidedAt are null
// while it is pending; an expired or cancelled request has DecidedAt but no decision.
type PermissionBody struct {
	ID               uuid.UUID                  `json:"id"`
	AgentID          uuid.UUID                  `json:"agent_id"`
	RoomID           *uuid.UUID                 `json:"room_id"`
	RuntimeSessionID *uuid.UUID                 `json:"runtime_session_id"`
	ToolKey          string                     `json:"tool_key"`
	Title            string                     `json:"title"`
	Summary          string                     `json:"summary"`
	State            domain.PermissionState     `json:"state"`
	Decision         *domain.PermissionDecision `json:"decision"`
	DecidedBy        *string                    `json:"decided_by"`
	Reason           string                     `json:"reason"`
	CreatedAt        time.Time                  `json:"created_at"`
	DecidedAt        *time.Time                 `json:"decided_at"`
	DeadlineAt       *time.Time                 `json:"deadline_at"`
}

// PermissionList is the body of GET /v1/permissions, newest first.
type PermissionList struct {
	Items []PermissionBody `json:"items"`
}

func permissionBody(p domain.Permission) PermissionBody {
	b := PermissionBody{ID: p.ID, AgentID: p.AgentID, RoomID: p.RoomID, RuntimeSessionID: p.RuntimeSession,
		ToolKey: p.ToolKey, Title: p.Title, Summary: p.Summary, State: p.State, Reason: p.Reason,
		CreatedAt: p.CreatedAt, DecidedAt: p.DecidedAt, DeadlineAt: p.Deadline}
	if p.Decision != "" {
		d := p.Decision
		b.Decision = &d
	}
	if p.DecidedBy != "" {
		by := p.DecidedBy
		b.DecidedBy = &by
	}
	return b
}

// DecidePermissionRequest is the body of POST /v1/permissions/{id}/decision.
type DecidePermissionRequest struct {
	Decision domain.PermissionDecision `json:"decision"`
}

func (r DecidePermissionRequest) Validate() error {
	if r.Decision == "" {
		return &domain.ValidationError{Field: "decision",
			Detail: "required: one of " + strings.Join(domain.PermissionDecisions.Strings(), ", ")}
	}
	return nil
}

// Permission listing bounds.
const (
	defaultPermissionPage = store.DefaultPermissionLimit
	maxPermissionPage     = 500
)

func (s *Server) listPermissions(c *gin.Context) error {
	var f store.PermissionFilter
	if err := listQuery(c, domain.PermissionStates, &f.State, []idFilter{{"agent", &f.Agent}, {"room", &f.Room}}, &f.Limit, defaultPermissionPage, maxPermissionPage); err != nil {
		return err
	}
	ps, err := s.cfg.Store.ListPermissions(c.Request.Context(), f)
	if err != nil {
		return err
	}
	out := PermissionList{Items: make([]PermissionBody, len(ps))}
	for i, p := range ps {
		out.Items[i] = permissionBody(p)
	}
	c.JSON(http.StatusOK, out)
	return nil
}

func (s *Server) getPermission(c *gin.Context) error {
	p, err := lookup(c, "permission", s.cfg.Store.GetPermission)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, permissionBody(p))
	return nil
}

// decidePermission answers a pending request. Repeating the same decision returns the
// request; a different decision after it left pending is 409.
func (s *Server) decidePermission(c *gin.Context) error {
	p, err := lookup(c, "permission", s.cfg.Store.GetPermission)
	if err != nil {
		return err
	}
	var req DecidePermissionRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	p, err = s.cfg.Store.DecidePermission(c.Request.Context(), p.ID, req.Decision, OperatorDecider, "", time.Now())
	if errors.Is(err, store.ErrPermissionSettled) {
		return &Error{Status: http.StatusConflict, Code: domain.CodeConflict,
			Message: "the permission request is no longer pending and was settled differently", Cause: err}
	}
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, permissionBody(p))
	return nil
}
