package api

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/workflows"
)

// SessionBody is a host session: a room's runtime configuration and its generations.
type SessionBody struct {
	RuntimeSessionID uuid.UUID `json:"runtime_session_id"`
	AgentID          uuid.UUID `json:"agent_id"`
	TemplateID       uuid.UUID `json:"template_id"`
	RoomID           uuid.UUID `json:"room_id"`
	Alias            string    `json:"alias"`
	// Presence stays unknown until the RoomSession workflows track runtimes: the API does not
	// claim a runtime is live or dormant without something that knows.
	Presence            domain.Presence       `json:"presence"`
	DesiredGeneration   int64                 `json:"desired_generation"`
	EffectiveGeneration int64                 `json:"effective_generation"`
	PendingChange       *domain.PendingChange `json:"pending_change"`
	ProviderSessionID   string                `json:"provider_session_id,omitempty"`
	WorkflowID          string                `json:"workflow_id"`
	Config              domain.TemplateConfig `json:"config"`
	CreatedAt           time.Time             `json:"created_at"`
	UpdatedAt           time.Time             `json:"updated_at"`
}

// SessionList is the body of GET /v1/sessions.
type SessionList struct {
	Items []SessionBody `json:"items"`
}

func sessionBody(h domain.HostSession) SessionBody {
	return SessionBody{RuntimeSessionID: h.RuntimeSessionID, AgentID: h.AgentID, TemplateID: h.TemplateID,
		RoomID: h.RoomID, Alias: h.Alias, Presence: domain.PresenceUnknown, DesiredGeneration: h.DesiredGeneration,
		EffectiveGeneration: h.EffectiveGeneration, PendingChange: h.PendingChange, ProviderSessionID: h.ProviderSessionID,
		WorkflowID: workflows.RoomSessionID(h.RuntimeSessionID), Config: h.Config, CreatedAt: h.CreatedAt, UpdatedAt: h.UpdatedAt}
}

func (s *Server) listSessions(c *gin.Context) error {
	var (
		f store.SessionFilter
		v domain.Validations
	)
	for name, dst := range map[string]**uuid.UUID{"agent": &f.Agent, "room": &f.Room} {
		if raw := c.Query(name); raw != "" {
			id, err := domain.ParseID(name, raw)
			if err != nil {
				v.AddErr(name, err)
				continue
			}
			*dst = &id
		}
	}
	if err := v.Err(); err != nil {
		return err
	}
	sessions, err := s.cfg.Store.ListHostSessions(c.Request.Context(), f)
	if err != nil {
		return err
	}
	out := SessionList{Items: make([]SessionBody, len(sessions))}
	for i, h := range sessions {
		out.Items[i] = sessionBody(h)
	}
	c.JSON(http.StatusOK, out)
	return nil
}

func (s *Server) getSession(c *gin.Context) error {
	h, err := lookup(c, "session", s.cfg.Store.GetHostSession)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, sessionBody(h))
	return nil
}
