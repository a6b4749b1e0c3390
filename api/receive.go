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

// Long-poll bounds of POST /v1/agents/{id}/receive.
const (
	defaultReceiveWait = 30
	maxReceiveWait     = 55
)

// ReceiveRequest is the body of POST /v1/agents/{id}/receive.
type ReceiveRequest struct {
	// LeaseID resumes a lease; omitted, a new lease is made and returned.
	LeaseID     *string `json:"lease_id"`
	WaitSeconds *int    `json:"wait_seconds"`
}

func (r ReceiveRequest) Validate() error {
	var v domain.Validations
	if r.LeaseID != nil {
		if _, err := domain.ParseID("lease_id", *r.LeaseID); err != nil {
			v.AddErr("lease_id", err)
		}
	}
	if r.WaitSeconds != nil && (*r.WaitSeconds < 0 || *r.WaitSeconds > maxReceiveWait) {
		v.Add("wait_seconds", "must be between 0 and 55")
	}
	return v.Err()
}

// ReceiveBody answers a receive: the lease to re-arm with, and a message or null.
type ReceiveBody struct {
	LeaseID uuid.UUID    `json:"lease_id"`
	Message *MessageBody `json:"message"`
	// AckRequiredMessageID is set when Message was delivered on this lease before and is
	// still unsettled: reply to it or ack it before anything else arrives.
	AckRequiredMessageID *uuid.UUID `json:"ack_required_message_id,omitempty"`
	DeliveryCount        int        `json:"delivery_count,omitempty"`
}

// ReplyRequest is the body of POST /v1/messages/{id}/reply.
type ReplyRequest struct {
	Text string `json:"text"`
}

func (r ReplyRequest) Validate() error { return domain.ValidateMessageText(r.Text) }

// SettleBody answers a reply or an ack.
type SettleBody struct {
	MessageID  uuid.UUID         `json:"message_id"`
	Settlement domain.Settlement `json:"settlement"`
	Reply      *MessageBody      `json:"reply,omitempty"`
}

// receive is an attached agent's long poll, held open up to 55 s on a lease that admits one
// waiter at a time.
func (s *Server) receive(c *gin.Context) error {
	me, err := agentPrincipal(c)
	if err != nil {
		return err
	}
	id, err := uuidParam(c, "id")
	if err != nil {
		return err
	}
	if id != me.ID {
		return &Error{Status: http.StatusForbidden, Code: domain.CodeForbidden, Message: "an agent receives only its own messages"}
	}
	var req ReceiveRequest
	if c.Request.ContentLength != 0 {
		if err := decodeJSON(c, &req); err != nil {
			return err
		}
	}
	lease := uuid.New()
	if req.LeaseID != nil {
		lease, _ = domain.ParseID("lease_id", *req.LeaseID)
	}
	wait := defaultReceiveWait
	if req.WaitSeconds != nil {
		wait = *req.WaitSeconds
	}
	claim, err := s.cfg.Band.Receive(c.Request.Context(), me.ID, lease, time.Duration(wait)*time.Second)
	switch {
	case errors.Is(err, store.ErrLeaseBusy):
		return &Error{Status: http.StatusConflict, Code: domain.CodeConflict, Message: "another receive is already waiting on this lease", Cause: err}
	case errors.Is(err, store.ErrNotFound):
		return notFound("lease", err)
	case err != nil:
		return err
	}
	body := ReceiveBody{LeaseID: lease}
	if claim != nil {
		mb, err := s.authorNames(me).body(c.Request.Context(), claim.Message)
		if err != nil {
			return err
		}
		body.Message, body.DeliveryCount = &mb, claim.Inbound.DeliveryCount
		if claim.AckRequired {
			body.AckRequiredMessageID = &claim.Message.ID
		}
	}
	c.JSON(http.StatusOK, body)
	return nil
}

func (s *Server) reply(c *gin.Context) error {
	var req ReplyRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	return s.settle(c, domain.SettledReply, req.Text)
}

func (s *Server) ack(c *gin.Context) error { return s.settle(c, domain.SettledAck, "") }

// settle lets an agent settle only messages in its own queue: another agent's message is 403,
// a message that does not exist 404, a second different settlement 409.
func (s *Server) settle(c *gin.Context, how domain.Settlement, text string) error {
	me, err := agentPrincipal(c)
	if err != nil {
		return err
	}
	msg, err := uuidParam(c, "id")
	if err != nil {
		return err
	}
	_, reply, err := s.cfg.Band.Settle(c.Request.Context(), me.ID, msg, how, text)
	switch {
	case errors.Is(err, store.ErrSettledOtherwise):
		return &Error{Status: http.StatusConflict, Code: domain.CodeConflict, Message: "the message is already settled differently", Cause: err}
	case errors.Is(err, store.ErrNotFound):
		if _, getErr := s.cfg.Store.GetMessage(c.Request.Context(), msg); getErr == nil {
			return &Error{Status: http.StatusForbidden, Code: domain.CodeForbidden, Message: "the message is not in this agent's queue", Cause: err}
		}
		return notFound("message", err)
	case err != nil:
		return err
	}
	body := SettleBody{MessageID: msg, Settlement: how}
	if reply != nil {
		rb, err := s.authorNames(me).body(c.Request.Context(), *reply)
		if err != nil {
			return err
		}
		body.Reply = &rb
	}
	c.JSON(http.StatusOK, body)
	return nil
}
