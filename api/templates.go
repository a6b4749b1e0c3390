package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
)

// TemplateBody is a runtime template: its identity and generations beside its configuration
// (the configuration fields are inline, as in requests).
type TemplateBody struct {
	ID                  uuid.UUID `json:"id"`
	AgentID             uuid.UUID `json:"agent_id"`
	DesiredGeneration   int64     `json:"desired_generation"`
	EffectiveGeneration int64     `json:"effective_generation"`
	CreatedAt           time.Time `json:"created_at"`
	UpdatedAt           time.Time `json:"updated_at"`
	domain.TemplateConfig
}

// TemplateList is the body of GET /v1/agents/{id}/templates.
type TemplateList struct {
	Items []TemplateBody `json:"items"`
}

func templateBody(t domain.Template) TemplateBody {
	return TemplateBody{ID: t.ID, AgentID: t.AgentID, DesiredGeneration: t.DesiredGeneration,
		EffectiveGeneration: t.EffectiveGeneration, CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, TemplateConfig: t.Config}
}

// CreateTemplateRequest is the body of POST /v1/agents/{id}/templates.
type CreateTemplateRequest struct {
	domain.TemplateConfig
}

// SaveTemplateRequest is the body of PUT /v1/templates/{id}.
type SaveTemplateRequest struct {
	domain.TemplateConfig
	ApplyMode domain.ApplyMode `json:"apply_mode,omitempty"`
}

func (s *Server) createTemplate(c *gin.Context) error {
	a, err := s.agentParam(c)
	if err != nil {
		return err
	}
	var req CreateTemplateRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	t, err := s.cfg.Store.CreateTemplate(c.Request.Context(), domain.Template{ID: uuid.New(), AgentID: a.ID,
		Config: req.Normalized(), CreatedAt: time.Now()})
	if errors.Is(err, store.ErrConflict) {
		return &Error{Status: http.StatusConflict, Code: CodeConflict, Message: "the agent already has a template with this alias", Cause: err}
	}
	if err != nil {
		return err
	}
	c.JSON(http.StatusCreated, templateBody(t))
	return nil
}

func (s *Server) listTemplates(c *gin.Context) error {
	a, err := s.agentParam(c)
	if err != nil {
		return err
	}
	ts, err := s.cfg.Store.ListTemplates(c.Request.Context(), a.ID)
	if err != nil {
		return err
	}
	out := TemplateList{Items: make([]TemplateBody, len(ts))}
	for i, t := range ts {
		out.Items[i] = templateBody(t)
	}
	c.JSON(http.StatusOK, out)
	return nil
}

func (s *Server) templateParam(c *gin.Context) (domain.Template, error) {
	return lookup(c, "template", s.cfg.Store.GetTemplate)
}

func (s *Server) getTemplate(c *gin.Context) error {
	t, err := s.templateParam(c)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, templateBody(t))
	return nil
}

// saveTemplate writes the edit at a new desired generation. Rooms keep their configuration
// (new_sessions_only); applying to live rooms is the TemplateApply workflow, not built yet.
func (s *Server) saveTemplate(c *gin.Context) error {
	t, err := s.templateParam(c)
	if err != nil {
		return err
	}
	var req SaveTemplateRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.ApplyMode == domain.ApplyAndRestart {
		return domain.Refuse("apply_mode apply_and_restart needs the TemplateApply workflow, which this Jam does not have yet; save with new_sessions_only")
	}
	saved, err := s.cfg.Store.SaveTemplate(c.Request.Context(), t.ID, req.Normalized(), time.Now())
	if errors.Is(err, store.ErrConflict) {
		return &Error{Status: http.StatusConflict, Code: CodeConflict, Message: "the agent already has a template with this alias", Cause: err}
	}
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, templateBody(saved))
	return nil
}
