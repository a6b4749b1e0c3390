package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
)

// AgentBody is an agent as the API shows it.
type AgentBody struct {
	ID        uuid.UUID        `json:"id"`
	Name      string           `json:"name"`
	Kind      domain.AgentKind `json:"kind"`
	Briefing  string           `json:"briefing"`
	RunIntent domain.RunIntent `json:"run_intent"`
	// QuestionTimeoutSecs is how long the agent's questions to humans wait (0:
	// indefinitely); null leaves it to JAM_QUESTION_TIMEOUT_SECS and the setting.
	QuestionTimeoutSecs *int      `json:"question_timeout_secs"`
	CreatedAt           time.Time `json:"created_at"`
	UpdatedAt           time.Time `json:"updated_at"`
	// APIKey is set once, in the response that creates an attached agent.
	APIKey string `json:"api_key,omitempty"`
}

// AgentList is the body of GET /v1/agents.
type AgentList struct {
	Items []AgentBody `json:"items"`
}

func agentBody(a domain.Agent) AgentBody {
	return AgentBody{ID: a.ID, Name: a.Name, Kind: a.Kind, Briefing: a.Briefing, RunIntent: a.RunIntent,
		QuestionTimeoutSecs: a.QuestionTimeoutSecs, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt}
}

// CreateAgentRequest is the body of POST /v1/agents.
type CreateAgentRequest struct {
	Name     string           `json:"name"`
	Kind     domain.AgentKind `json:"kind"`
	Briefing string           `json:"briefing"`
	// Template is an owned agent's first runtime template; by default the embedded default
	// provider (DefaultTemplate), so the agent can join a room at once.
	Template *domain.TemplateConfig `json:"template,omitempty"`
}

// DefaultTemplate is the template an owned agent gets when it is created without one: an
// ACP agent resolved like any executable (jam-testagent beside jam under `jam dev`).
func DefaultTemplate() domain.TemplateConfig {
	return domain.TemplateConfig{Alias: "default", Transport: domain.TransportACP}
}

func (r CreateAgentRequest) Validate() error {
	var v domain.Validations
	if err := domain.ValidateName("name", r.Name, domain.MaxNameLen); err != nil {
		v.AddErr("name", err)
	}
	if r.Kind == "" {
		v.Add("kind", "required: owned or attached")
	}
	if err := validateBriefing(r.Briefing); err != nil {
		v.AddErr("briefing", err)
	}
	if r.Template != nil {
		if r.Kind != domain.AgentOwned {
			v.Add("template", "only owned agents have runtime templates")
		} else if err := r.Template.Validate(); err != nil {
			vs, _ := domain.AsValidations(err)
			for _, fe := range vs {
				v.Add("template."+fe.Field, fe.Detail)
			}
		}
	}
	return v.Err()
}

func validateBriefing(b string) error {
	return domain.ValidateText("briefing", b, domain.MaxBriefingLen)
}

// PatchAgentRequest is the body of PATCH /v1/agents/{id}: the fields it carries are
// changed, the others left as they are.
type PatchAgentRequest struct {
	Briefing *string `json:"briefing,omitempty"`
	// QuestionTimeoutSecs: a number of seconds (0: indefinitely) sets the agent's question
	// deadline, null clears it.
	QuestionTimeoutSecs NullableInt `json:"question_timeout_secs,omitzero"`
}

func (r PatchAgentRequest) Validate() error {
	var v domain.Validations
	if r.Briefing == nil && !r.QuestionTimeoutSecs.Set {
		v.Add("briefing", "briefing or question_timeout_secs is required")
	}
	if r.Briefing != nil {
		if err := validateBriefing(*r.Briefing); err != nil {
			v.AddErr("briefing", err)
		}
	}
	if s := r.QuestionTimeoutSecs.Value; s != nil && (*s < 0 || *s > domain.MaxQuestionTimeoutSecs) {
		v.Add("question_timeout_secs", "must be between 0 and "+strconv.Itoa(domain.MaxQuestionTimeoutSecs)+", or null")
	}
	return v.Err()
}

// NullableInt is a PATCH field that may be left out (Set false: unchanged), null (Set,
// Value nil: cleared) or an integer.
type NullableInt struct {
	Set   bool
	Value *int
}

// IsZero lets omitzero leave out a field that is not set.
func (n NullableInt) IsZero() bool { return !n.Set }

func (n NullableInt) MarshalJSON() ([]byte, error) {
	if n.Value == nil {
		return []byte("null"), nil
	}
	return json.Marshal(*n.Value)
}

func (n *NullableInt) UnmarshalJSON(b []byte) error {
	n.Set, n.Value = true, nil
	if string(b) == "null" {
		return nil
	}
	var v int
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	n.Value = &v
	return nil
}

// uuidParam parses a path parameter that must be a UUID.
func uuidParam(c *gin.Context, name string) (uuid.UUID, error) {
	return domain.ParseID(name, c.Param(name))
}

// lookup loads the record the :id path parameter names: 400 for a malformed id, 404 (naming
// what) when there is no such record.
func lookup[T any](c *gin.Context, what string, get func(context.Context, uuid.UUID) (T, error)) (T, error) {
	var zero T
	id, err := uuidParam(c, "id")
	if err != nil {
		return zero, err
	}
	v, err := get(c.Request.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return zero, notFound(what, err)
	}
	return v, err
}

func (s *Server) agentParam(c *gin.Context) (domain.Agent, error) {
	return lookup(c, "agent", s.cfg.Store.GetAgent)
}

// createAgent never changes an existing identity: a taken name is 409, except that asking
// again for an owned agent as it was created (kind and briefing, and the first template
// when one is given) answers 200 with it, so a script run twice gets the same agent.
func (s *Server) createAgent(c *gin.Context) error {
	var req CreateAgentRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	var key, hash string
	if req.Kind == domain.AgentAttached {
		var err error
		if key, hash, err = domain.NewAgentKey(); err != nil {
			return err
		}
	}
	if req.Kind == domain.AgentOwned && req.Template != nil {
		if err := s.requireRunnable(c.Request.Context(), *req.Template); err != nil {
			return err
		}
	}
	agent := domain.Agent{ID: uuid.New(), Name: req.Name, Kind: req.Kind, Briefing: req.Briefing, CreatedAt: time.Now()}
	var a domain.Agent
	var err error
	cfg := DefaultTemplate()
	if req.Template != nil {
		cfg = *req.Template
	}
	if req.Kind == domain.AgentOwned {
		// An owned agent is created with its parked template, as the reference's are: it
		// runs nothing until it joins a room, and then needs no further step. Both or neither.
		a, _, err = s.cfg.Store.CreateOwnedAgent(c.Request.Context(), agent,
			domain.Template{ID: uuid.New(), Config: cfg.Normalized(), CreatedAt: agent.CreatedAt})
	} else {
		a, err = s.cfg.Store.CreateAgent(c.Request.Context(), agent, hash)
	}
	if errors.Is(err, store.ErrConflict) {
		if same, ok := s.sameOwnedAgent(c.Request.Context(), req, cfg.Normalized()); ok {
			c.JSON(http.StatusOK, agentBody(same))
			return nil
		}
		msg := "an agent with this name already exists"
		if req.Kind == domain.AgentAttached {
			msg += "; an attached agent's key is shown only when it is created (jam agent list shows its id)"
		} else {
			msg += " with another kind, briefing or first template; create it under another name, or change its template (jam template save)"
		}
		return &Error{Status: http.StatusConflict, Code: domain.CodeConflict, Message: msg, Cause: err}
	}
	if err != nil {
		return err
	}
	body := agentBody(a)
	body.APIKey = key
	c.JSON(http.StatusCreated, body)
	return nil
}

// sameOwnedAgent is the existing owned agent named as req names one when it was created
// as req asks: same briefing and, when req gives a template, a first template equal to cfg.
func (s *Server) sameOwnedAgent(ctx context.Context, req CreateAgentRequest, cfg domain.TemplateConfig) (domain.Agent, bool) {
	if req.Kind != domain.AgentOwned {
		return domain.Agent{}, false
	}
	a, err := s.cfg.Store.AgentByName(ctx, req.Name)
	if err != nil || a.Kind != domain.AgentOwned || a.Briefing != req.Briefing {
		return domain.Agent{}, false
	}
	if req.Template == nil {
		// No template asked for: the agent by that name is the one meant, whatever its
		// templates became since (the README's sections edit the demo's).
		return a, true
	}
	ts, err := s.cfg.Store.ListTemplates(ctx, a.ID)
	if err != nil || len(ts) == 0 {
		return domain.Agent{}, false
	}
	// Compared as the wire shows them: an empty list and none are the same template.
	had, err1 := json.Marshal(ts[0].Config.Normalized())
	want, err2 := json.Marshal(cfg.Normalized())
	return a, err1 == nil && err2 == nil && string(had) == string(want)
}

func (s *Server) listAgents(c *gin.Context) error {
	agents, err := s.cfg.Store.ListAgents(c.Request.Context())
	if err != nil {
		return err
	}
	out := AgentList{Items: make([]AgentBody, len(agents))}
	for i, a := range agents {
		out.Items[i] = agentBody(a)
	}
	c.JSON(http.StatusOK, out)
	return nil
}

func (s *Server) getAgent(c *gin.Context) error {
	a, err := s.agentParam(c)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, agentBody(a))
	return nil
}

func (s *Server) patchAgent(c *gin.Context) error {
	a, err := s.agentParam(c)
	if err != nil {
		return err
	}
	var req PatchAgentRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	a, err = s.cfg.Store.UpdateAgent(c.Request.Context(), a.ID, store.AgentUpdate{Briefing: req.Briefing,
		SetQuestionTimeout: req.QuestionTimeoutSecs.Set, QuestionTimeoutSecs: req.QuestionTimeoutSecs.Value}, time.Now())
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, agentBody(a))
	return nil
}

// deleteAgent stops the agent's runtimes first, then removes its records.
func (s *Server) deleteAgent(c *gin.Context) error {
	a, err := s.agentParam(c)
	if err != nil {
		return err
	}
	if err := s.cfg.Lifecycle.AgentDeleting(c.Request.Context(), a.ID); err != nil {
		return &Error{Status: http.StatusServiceUnavailable, Code: domain.CodeUnavailable,
			Message: "the agent's runtimes could not be stopped; nothing was deleted", Cause: err}
	}
	if err := s.cfg.Store.DeleteAgent(c.Request.Context(), a.ID, time.Now()); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return &Error{Status: http.StatusConflict, Code: domain.CodeConflict,
				Message: "the agent's runtime hosts still hold records; clean them up first", Cause: err}
		}
		return err
	}
	c.Status(http.StatusNoContent)
	return nil
}

// runIntent persists the intent first, then tells the lifecycle: a kept stop survives a
// restart of Jam because the record, not a process, says so. An attached agent has no
// runtime: stopped, its key is refused (agent_stopped) and a waiting receive ends, while its
// inbound queue keeps what is posted until it is started.
func (s *Server) runIntent(intent domain.RunIntent, restart bool) func(c *gin.Context) error {
	return func(c *gin.Context) error {
		a, err := s.agentParam(c)
		if err != nil {
			return err
		}
		if restart && a.Kind != domain.AgentOwned {
			return domain.Refuse("%s is attached and has no runtime to restart; stop and start it instead", a.Name)
		}
		if a, err = s.cfg.Store.SetAgentRunIntent(c.Request.Context(), a.ID, intent, time.Now()); err != nil {
			return err
		}
		if a.Kind != domain.AgentOwned {
			c.JSON(http.StatusOK, agentBody(a))
			return nil
		}
		if err := s.cfg.Lifecycle.AgentRunIntent(c.Request.Context(), a.ID, intent, restart); err != nil {
			return &Error{Status: http.StatusServiceUnavailable, Code: domain.CodeUnavailable,
				Message: "the intent is saved but the runtimes could not be reached; it will be retried", Cause: err}
		}
		c.JSON(http.StatusOK, agentBody(a))
		return nil
	}
}
