package api

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
)

// SessionControl is what the API needs of the RoomSession workflows (roomctl.Starter).
type SessionControl interface {
	State(ctx context.Context, session uuid.UUID) (contract.RoomSessionStatus, error)
	Update(ctx context.Context, session uuid.UUID, name string, arg any) (contract.RoomSessionStatus, error)
	Poke(ctx context.Context, b domain.Binding) error
	// Retry tells a session held in a permanent start failure that something changed.
	Retry(ctx context.Context, session uuid.UUID, reason string) error
	// StartUpdate sends an update that an operation follows, returning once it is accepted.
	StartUpdate(ctx context.Context, session uuid.UUID, updateID, name string, arg any) (string, error)
}

// stateTimeout bounds one presence query: a session whose worker does not answer in time is
// reported unknown rather than holding the request.
const stateTimeout = 3 * time.Second

// listStateFanOut bounds the presence queries a session list runs at once.
const listStateFanOut = 16

// maxListStates bounds how many sessions of one list get a presence query (each is a
// workflow task on a worker); the rest report unknown. Narrow the list with agent or room.
const maxListStates = 200

// updateTimeout bounds a session stop or restart (teardown finalization is bounded at 30 s).
const updateTimeout = 90 * time.Second

// SessionBody is a host session: a room's runtime configuration and its generations, and
// what its RoomSession workflow reports about the runtime.
type SessionBody struct {
	RuntimeSessionID uuid.UUID `json:"runtime_session_id"`
	AgentID          uuid.UUID `json:"agent_id"`
	TemplateID       uuid.UUID `json:"template_id"`
	RoomID           uuid.UUID `json:"room_id"`
	Alias            string    `json:"alias"`
	// Presence is unknown when the workflow did not answer (no worker); dormant when a bound
	// room has no workflow yet (its first message starts it).
	Presence domain.Presence     `json:"presence"`
	Phase    domain.SessionPhase `json:"phase,omitempty"`
	Runtime  *RuntimeBody        `json:"runtime,omitempty"`
	// Removed: the room binding is a tombstone (listed only with include_removed).
	Removed             bool                  `json:"removed"`
	DesiredGeneration   int64                 `json:"desired_generation"`
	EffectiveGeneration int64                 `json:"effective_generation"`
	PendingChange       *domain.PendingChange `json:"pending_change"`
	ProviderSessionID   string                `json:"provider_session_id,omitempty"`
	// ProviderVersion is the version the session's provider last reported.
	ProviderVersion string `json:"provider_version,omitempty"`
	// Failure says why the runtime cannot start (presence failed) until something changes:
	// a restart, a template save, a node with the missing adapter.
	Failure *domain.RuntimeFailure `json:"failure,omitempty"`
	// Recycles counts the provider watchdog's recycles of the runtime; LastRecycle says
	// which bound the last one crossed and what was measured.
	Recycles    int             `json:"recycles"`
	LastRecycle *domain.Recycle `json:"last_recycle,omitempty"`
	WorkflowID  string          `json:"workflow_id"`
	// WorkflowURL opens the workflow in the Temporal Web UI, when one is configured.
	WorkflowURL string                `json:"workflow_url,omitempty"`
	Config      domain.TemplateConfig `json:"config"`
	CreatedAt   time.Time             `json:"created_at"`
	UpdatedAt   time.Time             `json:"updated_at"`
}

// RuntimeBody is the runtime side of a session as its workflow reports it.
type RuntimeBody struct {
	Node         string     `json:"node,omitempty"`
	Generation   int64      `json:"generation"`
	PID          int        `json:"pid,omitempty"`
	InTurn       bool       `json:"in_turn"`
	Held         bool       `json:"held"`
	Turns        int64      `json:"turns"`
	LastActivity *time.Time `json:"last_activity,omitempty"`
	IdleSecs     int        `json:"idle_secs"`
	LastError    string     `json:"last_error,omitempty"`
	// Warning is the live runtime's readiness warning (presence degraded).
	Warning string `json:"warning,omitempty"`
	// Host and Sandbox name the runtime host (and its sandbox) of a sandboxed session.
	Host    *uuid.UUID `json:"host,omitempty"`
	Sandbox string     `json:"sandbox,omitempty"`
}

// SessionList is the body of GET /v1/sessions.
type SessionList struct {
	Items []SessionBody `json:"items"`
}

// StopSessionRequest is the body of POST /v1/sessions/{id}/stop; the reason defaults to
// "operator" and is checked by the workflow's validator.
type StopSessionRequest struct {
	Reason string `json:"reason"`
}

func (s *Server) sessionBody(h domain.HostSession) SessionBody {
	b := SessionBody{RuntimeSessionID: h.RuntimeSessionID, AgentID: h.AgentID, TemplateID: h.TemplateID,
		RoomID: h.RoomID, Alias: h.Alias, Presence: domain.PresenceUnknown, Removed: h.Removed,
		DesiredGeneration: h.DesiredGeneration, EffectiveGeneration: h.EffectiveGeneration, PendingChange: h.PendingChange,
		ProviderSessionID: h.ProviderSessionID, ProviderVersion: h.ProviderVersion, Failure: h.Failure,
		Recycles: h.Recycles, LastRecycle: h.LastRecycle,
		WorkflowID: contract.RoomSessionID(h.RuntimeSessionID),
		Config:     h.Config, CreatedAt: h.CreatedAt, UpdatedAt: h.UpdatedAt}
	b.WorkflowURL = s.workflowURL(b.WorkflowID)
	return b
}

// workflowURL opens a workflow in the Temporal Web UI; "" when no UI is configured.
func (s *Server) workflowURL(id string) string {
	if s.cfg.TemporalUI == "" {
		return ""
	}
	return s.cfg.TemporalUI + "/namespaces/" + url.PathEscape(s.cfg.Namespace) + "/workflows/" + url.PathEscape(id)
}

// withState fills in what the session's workflow reports; it stays unknown on no answer.
func (s *Server) withState(ctx context.Context, b *SessionBody) {
	if s.cfg.Sessions == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, stateTimeout)
	defer cancel()
	st, err := s.cfg.Sessions.State(ctx, b.RuntimeSessionID)
	if contract.IsNotFound(err) && !b.Removed {
		// A bound room whose workflow never started (a new binding under the lazy
		// lifecycle, roomctl.Starter.RoomBound) or whose start was lost: its first message
		// starts it.
		b.Presence, b.Phase = domain.PresenceDormant, domain.PhaseDormant
		return
	}
	if err != nil {
		if !contract.IsNotFound(err) && ctx.Err() == nil {
			s.log.Debug("session state query", "runtime_session", b.RuntimeSessionID, "error", err)
		}
		return
	}
	s.applyState(b, st)
}

func (s *Server) applyState(b *SessionBody, st contract.RoomSessionStatus) {
	b.Presence, b.Phase = st.Presence, st.Phase
	rb := &RuntimeBody{Node: st.Node, Generation: st.Generation, PID: st.PID, InTurn: st.InTurn, Held: st.Held,
		Turns: st.Turns, IdleSecs: st.IdleSecs, LastError: st.LastError, Warning: st.Warning, Host: st.Host, Sandbox: st.Sandbox}
	if !st.LastActivity.IsZero() {
		t := st.LastActivity.UTC()
		rb.LastActivity = &t
	}
	b.Runtime = rb
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
	var wg sync.WaitGroup
	sem := make(chan struct{}, listStateFanOut)
	for i, h := range sessions {
		out.Items[i] = s.sessionBody(h)
		if i >= maxListStates {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			s.withState(c.Request.Context(), &out.Items[i])
		}()
	}
	wg.Wait()
	c.JSON(http.StatusOK, out)
	return nil
}

func (s *Server) getSession(c *gin.Context) error {
	h, err := lookup(c, "session", s.cfg.Store.GetHostSession)
	if err != nil {
		return err
	}
	b := s.sessionBody(h)
	s.withState(c.Request.Context(), &b)
	c.JSON(http.StatusOK, b)
	return nil
}

// stopSession stops exactly one room's runtime (session scope) and holds it down, its
// messages queued, until a restart. Siblings on the same agent are untouched.
func (s *Server) stopSession(c *gin.Context) error {
	var req StopSessionRequest
	if err := decodeOptionalJSON(c, &req); err != nil {
		return err
	}
	if req.Reason == "" {
		req.Reason = string(domain.StopOperator)
	}
	return s.controlSession(c, contract.UpdateStop, contract.StopRequest{Reason: req.Reason})
}

// restartSession tears exactly one room's runtime down and brings it back live.
func (s *Server) restartSession(c *gin.Context) error {
	return s.controlSession(c, contract.UpdateRestart, contract.RestartRequest{})
}

func (s *Server) controlSession(c *gin.Context, name string, arg any) error {
	h, err := lookup(c, "session", s.cfg.Store.GetHostSession)
	if err != nil {
		return err
	}
	if s.cfg.Sessions == nil {
		return &Error{Status: http.StatusServiceUnavailable, Code: domain.CodeUnavailable, Message: "session control is not available in this process"}
	}
	if h.Removed {
		return &Error{Status: http.StatusConflict, Code: domain.CodeConflict, Message: "the session's room binding was removed; re-add the agent to the room first"}
	}
	if name == contract.UpdateRestart {
		a, err := s.cfg.Store.GetAgent(c.Request.Context(), h.AgentID)
		if err != nil {
			return err
		}
		if a.RunIntent == domain.RunIntentStopped {
			return domain.Refuse("agent %s is stopped; start the agent first", a.Name)
		}
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), updateTimeout)
	defer cancel()
	st, err := s.cfg.Sessions.Update(ctx, h.RuntimeSessionID, name, arg)
	if contract.IsNotFound(err) {
		// A bound session whose workflow is not running (never started, or its start was
		// lost): start it, then ask again.
		if err = s.cfg.Sessions.Poke(ctx, domain.Binding{RuntimeSessionID: h.RuntimeSessionID, AgentID: h.AgentID, RoomID: h.RoomID}); err == nil {
			st, err = s.cfg.Sessions.Update(ctx, h.RuntimeSessionID, name, arg)
		}
	}
	switch {
	case contract.Classified(err):
		return err // the error table answers it (toError)
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
		return &Error{Status: http.StatusGatewayTimeout, Code: domain.CodeTimeout, Message: "the session did not finish in time; it goes on in the background", Cause: err}
	case err != nil:
		return &Error{Status: http.StatusServiceUnavailable, Code: domain.CodeUnavailable, Message: "the session's workflow could not be reached", Cause: err}
	}
	b := s.sessionBody(h)
	s.applyState(&b, st)
	c.JSON(http.StatusOK, b)
	return nil
}
