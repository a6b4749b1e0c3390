package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// maxOperationWait bounds ?wait= so a request never outlives the HTTP write timeout.
const maxOperationWait = 50 * time.Second

// OperationResource is a long operation: POST routes that start one answer 202 with
// it (and Location: /v1/operations/{id}); GET /v1/operations/{id} reports where it is.
type OperationResource struct {
	ID     uuid.UUID              `json:"id"`
	Kind   domain.OperationKind   `json:"kind"`
	Target OperationTarget        `json:"target"`
	Status domain.OperationStatus `json:"status"`
	// Stage is the step the operation's workflow is on while it runs (the activity it waits on).
	Stage string `json:"stage,omitempty"`
	// Result is what the operation produced, in the shape its route documents.
	Result json.RawMessage `json:"result,omitempty"`
	// Failure says why it failed: Class is the error table's wire name, Status and Code what
	// the route would have answered.
	Failure     *OperationFailure `json:"failure,omitempty"`
	WorkflowID  string            `json:"workflow_id"`
	WorkflowURL string            `json:"workflow_url,omitempty"`
	CreatedAt   time.Time         `json:"created_at"`
	FinishedAt  *time.Time        `json:"finished_at,omitempty"`
}

// OperationTarget is what an operation acts on.
type OperationTarget struct {
	Kind domain.TargetKind `json:"kind"`
	ID   string            `json:"id"`
}

// OperationFailure is a failed operation's outcome.
type OperationFailure struct {
	Class   string `json:"class"`
	Status  int    `json:"status"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// operationStart starts the workflow or update that carries op, filling in its run.
type operationStart func(ctx context.Context, op *domain.Operation) error

// resultRenderer turns a finished operation's raw workflow result into the route's body; an
// error fails the operation (classified through toError).
type resultRenderer func(ctx context.Context, raw json.RawMessage) (any, error)

// startOperation records op, starts it, and answers 202 with its resource (200 with the
// finished resource when ?wait= let it finish). A start its validator rejects answers that
// rejection, as the route did before.
func (s *Server) startOperation(c *gin.Context, op domain.Operation, start operationStart) error {
	wait, err := waitParam(c)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	op.ID, op.CreatedAt, op.Status = uuid.New(), time.Now().UTC(), domain.OperationRunning
	if op.UpdateID != "" {
		op.UpdateID = op.ID.String()
	}
	if err := s.cfg.Store.CreateOperation(ctx, op); err != nil {
		return err
	}
	if err := start(ctx, &op); err != nil {
		var apiErr *Error
		if !contract.Classified(err) && !errors.As(err, &apiErr) {
			err = &Error{Status: http.StatusServiceUnavailable, Code: domain.CodeUnavailable, Message: "the workflow service is unavailable", Cause: err}
		}
		s.finishOperation(ctx, &op, contract.Outcome{Done: true, Err: err})
		return err
	}
	if op.RunID != "" {
		if err := s.cfg.Store.SetOperationRun(ctx, op.ID, op.RunID); err != nil {
			return err
		}
	}
	c.Header("Location", "/v1/operations/"+op.ID.String())
	if s.watch != nil {
		go s.watchOperation(s.watch, op)
	}
	if wait == 0 {
		// Started is the answer: the outcome is the operation resource's to tell.
		c.JSON(http.StatusAccepted, s.operationBody(op, ""))
		return nil
	}
	return s.answerOperation(c, op, wait, http.StatusAccepted)
}

// WatchOperations makes this server record every operation's outcome when it finishes (and
// so put operation_finished on the event stream) without anyone polling: each operation it
// starts, and those a previous process left running, are followed until ctx ends.
func (s *Server) WatchOperations(ctx context.Context) {
	s.watch = ctx
	go func() {
		ops, err := s.cfg.Store.RunningOperations(ctx)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("list running operations", "error", err)
			}
			return
		}
		for _, op := range ops {
			go s.watchOperation(ctx, op)
		}
	}()
}

// watchOperation follows one operation until Temporal reports its outcome, then records it.
func (s *Server) watchOperation(ctx context.Context, op domain.Operation) {
	for ctx.Err() == nil {
		out, err := contract.Observe(ctx, s.cfg.Temporal, op, maxOperationWait)
		switch {
		case err == nil && out.Done:
			s.finishOperation(ctx, &op, out)
			return
		case err != nil:
			// Temporal unreachable or the record gone: try again later; a GET also records it.
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Second):
			}
		}
	}
}

// getOperation is GET /v1/operations/{id}[?wait=30s].
func (s *Server) getOperation(c *gin.Context) error {
	wait, err := waitParam(c)
	if err != nil {
		return err
	}
	op, err := lookup(c, "operation", s.cfg.Store.GetOperation)
	if err != nil {
		return err
	}
	return s.answerOperation(c, op, wait, http.StatusOK)
}

// answerOperation reports op, first asking Temporal (waiting up to wait) when its outcome is
// not recorded yet. running is the status a still-running operation answers with.
func (s *Server) answerOperation(c *gin.Context, op domain.Operation, wait time.Duration, running int) error {
	ctx := c.Request.Context()
	var stage string
	if op.Status == domain.OperationRunning {
		out, err := contract.Observe(ctx, s.cfg.Temporal, op, wait)
		if err != nil {
			return &Error{Status: http.StatusServiceUnavailable, Code: domain.CodeUnavailable, Message: "the workflow service is unavailable", Cause: err}
		}
		stage = out.Stage
		if out.Done {
			s.finishOperation(ctx, &op, out)
		}
	}
	body := s.operationBody(op, stage)
	status := http.StatusOK
	if op.Status == domain.OperationRunning {
		status = running
	}
	c.JSON(status, body)
	return nil
}

// finishOperation renders an outcome into op and records it (best effort: a failed write is
// logged, and the next GET asks Temporal again).
func (s *Server) finishOperation(ctx context.Context, op *domain.Operation, out contract.Outcome) {
	err := out.Err
	if err == nil {
		var body any = out.Result
		if render := s.renderers(*op)[op.Kind]; render != nil {
			body, err = render(ctx, out.Result)
		}
		if err == nil {
			raw, merr := json.Marshal(body)
			if merr != nil {
				err = fmt.Errorf("encode the result of operation %s: %w", op.ID, merr)
			} else {
				op.Status, op.Result = domain.OperationSucceeded, raw
			}
		}
	}
	if err != nil {
		e := toError(err)
		if e.Code == domain.CodeInternal && out.Err != nil {
			// The workflow failed for a reason the error table does not name: what the
			// operator needs is its workflow, which the body links.
			e = &Error{Status: http.StatusBadGateway, Code: domain.CodeUpstream,
				Message: "the operation failed; asked again it resumes from its recorded stage (see its workflow)", Cause: err}
		}
		op.Status, op.HTTPStatus, op.FailureCode, op.FailureText = domain.OperationFailed, e.Status, e.Code, e.Message
		op.FailureClass = e.Code
		if cls, _, ok := contract.Classify(err); ok {
			op.FailureClass = string(cls.Type)
		}
		if e.Status >= 500 {
			s.log.Warn("operation failed", "operation", op.ID, "kind", op.Kind, "workflow_id", op.WorkflowID, "error", err)
		}
	}
	now := time.Now().UTC()
	op.FinishedAt = &now
	if werr := s.cfg.Store.FinishOperation(context.WithoutCancel(ctx), *op); werr != nil {
		s.log.Warn("record operation outcome", "operation", op.ID, "error", werr)
	}
}

func (s *Server) operationBody(op domain.Operation, stage string) OperationResource {
	b := OperationResource{ID: op.ID, Kind: op.Kind, Target: OperationTarget{Kind: op.TargetKind, ID: op.TargetID},
		Status: op.Status, Stage: stage, Result: op.Result, WorkflowID: op.WorkflowID,
		WorkflowURL: s.workflowURL(op.WorkflowID), CreatedAt: op.CreatedAt, FinishedAt: op.FinishedAt}
	if op.Status == domain.OperationFailed {
		b.Failure = &OperationFailure{Class: op.FailureClass, Status: op.HTTPStatus, Code: op.FailureCode, Message: op.FailureText}
	}
	return b
}

// decodeAs renders a result by decoding the workflow's payload as T and mapping it to the
// route's own body type.
func decodeAs[T, B any](body func(T) B) resultRenderer {
	return func(_ context.Context, raw json.RawMessage) (any, error) {
		var v T
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("decode %T: %w", v, err)
		}
		return body(v), nil
	}
}

// waitParam reads ?wait= (a Go duration, e.g. 30s), bounded by maxOperationWait.
func waitParam(c *gin.Context) (time.Duration, error) {
	v := c.Query("wait")
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, validationError(domain.Validations{{Field: "wait", Detail: "want a duration such as 30s"}})
	}
	return min(d, maxOperationWait), nil
}

// updateOperation marks an operation carried by an update of an entity workflow; its
// update id becomes the operation's id.
const updateOperation = "update"

// renderers turn a kind's raw workflow result into its route's body; a kind without one
// answers the workflow's result as it is.
func (s *Server) renderers(op domain.Operation) map[domain.OperationKind]resultRenderer {
	return map[domain.OperationKind]resultRenderer{domain.OpKindCheckpoint: s.renderCheckpoint,
		domain.OpKindTemplateApply: s.renderTemplateApply(op),
		domain.OpKindWorkspace:     s.renderWorkspaceOp,
		domain.OpKindHostControl:   decodeAs(hostControlResult),
		// The host's lease after the discard (no unsaved state any more).
		domain.OpKindDiscardUnsaved: decodeAs(hostLeaseBody),
		domain.OpKindHostCleanup:    decodeAs(hostCleanupResultBody)}
}
