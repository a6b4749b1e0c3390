package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
)

// QuestionBody is a runtime's question to a human of its room. Answer and AnsweredBy are
// null until it is answered; AnsweredAt is when it left pending, whichever way.
type QuestionBody struct {
	ID               uuid.UUID            `json:"id"`
	RoomID           uuid.UUID            `json:"room_id"`
	AgentID          uuid.UUID            `json:"agent_id"`
	RuntimeSessionID uuid.UUID            `json:"runtime_session_id"`
	Recipient        string               `json:"recipient"`
	Text             string               `json:"text"`
	Code             string               `json:"code"`
	State            domain.QuestionState `json:"state"`
	Answer           *string              `json:"answer"`
	AnsweredBy       *string              `json:"answered_by"`
	MessageID        *uuid.UUID           `json:"message_id"`
	AnswerMessageID  *uuid.UUID           `json:"answer_message_id"`
	CreatedAt        time.Time            `json:"created_at"`
	DeadlineAt       *time.Time           `json:"deadline_at"`
	AnsweredAt       *time.Time           `json:"answered_at"`
	DeliveredAt      *time.Time           `json:"delivered_at"`
	// DeferredAt: the asking tool call returned before an answer came (its client would not
	// wait longer); the answer reaches the agent as the room message that gives it.
	DeferredAt *time.Time `json:"deferred_at"`
}

// QuestionList is the body of GET /v1/questions, newest first.
type QuestionList struct {
	Items []QuestionBody `json:"items"`
}

func questionBody(q domain.Question) QuestionBody {
	b := QuestionBody{ID: q.ID, RoomID: q.RoomID, AgentID: q.AgentID, RuntimeSessionID: q.RuntimeSession,
		Recipient: q.Recipient, Text: q.Text, Code: q.Code, State: q.State, MessageID: q.MessageID,
		AnswerMessageID: q.AnswerMessageID, CreatedAt: q.CreatedAt, DeadlineAt: q.Deadline, AnsweredAt: q.AnsweredAt,
		DeliveredAt: q.DeliveredAt, DeferredAt: q.DeferredAt}
	if q.State == domain.QuestionAnswered {
		answer, by := q.Answer, q.AnsweredBy
		b.Answer, b.AnsweredBy = &answer, &by
	}
	return b
}

// AnswerQuestionRequest is the body of POST /v1/questions/{id}/answer.
type AnswerQuestionRequest struct {
	Text string `json:"text"`
}

// Question listing bounds.
const (
	defaultQuestionPage = store.DefaultQuestionLimit
	maxQuestionPage     = 500
)

// expireOverdue closes the questions whose deadline passed while nobody waited, so a
// listing or an answer sees them as they are.
func (s *Server) expireOverdue(ctx context.Context) error {
	_, err := s.cfg.Store.ExpireOverdue(ctx, time.Now())
	return err
}

func (s *Server) listQuestions(c *gin.Context) error {
	var f store.QuestionFilter
	if err := listQuery(c, domain.QuestionStates, &f.State, []idFilter{{"room", &f.Room}, {"agent", &f.Agent}}, &f.Limit, defaultQuestionPage, maxQuestionPage); err != nil {
		return err
	}
	if err := s.expireOverdue(c.Request.Context()); err != nil {
		return err
	}
	qs, err := s.cfg.Store.ListQuestions(c.Request.Context(), f)
	if err != nil {
		return err
	}
	out := QuestionList{Items: make([]QuestionBody, len(qs))}
	for i, q := range qs {
		out.Items[i] = questionBody(q)
	}
	c.JSON(http.StatusOK, out)
	return nil
}

func (s *Server) getQuestion(c *gin.Context) error {
	q, err := lookup(c, "question", s.cfg.Store.GetQuestion)
	if err != nil {
		return err
	}
	if q.State == domain.QuestionPending && q.Deadline != nil && !time.Now().Before(*q.Deadline) {
		if err := s.expireOverdue(c.Request.Context()); err != nil {
			return err
		}
		if q, err = s.cfg.Store.GetQuestion(c.Request.Context(), q.ID); err != nil {
			return err
		}
	}
	c.JSON(http.StatusOK, questionBody(q))
	return nil
}

// answerQuestion answers a pending question for the runtime waiting on it. Repeating the
// same answer returns the question; another answer once it left pending (answered
// otherwise, expired or cancelled) is 409.
func (s *Server) answerQuestion(c *gin.Context) error {
	q, err := lookup(c, "question", s.cfg.Store.GetQuestion)
	if err != nil {
		return err
	}
	var req AnswerQuestionRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if err := validateAnswerText(req.Text); err != nil {
		return err
	}
	// An overdue question is expired by the answer itself, and refused. A deferred one is
	// answered by a room message that wakes the asking agent.
	q, err = s.cfg.Band.AnswerQuestion(c.Request.Context(), q.ID, req.Text, OperatorDecider)
	if errors.Is(err, store.ErrQuestionSettled) {
		msg := "the question is " + string(q.State) + " and can no longer be answered"
		if q.State == domain.QuestionAnswered {
			msg = "the question was already answered differently"
		}
		return &Error{Status: http.StatusConflict, Code: domain.CodeConflict, Message: msg, Cause: err}
	}
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, questionBody(q))
	return nil
}

// validateAnswerText refuses an empty or oversized answer as unprocessable (422), with the
// field problem, before anything is written.
func validateAnswerText(text string) error {
	err := domain.ValidateMessageText(text)
	if err == nil && len(text) > domain.MaxAnswerText {
		err = &domain.ValidationError{Field: "text", Detail: "at most " + strconv.Itoa(domain.MaxAnswerText) + " bytes"}
	}
	if err == nil {
		return nil
	}
	e := validationError(domain.Validations{{Field: "text", Detail: validationDetail(err)}})
	e.Status, e.Message, e.Cause = http.StatusUnprocessableEntity, "the answer cannot be used", err
	return e
}

func validationDetail(err error) string {
	var ve *domain.ValidationError
	if errors.As(err, &ve) {
		return ve.Detail
	}
	return err.Error()
}
