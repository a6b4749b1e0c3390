package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"go.temporal.io/api/serviceerror"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
)

// workspaceOpWait is how long a workspace operation request waits for the result before it
// answers 202 and the operation goes on (GET /v1/workspaces/{id} shows it running).
const workspaceOpWait = 45 * time.Second

// WorkspaceBody is a managed workspace with its exports, recent operations and bytes.
type WorkspaceBody struct {
	domain.ManagedWorkspace
	Exports    []ExportBody                `json:"exports"`
	Operations []domain.WorkspaceOperation `json:"operations"`
	// Bytes is what the live workspace holds on its node; nil when the node did not answer.
	Bytes       *int64 `json:"bytes,omitempty"`
	ExportBytes int64  `json:"export_bytes"`
	WorkflowID  string `json:"workflow_id"`
}

// WorkspaceList is the body of GET /v1/workspaces.
type WorkspaceList struct {
	Items []domain.ManagedWorkspace `json:"items"`
}

// WorkspaceOpRequest is the body of the workspace operation routes; each route reads only
// its own fields.
type WorkspaceOpRequest struct {
	Retention    domain.ArchiveRetention `json:"retention,omitempty"`
	ForceDiscard bool                    `json:"force_discard,omitempty"`
	ExportID     *uuid.UUID              `json:"export_id,omitempty"`
	// ConfirmPermanent is export deletion's own confirmation.
	ConfirmPermanent bool `json:"confirm_permanent,omitempty"`
}

// WorkspaceOpBody is the result of a finished workspace operation (the operation resource's
// result).
type WorkspaceOpBody struct {
	Operation *domain.WorkspaceOperation `json:"operation,omitempty"`
	Export    *domain.WorkspaceExport    `json:"export,omitempty"`
	Blockers  []string                   `json:"blockers,omitempty"`
	Resumed   bool                       `json:"resumed,omitempty"`
	// Repository is a repository operation's result: the commit, the pull request URL or
	// the checks table.
	Repository *domain.RepoResult `json:"repository,omitempty"`
	WorkflowID string             `json:"workflow_id"`
}

// OperationBody is one workspace operation with its journal.
type OperationBody struct {
	domain.WorkspaceOperation
	Events []store.OperationEvent `json:"events"`
}

func (s *Server) listWorkspaces(c *gin.Context) error {
	host := uuid.Nil
	if raw := c.Query("host"); raw != "" {
		id, err := domain.ParseID("host", raw)
		if err != nil {
			return validationError(domain.Validations{{Field: "host", Detail: err.Error()}})
		}
		host = id
	}
	items, err := s.cfg.Store.ListManagedWorkspaces(c.Request.Context(), host)
	if err != nil {
		return err
	}
	if items == nil {
		items = []domain.ManagedWorkspace{}
	}
	c.JSON(http.StatusOK, WorkspaceList{Items: items})
	return nil
}

// ExportBody is one export of a workspace.
type ExportBody struct {
	domain.WorkspaceExport
	// AutomaticCleanupCandidate: the export is kept, older than 30 days and not the
	// workspace's newest (advisory: nothing is deleted on its own).
	AutomaticCleanupCandidate bool `json:"automatic_cleanup_candidate"`
}

// exportBodies marks the cleanup candidates among a workspace's exports (newest first).
func exportBodies(exports []domain.WorkspaceExport, now time.Time) []ExportBody {
	out := make([]ExportBody, len(exports))
	newest := true
	for i, e := range exports {
		out[i] = ExportBody{WorkspaceExport: e}
		if e.DeletedAt != nil {
			continue
		}
		out[i].AutomaticCleanupCandidate = domain.CleanupCandidate(e.CreatedAt, now, newest, false)
		newest = false
	}
	return out
}

func (s *Server) getWorkspace(c *gin.Context) error {
	ws, err := lookup(c, "workspace", s.cfg.Store.GetManagedWorkspace)
	if err != nil {
		return err
	}
	ctx := c.Request.Context()
	b := WorkspaceBody{ManagedWorkspace: ws, WorkflowID: contract.WorkspaceOpID(ws.ID)}
	exports, err := s.cfg.Store.ListWorkspaceExports(ctx, ws.ID)
	if err != nil {
		return err
	}
	b.Exports = exportBodies(exports, time.Now())
	if b.Operations, err = s.cfg.Store.ListWorkspaceOperations(ctx, ws.ID, 20); err != nil {
		return err
	}
	for _, e := range b.Exports {
		if e.DeletedAt == nil {
			b.ExportBytes += e.Bytes
		}
	}
	if b.Operations == nil {
		b.Operations = []domain.WorkspaceOperation{}
	}
	// Read the state again after the operations: an operation's outcome and the workspace
	// state it sets commit together, so a body never shows a finished archive beside the
	// state from before it.
	if b.ManagedWorkspace, err = s.cfg.Store.GetManagedWorkspace(ctx, ws.ID); err != nil {
		return err
	}
	if h, err := s.cfg.Store.GetRuntimeHost(ctx, ws.RuntimeHostID); err == nil {
		if capa, ok := s.measureHost(ctx, h); ok {
			if n, ok := capa.WorkspaceBytes[ws.ID]; ok {
				b.Bytes = &n
			}
		}
	}
	c.JSON(http.StatusOK, b)
	return nil
}

// measureHost asks the host's node for its bytes, briefly; ok=false when it did not answer.
func (s *Server) measureHost(ctx context.Context, h domain.RuntimeHost) (contract.HostCapacity, bool) {
	var out contract.HostCapacity
	if s.cfg.Temporal == nil || h.State == domain.HostRemoved {
		return out, false
	}
	ctx, cancel := context.WithTimeout(ctx, stateTimeout)
	defer cancel()
	run, err := contract.Start(ctx, s.cfg.Temporal, contract.TypeHostMeasure, contract.HostMeasureID(h.ID),
		contract.HostProbeInput{Node: h.Node, Host: h.ID})
	if err != nil {
		return out, false
	}
	return out, run.Get(ctx, &out) == nil
}

func (s *Server) getWorkspaceOperation(c *gin.Context) error {
	ws, err := lookup(c, "workspace", s.cfg.Store.GetManagedWorkspace)
	if err != nil {
		return err
	}
	id, err := uuidParam(c, "op")
	if err != nil {
		return err
	}
	op, err := s.cfg.Store.GetWorkspaceOperation(c.Request.Context(), id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && op.WorkspaceID != ws.ID) {
		return notFound("operation", store.ErrNotFound)
	}
	if err != nil {
		return err
	}
	events, err := s.cfg.Store.WorkspaceOperationEvents(c.Request.Context(), id)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, OperationBody{WorkspaceOperation: op, Events: events})
	return nil
}

// workspaceHost is the route's workspace and the runtime host whose node holds it.
func (s *Server) workspaceHost(c *gin.Context) (domain.ManagedWorkspace, domain.RuntimeHost, error) {
	ws, err := lookup(c, "workspace", s.cfg.Store.GetManagedWorkspace)
	if err != nil {
		return ws, domain.RuntimeHost{}, err
	}
	h, err := s.cfg.Store.GetRuntimeHost(c.Request.Context(), ws.RuntimeHostID)
	return ws, h, err
}

// inspectRemoval asks the workspace's node what removing it would lose (uncommitted or
// unpushed work). It reads only; archive runs it again, fresh, before removing anything.
func (s *Server) inspectRemoval(c *gin.Context) error {
	ws, h, err := s.workspaceHost(c)
	if err != nil {
		return err
	}
	var out contract.RemovalReport
	_, err = s.askNodeWith(c, h.Node, contract.RemovalInspectionID(ws.ID), contract.RemovalInspectionTimeout,
		contract.TypeRemovalInspection, contract.RemovalInspectionInput{Node: h.Node,
			Ref: contract.WorkspaceRef{Workspace: ws.ID, Host: ws.RuntimeHostID, Session: ws.RuntimeSessionID}}, &out)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, removalReportBody(out))
	return nil
}

// workspaceOp is the handler of one workspace action.
func (s *Server) workspaceOp(action domain.WorkspaceAction) func(c *gin.Context) error {
	return func(c *gin.Context) error {
		var req WorkspaceOpRequest
		if err := decodeJSON(c, &req); err != nil {
			return err
		}
		in := contract.WorkspaceOpInput{Action: action}
		var v domain.Validations
		switch action {
		case domain.WorkspaceActionArchive:
			if req.Retention != "" && !domain.ArchiveRetentions.Has(req.Retention) {
				v.Add("retention", "want one of "+strings.Join(domain.ArchiveRetentions.Strings(), ", "))
			}
			in.Retention, in.ForceDiscard = req.Retention, req.ForceDiscard
		case domain.WorkspaceActionRestore:
			if req.ExportID != nil {
				in.ExportID = *req.ExportID
			}
		case domain.WorkspaceActionDeleteExport:
			id, err := uuidParam(c, "export")
			if err != nil {
				return err
			}
			if !req.ConfirmPermanent {
				v.Add("confirm_permanent", "must be true: a deleted export cannot be restored")
			}
			in.ExportID, in.ConfirmPermanent = id, req.ConfirmPermanent
		}
		if len(v) > 0 {
			return validationError(v)
		}
		ws, err := lookup(c, "workspace", s.cfg.Store.GetManagedWorkspace)
		if err != nil {
			return err
		}
		in.Workspace = ws.ID
		return s.startWorkspaceOp(c, in)
	}
}

// startWorkspaceOp starts WorkspaceOp:<workspace> (conflict policy FAIL: a second
// operation on the workspace is a 409) as a long operation: 202 once it started; its result
// is a WorkspaceOpBody.
func (s *Server) startWorkspaceOp(c *gin.Context, in contract.WorkspaceOpInput) error {
	op := domain.Operation{Kind: domain.OpKindWorkspace, TargetKind: domain.TargetWorkspace, TargetID: in.Workspace.String(),
		WorkflowID: contract.WorkspaceOpID(in.Workspace)}
	return s.startOperation(c, op, func(ctx context.Context, op *domain.Operation) error {
		run, err := contract.Start(ctx, s.cfg.Temporal, contract.TypeWorkspaceOp, op.WorkflowID, in)
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return &Error{Status: http.StatusConflict, Code: domain.CodeConflict,
				Message: "another operation is running on this workspace; wait for it (GET the workspace) and ask again", Cause: err}
		}
		if err != nil {
			return err
		}
		op.RunID = run.GetRunID()
		return nil
	})
}

// renderWorkspaceOp turns a finished WorkspaceOp into its body.
func (s *Server) renderWorkspaceOp(_ context.Context, raw json.RawMessage) (any, error) {
	var out contract.WorkspaceOpResult
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("decode workspace operation result: %w", err)
	}
	return WorkspaceOpBody{WorkflowID: contract.WorkspaceOpID(out.Operation.WorkspaceID), Operation: &out.Operation,
		Export: out.Export, Blockers: out.Blockers, Resumed: out.Resumed, Repository: out.Repository}, nil
}

// CleanupRequest is the body of POST /v1/hosts/{id}/cleanup.
type CleanupRequest struct {
	// ConfirmPermanent acknowledges that the host's sandbox and files go for good (its
	// exports stay).
	ConfirmPermanent bool `json:"confirm_permanent"`
}

// CleanupInspectionBody is the body of GET /v1/hosts/{id}/cleanup.
type CleanupInspectionBody struct {
	CleanupReportBody
	CanCleanup bool                         `json:"can_cleanup"`
	Cleanup    *domain.HostCleanupOperation `json:"cleanup,omitempty"`
	WorkflowID string                       `json:"workflow_id"`
}

// inspectHostCleanup is the read-only cleanup preflight, with the cleanup record when one
// exists.
func (s *Server) inspectHostCleanup(c *gin.Context) error {
	h, err := lookup(c, "runtime host", s.cfg.Store.GetRuntimeHost)
	if err != nil {
		return err
	}
	body := CleanupInspectionBody{WorkflowID: contract.HostCleanupID(h.ID)}
	if op, err := s.cfg.Store.HostCleanupOfHost(c.Request.Context(), h.ID); err == nil {
		body.Cleanup = &op
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if h.State == domain.HostRemoved {
		body.CleanupReportBody = CleanupReportBody{Host: h.ID, Blockers: []string{"the host is removed"}, Members: []CleanupMemberBody{}}
		c.JSON(http.StatusOK, body)
		return nil
	}
	var rep contract.CleanupReport
	if _, err := s.askNodeWith(c, h.Node, contract.CleanupInspectionID(h.ID), contract.CleanupInspectionTimeout,
		contract.TypeCleanupInspection, contract.HostProbeInput{Node: h.Node, Host: h.ID}, &rep); err != nil {
		return err
	}
	body.CleanupReportBody, body.CanCleanup = cleanupReportBody(rep), len(rep.Blockers) == 0
	c.JSON(http.StatusOK, body)
	return nil
}

// cleanupHost runs the HostCleanup workflow: a fresh preflight inside the workflow, then the
// sandbox, then the root; exports are kept.
func (s *Server) cleanupHost(c *gin.Context) error {
	var req CleanupRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if !req.ConfirmPermanent {
		return validationError(domain.Validations{{Field: "confirm_permanent", Detail: "must be true: the host's sandbox and files are removed for good"}})
	}
	h, err := lookup(c, "runtime host", s.cfg.Store.GetRuntimeHost)
	if err != nil {
		return err
	}
	// Every run resumes the host's recorded cleanup (or finds it finished), so a new run
	// after a completed one is safe — and needed once a restore revived the host.
	op := domain.Operation{Kind: domain.OpKindHostCleanup, TargetKind: domain.TargetHost, TargetID: h.ID.String(),
		WorkflowID: contract.HostCleanupID(h.ID)}
	return s.startOperation(c, op, s.startWorkflow(contract.TypeHostCleanup,
		contract.HostCleanupInput{Host: h.ID, Node: h.Node, ConfirmPermanent: true}))
}
