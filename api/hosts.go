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

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/sandbox"
	"github.com/jam-dev/jam/internal/store"
)

// HostControl is what the API needs of the RuntimeHost workflows (roomctl.Hosts).
type HostControl interface {
	Status(ctx context.Context, host uuid.UUID) (contract.RuntimeHostStatus, bool, error)
	// StartUpdate sends a host-scope update (control, checkpoint) and returns its run once
	// the host accepted it.
	StartUpdate(ctx context.Context, host uuid.UUID, updateID, name string, arg any) (string, error)
}

// HostBody is a runtime host: one execution boundary, its durable members and, when its
// workflow runs, its lease.
type HostBody struct {
	ID            uuid.UUID               `json:"id"`
	AgentID       uuid.UUID               `json:"agent_id"`
	TemplateID    uuid.UUID               `json:"template_id"`
	Placement     domain.Placement        `json:"placement"`
	State         domain.RuntimeHostState `json:"state"`
	Node          string                  `json:"node"`
	Sandboxed     bool                    `json:"sandboxed"`
	SandboxName   string                  `json:"sandbox_name,omitempty"`
	Compatibility string                  `json:"compatibility"`
	Members       []HostMemberBody        `json:"members"`
	// Lease is the RuntimeHost workflow's state; nil when it is not running or did not answer.
	Lease *HostLeaseBody `json:"lease,omitempty"`
	// Capacity is the host's bytes (GET /v1/hosts/{id} only).
	Capacity    *HostCapacityBody `json:"capacity,omitempty"`
	WorkflowID  string            `json:"workflow_id"`
	WorkflowURL string            `json:"workflow_url,omitempty"`
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
}

// HostMemberBody is one durable membership of a host.
type HostMemberBody struct {
	RuntimeSessionID uuid.UUID              `json:"runtime_session_id"`
	RoomID           uuid.UUID              `json:"room_id"`
	Alias            string                 `json:"alias"`
	State            domain.MembershipState `json:"state"`
	Removed          bool                   `json:"removed"`
}

// HostCapacityBody is what a host's files take: the root and each session workspace as its
// node measured them (absent when the node did not answer), each kept checkpoint
// generation's payload and each export (kept outside the root: cleanup never removes them).
type HostCapacityBody struct {
	RootBytes       *int64              `json:"root_bytes,omitempty"`
	WorkspaceBytes  map[uuid.UUID]int64 `json:"workspace_bytes,omitempty"`
	CheckpointBytes map[uuid.UUID]int64 `json:"checkpoint_bytes"`
	ExportBytes     map[uuid.UUID]int64 `json:"export_bytes"`
}

// HostList is the body of GET /v1/hosts.
type HostList struct {
	Items []HostBody `json:"items"`
}

// HostControlRequest is the body of POST /v1/hosts/{id}/control.
type HostControlRequest struct {
	Action         domain.HostAction `json:"action"`
	DiscardChanges bool              `json:"discard_changes,omitempty"`
}

// SandboxInventoryBody is the body of GET /v1/sandbox/inventory.
type SandboxInventoryBody struct {
	Node       string            `json:"node"`
	Inventory  sandbox.Inventory `json:"inventory"`
	WorkflowID string            `json:"workflow_id"`
}

func (s *Server) hostBody(ctx context.Context, h domain.RuntimeHost) (HostBody, error) {
	b := HostBody{ID: h.ID, AgentID: h.AgentID, TemplateID: h.TemplateID, Placement: h.Placement, State: h.State,
		Node: h.Node, Sandboxed: h.Sandboxed, SandboxName: h.SandboxName, Compatibility: h.Compatibility,
		Members: []HostMemberBody{}, WorkflowID: contract.RuntimeHostID(h.ID), CreatedAt: h.CreatedAt, UpdatedAt: h.UpdatedAt}
	b.WorkflowURL = s.workflowURL(b.WorkflowID)
	members, err := s.cfg.Store.HostMembers(ctx, h.ID)
	if err != nil {
		return b, err
	}
	for _, m := range members {
		b.Members = append(b.Members, HostMemberBody{RuntimeSessionID: m.RuntimeSession, RoomID: m.RoomID, Alias: m.Alias,
			State: m.State, Removed: m.Removed})
	}
	return b, nil
}

// listHosts lists runtime hosts (?agent= narrows to one agent's). Runtime hosts exist for
// sandboxed sessions; a host-native session has none.
func (s *Server) listHosts(c *gin.Context) error {
	var agent *uuid.UUID
	if raw := c.Query("agent"); raw != "" {
		id, err := domain.ParseID("agent", raw)
		if err != nil {
			return validationError(domain.Validations{{Field: "agent", Detail: err.Error()}})
		}
		agent = &id
	}
	hosts, err := s.cfg.Store.ListRuntimeHosts(c.Request.Context(), agent)
	if err != nil {
		return err
	}
	out := HostList{Items: make([]HostBody, 0, len(hosts))}
	for _, h := range hosts {
		b, err := s.hostBody(c.Request.Context(), h)
		if err != nil {
			return err
		}
		out.Items = append(out.Items, b)
	}
	c.JSON(http.StatusOK, out)
	return nil
}

// getHost is one host with its members and, when its workflow answers in time, its lease.
func (s *Server) getHost(c *gin.Context) error {
	h, err := lookup(c, "runtime host", s.cfg.Store.GetRuntimeHost)
	if err != nil {
		return err
	}
	b, err := s.hostBody(c.Request.Context(), h)
	if err != nil {
		return err
	}
	if s.cfg.Hosts != nil {
		ctx, cancel := context.WithTimeout(c.Request.Context(), stateTimeout)
		defer cancel()
		if st, ok, err := s.cfg.Hosts.Status(ctx, h.ID); err == nil && ok {
			b.Lease = hostLeaseBody(st)
		}
	}
	capa, err := s.hostCapacity(c.Request.Context(), h)
	if err != nil {
		return err
	}
	b.Capacity = &capa
	c.JSON(http.StatusOK, b)
	return nil
}

// controlHost runs a host-scope Stop, Restart or ResetSandbox. Its scope is the host's
// durable membership, never the row a client names; it is the only way to stop or reset a
// Shared host.
func (s *Server) controlHost(c *gin.Context) error {
	var req HostControlRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if !domain.HostActions.Has(req.Action) {
		return validationError(domain.Validations{{Field: "action", Detail: "want one of " + strings.Join(domain.HostActions.Strings(), ", ")}})
	}
	h, err := lookup(c, "runtime host", s.cfg.Store.GetRuntimeHost)
	if err != nil {
		return err
	}
	return s.runHostControl(c, h, req)
}

func (s *Server) runHostControl(c *gin.Context, h domain.RuntimeHost, req HostControlRequest) error {
	if s.cfg.Hosts == nil {
		return &Error{Status: http.StatusServiceUnavailable, Code: domain.CodeUnavailable, Message: "host control is not available in this process"}
	}
	if !h.Sandboxed {
		return domain.Refuse("runtime host %s has no sandbox to control", h.ID)
	}
	if req.Action != domain.HostStop {
		// A fenced host refuses a restart (its workflow's validator does too, but only once
		// the operation runs): said at once, with the reason.
		ctx, cancel := context.WithTimeout(c.Request.Context(), stateTimeout)
		st, ok, err := s.cfg.Hosts.Status(ctx, h.ID)
		cancel()
		if err == nil && ok && st.Unsaved != nil {
			return st.Unsaved.Refusal(h.ID, "the host cannot "+string(req.Action), contract.UnsavedRetry)
		}
	}
	req2 := contract.ControlRequest{Action: string(req.Action), DiscardChanges: req.DiscardChanges}
	op := domain.Operation{Kind: domain.OpKindHostControl, TargetKind: domain.TargetHost, TargetID: h.ID.String(),
		WorkflowID: contract.RuntimeHostID(h.ID), UpdateID: updateOperation}
	return s.startOperation(c, op, func(ctx context.Context, op *domain.Operation) (err error) {
		op.RunID, err = s.cfg.Hosts.StartUpdate(ctx, h.ID, op.UpdateID, contract.UpdateControl, req2)
		return err
	})
}

// DiscardUnsavedRequest is the body of POST /v1/hosts/{id}/discard-unsaved.
type DiscardUnsavedRequest struct {
	// ConfirmDiscard acknowledges that the provider state on the node, which the failed
	// teardown checkpoint did not capture, is held by no checkpoint: the host's next member
	// resumes from it as it is.
	ConfirmDiscard bool `json:"confirm_discard"`
}

// discardUnsaved lifts the fence of a host whose teardown checkpoint failed, without a
// checkpoint (a manual one, POST /v1/hosts/{id}/checkpoints, lifts it by succeeding).
func (s *Server) discardUnsaved(c *gin.Context) error {
	var req DiscardUnsavedRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if !req.ConfirmDiscard {
		return validationError(domain.Validations{{Field: "confirm_discard",
			Detail: "must be true: the provider state on the node is held by no checkpoint"}})
	}
	h, err := lookup(c, "runtime host", s.cfg.Store.GetRuntimeHost)
	if err != nil {
		return err
	}
	if s.cfg.Hosts == nil {
		return &Error{Status: http.StatusServiceUnavailable, Code: domain.CodeUnavailable, Message: "host control is not available in this process"}
	}
	op := domain.Operation{Kind: domain.OpKindDiscardUnsaved, TargetKind: domain.TargetHost, TargetID: h.ID.String(),
		WorkflowID: contract.RuntimeHostID(h.ID), UpdateID: updateOperation}
	return s.startOperation(c, op, func(ctx context.Context, op *domain.Operation) (err error) {
		op.RunID, err = s.cfg.Hosts.StartUpdate(ctx, h.ID, op.UpdateID, contract.UpdateDiscardUnsaved,
			contract.DiscardUnsavedRequest{Confirm: true})
		return err
	})
}

// ResetSandboxRequest is the body of POST /v1/sessions/{id}/reset-sandbox.
type ResetSandboxRequest struct {
	DiscardChanges bool `json:"discard_changes,omitempty"`
}

// resetSessionSandbox is the room-scoped reset: it destroys and recreates the sandbox of a
// session's Dedicated host (its only member). A Shared host's sandbox serves other rooms
// too, so a room may not reset it; only the host-scope control can.
func (s *Server) resetSessionSandbox(c *gin.Context) error {
	var req ResetSandboxRequest
	if err := decodeOptionalJSON(c, &req); err != nil {
		return err
	}
	hs, err := lookup(c, "session", s.cfg.Store.GetHostSession)
	if err != nil {
		return err
	}
	if !hs.Config.Sandbox.Enabled {
		return domain.Refuse("session %s runs host-native; it has no sandbox", hs.RuntimeSessionID)
	}
	h, err := s.cfg.Store.HostOfSession(c.Request.Context(), hs.RuntimeSessionID)
	if errors.Is(err, store.ErrNotFound) {
		return domain.Refuse("session %s has not run yet; it has no sandbox to reset", hs.RuntimeSessionID)
	}
	if err != nil {
		return err
	}
	if h.Placement == domain.PlacementShared {
		return &Error{Status: http.StatusConflict, Code: domain.CodeConflict,
			Message: "the session runs on a Shared host whose sandbox serves other rooms too; reset it with POST /v1/hosts/" + h.ID.String() + "/control"}
	}
	return s.runHostControl(c, h, HostControlRequest{Action: domain.HostResetSandbox, DiscardChanges: req.DiscardChanges})
}

// sandboxInventory asks one node's worker to classify its sandboxes and owner markers. It
// reads only; no disposition authorizes a mutation. A node without a usable `sbx` has no
// inventory to give: that is the operator's precondition to fix (422, saying why), not the
// node failing (an empty inventory would claim "no sandboxes" where Jam cannot look).
func (s *Server) sandboxInventory(c *gin.Context) error {
	node, err := s.nodeQuery(c)
	if err != nil {
		return err
	}
	var out sandbox.Inventory
	run, err := s.askNode(c, node, contract.SandboxInventoryID(node), contract.SandboxInventoryTimeout, contract.TypeSandboxInventory, &out)
	if err != nil {
		if _, why, ok := contract.Classify(err); ok && contract.Is(err, domain.ErrTypeSandboxUnavailable) {
			why = strings.TrimPrefix(why, "no usable sbx on this node: ")
			return &Error{Status: http.StatusUnprocessableEntity, Code: domain.CodePrecondition, Cause: err,
				Message: fmt.Sprintf("node %s has no usable sbx, so its sandboxes cannot be listed: %s (`jam sandbox support --node %s` says more)", node, why, node)}
		}
		return err
	}
	c.JSON(http.StatusOK, SandboxInventoryBody{Node: node, Inventory: out, WorkflowID: run.GetID()})
	return nil
}

// CheckpointBody is one provider checkpoint record of a host.
type CheckpointBody struct {
	ID               uuid.UUID                  `json:"id"`
	RuntimeHostID    uuid.UUID                  `json:"runtime_host_id"`
	Reason           domain.CheckpointReason    `json:"reason"`
	Provider         domain.Provider            `json:"provider"`
	ProviderVersion  string                     `json:"provider_version"`
	Sessions         []domain.CheckpointSession `json:"sessions"`
	ManifestChecksum string                     `json:"manifest_checksum"`
	PayloadBytes     int64                      `json:"payload_bytes"`
	PayloadDeletedAt *time.Time                 `json:"payload_deleted_at,omitempty"`
	CreatedAt        time.Time                  `json:"created_at"`
	// AutomaticCleanupCandidate: the payload is kept, older than 30 days, not the host's
	// newest, and no continuity evidence refers to it (advisory: nothing is deleted on its own).
	AutomaticCleanupCandidate bool `json:"automatic_cleanup_candidate"`
}

// CheckpointList is the body of GET /v1/hosts/{id}/checkpoints.
type CheckpointList struct {
	Items []CheckpointBody `json:"items"`
}

// createCheckpoint captures a manual checkpoint: running turns finish first and new ones
// wait, so the state is captured with every member quiesced.
func (s *Server) createCheckpoint(c *gin.Context) error {
	h, err := lookup(c, "runtime host", s.cfg.Store.GetRuntimeHost)
	if err != nil {
		return err
	}
	if s.cfg.Hosts == nil {
		return &Error{Status: http.StatusServiceUnavailable, Code: domain.CodeUnavailable, Message: "host control is not available in this process"}
	}
	if !h.Sandboxed || h.State == domain.HostArchived || h.State == domain.HostRemoved {
		return domain.Refuse("runtime host %s has no live managed provider state", h.ID)
	}
	op := domain.Operation{Kind: domain.OpKindCheckpoint, TargetKind: domain.TargetHost, TargetID: h.ID.String(),
		WorkflowID: contract.RuntimeHostID(h.ID), UpdateID: updateOperation}
	return s.startOperation(c, op, func(ctx context.Context, op *domain.Operation) (err error) {
		op.RunID, err = s.cfg.Hosts.StartUpdate(ctx, h.ID, op.UpdateID, contract.UpdateCheckpoint, nil)
		return err
	})
}

// renderCheckpoint turns a finished checkpoint update into the checkpoint's record.
func (s *Server) renderCheckpoint(ctx context.Context, raw json.RawMessage) (any, error) {
	var res contract.CaptureCheckpointResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("decode checkpoint result: %w", err)
	}
	if res.Skipped {
		return nil, domain.Refuse("the runtime host has no provider state to capture yet")
	}
	k, err := s.cfg.Store.GetCheckpoint(ctx, res.ID)
	if err != nil {
		return nil, err
	}
	return checkpointBody(k), nil
}

func checkpointBody(k domain.ProviderCheckpoint) CheckpointBody {
	return CheckpointBody{ID: k.ID, RuntimeHostID: k.RuntimeHostID, Reason: k.Reason, Provider: k.Provider,
		ProviderVersion: k.ProviderVersion, Sessions: k.Sessions, ManifestChecksum: k.ManifestChecksum,
		PayloadBytes: k.PayloadBytes, PayloadDeletedAt: k.PayloadDeletedAt, CreatedAt: k.CreatedAt}
}

// listCheckpoints lists a host's checkpoint records, newest first.
func (s *Server) listCheckpoints(c *gin.Context) error {
	h, err := lookup(c, "runtime host", s.cfg.Store.GetRuntimeHost)
	if err != nil {
		return err
	}
	list, err := s.cfg.Store.ListCheckpoints(c.Request.Context(), h.ID)
	if err != nil {
		return err
	}
	evidence, err := s.cfg.Store.CheckpointEvidence(c.Request.Context(), h.ID)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, CheckpointList{Items: checkpointBodies(list, evidence, time.Now())})
	return nil
}

// checkpointBodies are a host's checkpoints (newest first) with their cleanup candidates
// marked: a kept payload that is not the newest kept one and no evidence refers to.
func checkpointBodies(list []domain.ProviderCheckpoint, evidence map[uuid.UUID]bool, now time.Time) []CheckpointBody {
	out, newest := make([]CheckpointBody, len(list)), true
	for i, k := range list {
		out[i] = checkpointBody(k)
		if k.PayloadDeletedAt != nil {
			continue
		}
		out[i].AutomaticCleanupCandidate = domain.CleanupCandidate(k.CreatedAt, now, newest, evidence[k.ID])
		newest = false
	}
	return out
}

// ContinuityBody is the body of GET /v1/hosts/{id}/continuity.
type ContinuityBody struct {
	ContinuityReportBody
	WorkflowID string `json:"workflow_id"`
}

// hostContinuity asks the host's node whether every bound provider session can be resumed
// exactly from the newest checkpoint (verified on that node's disk).
func (s *Server) hostContinuity(c *gin.Context) error {
	h, err := lookup(c, "runtime host", s.cfg.Store.GetRuntimeHost)
	if err != nil {
		return err
	}
	if !h.Sandboxed {
		return domain.Refuse("runtime host %s has no managed provider state", h.ID)
	}
	var out contract.ContinuityReport
	run, err := s.askNodeWith(c, h.Node, contract.ContinuityInspectionID(h.ID), contract.ContinuityInspectionTimeout,
		contract.TypeContinuityInspection, contract.HostProbeInput{Node: h.Node, Host: h.ID}, &out)
	if err != nil {
		return err
	}
	c.JSON(http.StatusOK, ContinuityBody{ContinuityReportBody: continuityReportBody(out), WorkflowID: run.GetID()})
	return nil
}

// StartFreshRequest is the body of POST /v1/hosts/{id}/continuity/start-fresh.
type StartFreshRequest struct {
	// ConfirmStartFresh acknowledges that the provider threads of every session on the host
	// are abandoned (kept, archived, never resumed) for new ones.
	ConfirmStartFresh bool `json:"confirm_start_fresh"`
	// EvidenceChecksum is the checksum of the inspection the operator looked at.
	EvidenceChecksum string `json:"evidence_checksum"`
}

// startFresh runs the ContinuityReset workflow for a host whose continuity inspection the
// operator confirmed (by its evidence checksum): its rooms get new runtime sessions and new
// provider threads; the old ones are archived, never deleted.
func (s *Server) startFresh(c *gin.Context) error {
	var req StartFreshRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	var v domain.Validations
	if !req.ConfirmStartFresh {
		v.Add("confirm_start_fresh", "must be true: every provider thread of the host is abandoned for a new one")
	}
	if req.EvidenceChecksum == "" {
		v.Add("evidence_checksum", "required: the evidence_checksum of GET /v1/hosts/{id}/continuity")
	}
	if len(v) > 0 {
		return validationError(v)
	}
	h, err := lookup(c, "runtime host", s.cfg.Store.GetRuntimeHost)
	if err != nil {
		return err
	}
	if !h.Sandboxed {
		return domain.Refuse("runtime host %s has no managed provider state", h.ID)
	}
	op := domain.Operation{Kind: domain.OpKindStartFresh, TargetKind: domain.TargetHost, TargetID: h.ID.String(),
		WorkflowID: contract.ContinuityResetID(h.ID)}
	return s.startOperation(c, op, s.startWorkflow(contract.TypeContinuityReset,
		contract.ContinuityResetInput{Host: h.ID, Node: h.Node, EvidenceChecksum: req.EvidenceChecksum}))
}

// startWorkflow starts (or joins, per the contract's start policy) the workflow that
// carries an operation.
func (s *Server) startWorkflow(typ string, in any) operationStart {
	return func(ctx context.Context, op *domain.Operation) error {
		run, err := contract.Start(ctx, s.cfg.Temporal, typ, op.WorkflowID, in)
		if err != nil {
			return err
		}
		op.RunID = run.GetRunID()
		return nil
	}
}

// DeletePayloadRequest is the body of POST /v1/hosts/{id}/checkpoints/{checkpoint}/delete-payload.
type DeletePayloadRequest struct {
	// ConfirmPermanent acknowledges that the payload cannot be restored afterwards.
	ConfirmPermanent bool `json:"confirm_permanent"`
}

// deleteCheckpointPayload runs the CheckpointDeletion workflow: retention allowing, the
// payload goes and the record stays (payload_deleted_at set).
func (s *Server) deleteCheckpointPayload(c *gin.Context) error {
	var req DeletePayloadRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if !req.ConfirmPermanent {
		return validationError(domain.Validations{{Field: "confirm_permanent", Detail: "must be true: a deleted payload cannot be restored"}})
	}
	h, err := lookup(c, "runtime host", s.cfg.Store.GetRuntimeHost)
	if err != nil {
		return err
	}
	cid, err := uuidParam(c, "checkpoint")
	if err != nil {
		return err
	}
	k, err := s.cfg.Store.GetCheckpoint(c.Request.Context(), cid)
	if errors.Is(err, store.ErrNotFound) || (err == nil && k.RuntimeHostID != h.ID) {
		return notFound("checkpoint", store.ErrNotFound)
	}
	if err != nil {
		return err
	}
	op := domain.Operation{Kind: domain.OpKindCheckpointDelete, TargetKind: domain.TargetCheckpoint, TargetID: cid.String(),
		WorkflowID: contract.CheckpointDeletionID(cid)}
	return s.startOperation(c, op, s.startWorkflow(contract.TypeCheckpointDeletion,
		contract.CheckpointDeletionInput{Checkpoint: cid, Host: h.ID, Node: h.Node}))
}

func (s *Server) hostCapacity(ctx context.Context, h domain.RuntimeHost) (HostCapacityBody, error) {
	out := HostCapacityBody{CheckpointBytes: map[uuid.UUID]int64{}, ExportBytes: map[uuid.UUID]int64{}}
	cks, err := s.cfg.Store.ListCheckpoints(ctx, h.ID)
	if err != nil {
		return out, err
	}
	for _, k := range cks {
		if k.PayloadDeletedAt == nil {
			out.CheckpointBytes[k.ID] = k.PayloadBytes
		}
	}
	exports, err := s.cfg.Store.ListHostExports(ctx, h.ID)
	if err != nil {
		return out, err
	}
	for _, e := range exports {
		if e.DeletedAt == nil {
			out.ExportBytes[e.ID] = e.Bytes
		}
	}
	if m, ok := s.measureHost(ctx, h); ok {
		out.RootBytes, out.WorkspaceBytes = &m.RootBytes, m.WorkspaceBytes
	}
	return out, nil
}
