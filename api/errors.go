package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
)

// statusClientClosed is the (nginx) status for a request whose client went away; it is
// logged, never sent, since nobody is listening.
const statusClientClosed = 499

// FieldError is one entry of "validations".
type FieldError struct {
	Field  string `json:"field"`
	Detail string `json:"detail"`
}

// ErrorBody is the one JSON shape every error response has.
type ErrorBody struct {
	Code        string       `json:"code"`
	Message     string       `json:"message"`
	Validations []FieldError `json:"validations,omitempty"`
	RequestID   string       `json:"request_id,omitempty"`
}

// Error is an error a handler returns with its HTTP status and public message. Cause is
// logged with the request id and never sent.
type Error struct {
	Status      int
	Code        string
	Message     string
	Validations []FieldError
	Cause       error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return e.Message + ": " + e.Cause.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

func notFound(what string, cause error) *Error {
	return &Error{Status: http.StatusNotFound, Code: domain.CodeNotFound, Message: what + " not found", Cause: cause}
}

func agentStopped(cause error) *Error {
	return &Error{Status: http.StatusForbidden, Code: domain.CodeAgentStopped,
		Message: "this agent is stopped; its key is refused until an operator starts it (jam agent start)", Cause: cause}
}

func validationError(vs domain.Validations) *Error {
	out := make([]FieldError, len(vs))
	for i, v := range vs {
		out[i] = FieldError{Field: v.Field, Detail: v.Detail}
	}
	return &Error{Status: http.StatusBadRequest, Code: domain.CodeValidation, Message: "the request is invalid", Validations: out}
}

// toError maps any handler error to its public form; unknown errors become a 500 whose
// text never leaves the server.
func toError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if vs, ok := domain.AsValidations(err); ok {
		ve := validationError(vs)
		ve.Cause = err
		return ve
	}
	if cls, msg, ok := contract.Classify(err); ok {
		return &Error{Status: cls.Status, Code: cls.Code, Message: cls.PublicMessage(msg), Cause: err}
	}
	switch {
	case errors.Is(err, domain.ErrAgentStopped):
		return agentStopped(err)
	case errors.Is(err, domain.ErrPrecondition):
		e := &Error{Status: http.StatusUnprocessableEntity, Code: domain.CodePrecondition, Message: "the request cannot be carried out now", Cause: err}
		var pe *domain.PreconditionError
		if errors.As(err, &pe) {
			e.Message = pe.Reason
		}
		return e
	case errors.Is(err, store.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Code: domain.CodeNotFound, Message: "not found", Cause: err}
	case errors.Is(err, store.ErrConflict), errors.Is(err, domain.ErrInvalidTransition):
		return &Error{Status: http.StatusConflict, Code: domain.CodeConflict, Message: "the request conflicts with the current state", Cause: err}
	case errors.Is(err, context.Canceled):
		return &Error{Status: statusClientClosed, Code: domain.CodeCanceled, Message: "the request was canceled", Cause: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: http.StatusGatewayTimeout, Code: domain.CodeTimeout, Message: "the operation timed out", Cause: err}
	}
	return &Error{Status: http.StatusInternalServerError, Code: domain.CodeInternal, Message: "internal error", Cause: err}
}

// writeError sends the JSON error shape and logs the cause of server-side failures.
func (s *Server) writeError(c *gin.Context, err error) {
	e := toError(err)
	rid := requestID(c)
	if e.Status >= 500 {
		s.log.Error("request failed", "request_id", rid, "method", c.Request.Method, "path", c.FullPath(),
			"status", e.Status, "error", err)
	} else if e.Cause != nil {
		s.log.Debug("request refused", "request_id", rid, "status", e.Status, "error", e.Cause)
	}
	c.AbortWithStatusJSON(e.Status, ErrorBody{Code: e.Code, Message: e.Message, Validations: e.Validations, RequestID: rid})
}

// handler adapts an error-returning handler to gin.
func (s *Server) handler(fn func(c *gin.Context) error) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := fn(c); err != nil {
			s.writeError(c, err)
		}
	}
}
