package api

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// SessionContinuityBody is the body of GET /v1/sessions/{id}/continuity: what Jam knows of
// whether a host-native session's provider thread can be resumed, and the evidence an
// operator confirms to start it fresh.
type SessionContinuityBody struct {
	RuntimeSession    uuid.UUID           `json:"runtime_session"`
	ProviderSessionID string              `json:"provider_session_id,omitempty"`
	ResumePolicy      domain.ResumePolicy `json:"resume_policy"`
	// Failure is the start failure the session holds in (absent when none).
	Failure *domain.RuntimeFailure `json:"failure,omitempty"`
	// CanStartFresh: the session fails closed because its thread cannot be resumed exactly;
	// POST /v1/sessions/{id}/start-fresh with the evidence checksum starts it on a new one.
	CanStartFresh    bool   `json:"can_start_fresh"`
	EvidenceChecksum string `json:"evidence_checksum"`
	// StartFresh is the CLI command that does it (when offered).
	StartFresh string `json:"start_fresh,omitempty"`
}

// sessionEvidence reads the path's session and its continuity evidence. A sandboxed
// session's continuity is its runtime host's: refused here.
func (s *Server) sessionEvidence(c *gin.Context) (domain.HostSession, domain.SessionContinuity, error) {
	hs, err := lookup(c, "session", s.cfg.Store.GetHostSession)
	if err != nil {
		return hs, domain.SessionContinuity{}, err
	}
	if hs.Config.Sandbox.Enabled {
		return hs, domain.SessionContinuity{}, sandboxedContinuity(hs.RuntimeSessionID)
	}
	return hs, domain.SessionEvidence(hs.RuntimeSessionID, hs.ProviderSessionID, hs.Config.ResumePolicy, hs.Failure), nil
}

// sessionContinuity reports a host-native session's continuity evidence. A sandboxed
// session's continuity is its runtime host's (its checkpoints; GET /v1/hosts/{id}/continuity).
func (s *Server) sessionContinuity(c *gin.Context) error {
	hs, ev, err := s.sessionEvidence(c)
	if err != nil {
		return err
	}
	b := SessionContinuityBody{RuntimeSession: ev.RuntimeSession, ProviderSessionID: ev.ProviderSessionID,
		ResumePolicy: ev.ResumePolicy, Failure: ev.Failure, CanStartFresh: ev.CanStartFresh, EvidenceChecksum: ev.EvidenceChecksum}
	if b.CanStartFresh {
		b.StartFresh = "jam session start-fresh " + hs.RuntimeSessionID.String() + " --checksum " + ev.EvidenceChecksum + " --confirm"
	}
	c.JSON(http.StatusOK, b)
	return nil
}

// sandboxedContinuity refuses a session-scope continuity request of a sandboxed session.
func sandboxedContinuity(session uuid.UUID) error {
	return &Error{Status: http.StatusConflict, Code: domain.CodeConflict,
		Message: "session " + session.String() + " is sandboxed: its continuity is its runtime host's (jam host continuity HOST)"}
}

// SessionStartFreshRequest is the body of POST /v1/sessions/{id}/start-fresh.
type SessionStartFreshRequest struct {
	// ConfirmStartFresh acknowledges that the session's provider thread is abandoned (kept by
	// the provider, never resumed) for a new one.
	ConfirmStartFresh bool `json:"confirm_start_fresh"`
	// EvidenceChecksum is the checksum of GET /v1/sessions/{id}/continuity the operator read.
	EvidenceChecksum string `json:"evidence_checksum"`
}

// startSessionFresh starts a host-native session held failed for want of an exact resume on a
// new provider thread, bound to the evidence the operator confirmed: an operation carried by
// the session's workflow (its startFresh update).
func (s *Server) startSessionFresh(c *gin.Context) error {
	var req SessionStartFreshRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	var v domain.Validations
	if !req.ConfirmStartFresh {
		v.Add("confirm_start_fresh", "must be true: the session's provider thread is abandoned for a new one")
	}
	if req.EvidenceChecksum == "" {
		v.Add("evidence_checksum", "required: the evidence_checksum of GET /v1/sessions/{id}/continuity")
	}
	if len(v) > 0 {
		return validationError(v)
	}
	hs, ev, err := s.sessionEvidence(c)
	if err != nil {
		return err
	}
	switch {
	case ev.EvidenceChecksum != req.EvidenceChecksum:
		return contract.Fail("the session's continuity evidence changed since it was inspected; inspect again", domain.ErrTypeEvidenceChanged, nil)
	case !ev.CanStartFresh:
		return contract.Fail("the session does not fail for want of an exact resume", domain.ErrTypeNotResettable, nil)
	case s.cfg.Sessions == nil:
		return &Error{Status: http.StatusServiceUnavailable, Code: domain.CodeUnavailable, Message: "session control is not available in this process"}
	}
	op := domain.Operation{Kind: domain.OpKindStartFresh, TargetKind: domain.TargetSession, TargetID: hs.RuntimeSessionID.String(),
		WorkflowID: contract.RoomSessionID(hs.RuntimeSessionID), UpdateID: updateOperation}
	return s.startOperation(c, op, func(ctx context.Context, op *domain.Operation) (err error) {
		op.RunID, err = s.cfg.Sessions.StartUpdate(ctx, hs.RuntimeSessionID, op.UpdateID, contract.UpdateStartFresh,
			contract.StartFreshRequest{EvidenceChecksum: req.EvidenceChecksum})
		return err
	})
}
