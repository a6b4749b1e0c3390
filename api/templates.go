package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/contract"
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
	if err := s.requireRunnable(c.Request.Context(), req.TemplateConfig); err != nil {
		return err
	}
	t, err := s.cfg.Store.CreateTemplate(c.Request.Context(), domain.Template{ID: uuid.New(), AgentID: a.ID,
		Config: req.Normalized(), CreatedAt: time.Now()})
	if errors.Is(err, store.ErrConflict) {
		return &Error{Status: http.StatusConflict, Code: domain.CodeConflict, Message: "the agent already has a template with this alias", Cause: err}
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

// TemplateApplyOperation is the TemplateApply workflow a save with apply_and_restart
// started.
type TemplateApplyOperation struct {
	// ID is the apply's operation: GET /v1/operations/{id} follows it.
	ID          uuid.UUID `json:"id"`
	WorkflowID  string    `json:"workflow_id"`
	WorkflowURL string    `json:"workflow_url,omitempty"`
	Generation  int64     `json:"generation"`
}

// TemplateSaveBody answers PUT /v1/templates/{id}: the saved template and, with
// apply_and_restart (202), the operation applying it.
type TemplateSaveBody struct {
	TemplateBody
	Operation *TemplateApplyOperation `json:"operation,omitempty"`
}

// saveTemplate writes the edit at a new desired generation. With new_sessions_only (the
// default) rooms keep their configuration and rooms joined later use the save. With
// apply_and_restart every room made from the template is marked with a requested change in
// the same transaction, and the TemplateApply workflow applies it (202): a dormant room
// takes it at once, a live one at its turn boundary, effective only once its runtime
// accepted it.
func (s *Server) saveTemplate(c *gin.Context) error {
	t, err := s.templateParam(c)
	if err != nil {
		return err
	}
	var req SaveTemplateRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.ApplyMode != "" && !domain.ApplyModes.Has(req.ApplyMode) {
		return validationError(domain.Validations{{Field: "apply_mode", Detail: "want one of " + strings.Join(domain.ApplyModes.Strings(), ", ")}})
	}
	ctx := c.Request.Context()
	if err := s.requireRunnable(ctx, req.TemplateConfig); err != nil {
		return err
	}
	var saved domain.Template
	if req.ApplyMode == domain.ApplyAndRestart {
		saved, err = s.cfg.Store.SaveTemplateAndRequestApply(ctx, t.ID, req.Normalized(), time.Now())
	} else {
		saved, err = s.cfg.Store.SaveTemplate(ctx, t.ID, req.Normalized(), time.Now())
	}
	if errors.Is(err, store.ErrConflict) {
		return &Error{Status: http.StatusConflict, Code: domain.CodeConflict, Message: "the agent already has a template with this alias", Cause: err}
	}
	if err != nil {
		return err
	}
	body := TemplateSaveBody{TemplateBody: templateBody(saved)}
	if req.ApplyMode != domain.ApplyAndRestart {
		// Applying tells every room itself; a save for new sessions only tells the rooms
		// that cannot start to try again.
		s.retryFailed(ctx, saved)
		c.JSON(http.StatusOK, body)
		return nil
	}
	id := contract.TemplateApplyID(saved.ID, saved.DesiredGeneration)
	op := domain.Operation{ID: uuid.New(), Kind: domain.OpKindTemplateApply, TargetKind: domain.TargetTemplate,
		TargetID: saved.ID.String(), WorkflowID: id, Status: domain.OperationRunning, CreatedAt: time.Now().UTC()}
	if err := s.cfg.Store.CreateOperation(ctx, op); err != nil {
		return err
	}
	run, err := contract.Start(ctx, s.cfg.Temporal, contract.TypeTemplateApply, id,
		contract.TemplateApplyInput{Template: saved.ID, Generation: saved.DesiredGeneration})
	if err != nil {
		// The save and its requested changes are durable; saving again (a newer generation,
		// which supersedes this one) applies it.
		return &Error{Status: http.StatusServiceUnavailable, Code: domain.CodeUnavailable,
			Message: "the template was saved but its apply could not be started (the workflow service is unavailable); save it again to apply", Cause: err}
	}
	if err := s.cfg.Store.SetOperationRun(ctx, op.ID, run.GetRunID()); err != nil {
		return err
	}
	c.Header("Location", "/v1/operations/"+op.ID.String())
	body.Operation = &TemplateApplyOperation{ID: op.ID, WorkflowID: id, WorkflowURL: s.workflowURL(id), Generation: saved.DesiredGeneration}
	c.JSON(http.StatusAccepted, body)
	return nil
}

// requireRunnable refuses a template no live node can run. A Docker environment
// configuration source is refused outright: creating a sandbox through `sbx env create` with
// the operator's files (a supervised PTY child, rollback of Jam's overlay) is not built, and
// running a plain `sbx create` instead would silently ignore the operator's files. With
// nodes live and none of them having an adapter for its transport, every room made from it
// would fail; with no live node nothing can be judged, and the save stands. Otherwise the live
// nodes that run it are asked at once, bounded (checkTemplateOn): the save is refused when
// every node that answered lacks a variable its env_allowlist names or, host-native, its
// command.
func (s *Server) requireRunnable(ctx context.Context, cfg domain.TemplateConfig) error {
	if cfg.Sandbox.Enabled && cfg.Sandbox.ConfigurationSource == domain.ConfigDockerEnvironment {
		return &Error{Status: http.StatusUnprocessableEntity, Code: domain.CodePrecondition,
			Message: "configuration_source docker_environment is not supported yet: Jam would not apply the environment files; use jam_managed"}
	}
	row, ok := domain.LookupTransport(cfg.Transport)
	if !ok || !row.Owned {
		return nil // the validator refuses it
	}
	nodes, err := s.cfg.Store.ListNodes(ctx)
	if err != nil {
		return err
	}
	now, err := s.cfg.Store.Now(ctx)
	if err != nil {
		return err
	}
	runners, live := liveRunners(nodes, now, row.Provider)
	switch {
	case !live:
		return nil
	case len(runners) == 0:
		return &Error{Status: http.StatusUnprocessableEntity, Code: domain.CodePrecondition,
			Message: fmt.Sprintf("no live node has a runtime adapter for %s (transport %s); its rooms could never start", row.Label, cfg.Transport)}
	}
	return s.checkTemplateOn(ctx, cfg, row, runners)
}

// retryFailed tells the template's rooms that cannot start that it changed, so each tries
// once more. Best effort: an operator's restart does the same.
func (s *Server) retryFailed(ctx context.Context, t domain.Template) {
	if s.cfg.Sessions == nil {
		return
	}
	sessions, err := s.cfg.Store.ListHostSessions(ctx, store.SessionFilter{Agent: &t.AgentID})
	if err != nil {
		s.log.Warn("list sessions to retry after a template save", "template", t.ID, "error", err)
		return
	}
	for _, hs := range sessions {
		if hs.TemplateID != t.ID || hs.Failure == nil {
			continue
		}
		if err := s.cfg.Sessions.Retry(ctx, hs.RuntimeSessionID, "template saved"); err != nil {
			s.log.Warn("retry a failed session after a template save", "runtime_session", hs.RuntimeSessionID, "error", err)
		}
	}
}
