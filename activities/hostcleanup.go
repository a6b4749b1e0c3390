package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/workspace"
)

// HostRef names a runtime host.
type HostRef struct {
	Host uuid.UUID `json:"host"`
}

// InspectCleanup is the read-only cleanup preflight, run on the host's node: the host must be
// parked (or archived as a continuity-reset source); every member dormant and not live in
// this worker; every Managed member's workspace archived with an export that verifies and
// no running operation; and the sandbox inventory must show exactly one healthy stopped
// sandbox or confirm it absent.
func (w *Workspaces) InspectCleanup(ctx context.Context, in HostRef) (contract.CleanupReport, error) {
	rep := contract.CleanupReport{Host: in.Host, Blockers: []string{}, Members: []contract.CleanupMember{}}
	h, err := w.Store.GetRuntimeHost(ctx, in.Host)
	if errors.Is(err, store.ErrNotFound) {
		return rep, refuse("runtime host %s does not exist", in.Host)
	}
	if err != nil {
		return rep, err
	}
	block := func(format string, args ...any) { rep.Blockers = append(rep.Blockers, fmt.Sprintf(format, args...)) }
	switch h.State {
	case domain.HostParked:
	case domain.HostArchived:
		if _, err := w.Store.GetContinuityReset(ctx, h.ID); errors.Is(err, store.ErrNotFound) {
			block("the host is archived but is not the source of a continuity reset")
		} else if err != nil {
			return rep, err
		}
	default:
		block("the host is %s; only a parked host (or an archived continuity-reset source) is cleaned up", h.State)
	}
	members, err := w.Store.HostMembers(ctx, h.ID)
	if err != nil {
		return rep, err
	}
	workspaces, err := w.Store.ListManagedWorkspaces(ctx, h.ID)
	if err != nil {
		return rep, err
	}
	bySession := map[uuid.UUID]domain.ManagedWorkspace{}
	for _, ws := range workspaces {
		bySession[ws.RuntimeSessionID] = ws
	}
	stop := heartbeat(ctx)
	defer stop()
	for _, m := range members {
		cm := contract.CleanupMember{RuntimeSession: m.RuntimeSession, Membership: m.State}
		if m.State != domain.MembershipDormant {
			block("member %s is %s", m.RuntimeSession, m.State)
		}
		if w.Live != nil && w.Live(m.RuntimeSession) {
			cm.LiveInWorker = true
			block("member %s has a live runtime in this worker", m.RuntimeSession)
		}
		if ws, ok := bySession[m.RuntimeSession]; ok {
			cm.Source, cm.WorkspaceState = ws.Source, ws.State
			if err := w.checkPreserved(ctx, ws, &cm, block); err != nil {
				return rep, err
			}
		}
		rep.Members = append(rep.Members, cm)
	}
	if h.Sandboxed {
		w.inspectSandbox(ctx, h, &rep.Sandbox)
		switch {
		case rep.Sandbox.Unavailable != "":
			block("the sandbox inventory is unavailable: %s", rep.Sandbox.Unavailable)
		case rep.Sandbox.Absent:
		case rep.Sandbox.Disposition != domain.DispositionHealthy:
			block("sandbox %s is %s", rep.Sandbox.Name, rep.Sandbox.Disposition)
		case rep.Sandbox.Status != domain.SandboxStopped:
			block("sandbox %s is %s, not stopped", rep.Sandbox.Name, rep.Sandbox.Status)
		}
	}
	paths, err := workspace.ManagedPaths(w.Layout, h.ID)
	if err != nil {
		return rep, err
	}
	if rep.PlannedRuntimeHostBytes, err = workspace.DirBytes(paths.Root); err != nil {
		return rep, err
	}
	exports, err := w.Store.ListHostExports(ctx, h.ID)
	if err != nil {
		return rep, err
	}
	for _, e := range exports {
		if e.DeletedAt == nil {
			rep.RetainedExportBytes += e.Bytes
		}
	}
	return rep, nil
}

// checkPreserved: a Managed workspace is preserved when it is archived, has an export that
// verifies, and no operation runs on it. Path-backed workspaces need nothing: Jam does not
// own their bytes.
func (w *Workspaces) checkPreserved(ctx context.Context, ws domain.ManagedWorkspace, cm *contract.CleanupMember, block func(string, ...any)) error {
	if ws.Source != domain.WorkspaceManaged {
		return nil
	}
	cm.NeedsPreserving = true
	running, err := w.Store.RunningWorkspaceOperation(ctx, ws.ID)
	if err != nil {
		return err
	}
	if running != nil {
		cm.RunningOp = &running.ID
		block("workspace %s has a running %s operation", ws.ID, running.Kind)
	}
	if ws.State != domain.WorkspaceArchived {
		block("workspace %s is %s, not archived", ws.ID, ws.State)
	}
	paths, err := workspace.ManagedPaths(w.Layout, ws.RuntimeHostID)
	if err != nil {
		return err
	}
	if _, err := os.Lstat(paths.Session(ws.RuntimeSessionID)); err == nil {
		// Archived by a continuity reset, say: its live bytes are in no export yet.
		block("workspace %s still has live bytes; archive it first (its export then holds them)", ws.ID)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	exports, err := w.Store.ListWorkspaceExports(ctx, ws.ID)
	if err != nil {
		return err
	}
	for _, e := range exports {
		if e.DeletedAt != nil {
			continue
		}
		if m, err := w.exports().Verify(e.ID); err == nil && m.Checksum == e.ManifestChecksum {
			id := e.ID
			cm.VerifiedExport = &id
			return nil
		}
	}
	block("workspace %s has no export that verifies", ws.ID)
	return nil
}

func (w *Workspaces) inspectSandbox(ctx context.Context, h domain.RuntimeHost, sb *contract.CleanupSandbox) {
	sb.Name = h.SandboxName
	if w.Sandbox == nil {
		sb.Unavailable = "this worker has no sandbox driver"
		return
	}
	inv, err := w.Sandbox.SandboxInventory(ctx, SandboxInventoryInput{})
	if err != nil {
		sb.Unavailable = "the node's sbx could not list its sandboxes"
		return
	}
	found := 0
	for _, e := range inv.Entries {
		if e.Name != h.SandboxName {
			continue
		}
		found++
		sb.Disposition, sb.Status = e.Disposition, e.Status
	}
	switch {
	case found == 0:
		sb.Absent = true
	case found == 1 && sb.Disposition == domain.DispositionOwnerWithoutDocker:
		// Docker confirms there is no such sandbox; only the marker is left.
		sb.Absent = true
	case found > 1:
		sb.Disposition = domain.DispositionOwnershipMismatch
	}
}

// FindCleanup reads the host's cleanup operation, if any.
func (w *WorkspaceRecords) FindCleanup(ctx context.Context, in HostRef) (*domain.HostCleanupOperation, error) {
	op, err := w.Store.HostCleanupOfHost(ctx, in.Host)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if op.Stage == domain.CleanupSucceeded {
		// A restore revived the host after its cleanup: asked again, it is cleaned up anew.
		h, err := w.Store.GetRuntimeHost(ctx, in.Host)
		if err != nil {
			return nil, err
		}
		if h.State != domain.HostRemoved {
			return nil, nil
		}
	}
	return &op, nil
}

// CleanupStageInput writes one stage of a host cleanup. Prepared creates the record (with
// its immutable plan); Succeeded also marks the host removed, in the same transaction.
type CleanupStageInput struct {
	ID                      uuid.UUID           `json:"id"`
	Host                    uuid.UUID           `json:"host"`
	Stage                   domain.CleanupStage `json:"stage"`
	PlannedRuntimeHostBytes int64               `json:"planned_runtime_host_bytes,omitempty"`
	RetainedExportBytes     int64               `json:"retained_export_bytes,omitempty"`
	RemovedRuntimeHostBytes int64               `json:"removed_runtime_host_bytes,omitempty"`
}

// WriteCleanupStage persists a stage through the forward-only validator. A second cleanup of
// the host is refused.
func (w *WorkspaceRecords) WriteCleanupStage(ctx context.Context, in CleanupStageInput) (domain.HostCleanupOperation, error) {
	var out domain.HostCleanupOperation
	err := w.Store.InTx(ctx, func(q *store.Q) error {
		now := time.Now()
		op := domain.HostCleanupOperation{ID: in.ID, RuntimeHostID: in.Host, Stage: in.Stage,
			PlannedRuntimeHostBytes: in.PlannedRuntimeHostBytes, RetainedExportBytes: in.RetainedExportBytes,
			RemovedRuntimeHostBytes: in.RemovedRuntimeHostBytes, CreatedAt: now, UpdatedAt: now}
		if prev, err := q.GetHostCleanup(ctx, in.ID); err == nil {
			op.CreatedAt, op.PlannedRuntimeHostBytes, op.RetainedExportBytes = prev.CreatedAt, prev.PlannedRuntimeHostBytes, prev.RetainedExportBytes
			if in.Stage == prev.Stage || domain.CleanupStages.Index(in.Stage) < domain.CleanupStages.Index(prev.Stage) {
				// A retried write of a stage already recorded (or passed) changes nothing.
				out = prev
				return nil
			}
			if in.Stage != domain.CleanupRootRemoved {
				op.RemovedRuntimeHostBytes = prev.RemovedRuntimeHostBytes
			}
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if in.Stage == domain.CleanupPrepared {
			// Persisted with the host out of service, in one transaction that re-checks the
			// scope: nothing starts on it, nothing is allocated to it, and no member woke since
			// the preflight.
			if err := quiet(ctx, q, in.Host, nil); err != nil {
				return err
			}
			if err := q.RetireHostForCleanup(ctx, in.Host, now); err != nil {
				return err
			}
		}
		if _, err := q.UpsertHostCleanup(ctx, op); err != nil {
			return err
		}
		if in.Stage == domain.CleanupSucceeded {
			if err := q.MarkHostRemoved(ctx, in.Host, now); err != nil {
				return err
			}
		}
		var err error
		out, err = q.GetHostCleanup(ctx, in.ID)
		return err
	})
	if err != nil {
		var te *domain.TransitionError
		var app *temporal.ApplicationError
		if errors.As(err, &app) {
			return out, app
		}
		if errors.Is(err, store.ErrConflict) || errors.As(err, &te) {
			return out, contract.Fail(err.Error(), domain.ErrTypeOperationRunning, err)
		}
	}
	return out, err
}

// RemoveHostRootInput names the cleanup that removes a host's root.
type RemoveHostRootInput struct {
	Cleanup uuid.UUID `json:"cleanup"`
	Host    uuid.UUID `json:"host"`
}

// RemoveHostRoot removes the host's root (workspace root, provider state, checkpoints,
// recovery), refusing unless the cleanup recorded its sandbox removed: the root is never
// removed before the sandbox that mounts it. The root is renamed to a tombstone first, so an
// interrupted removal is finished, and an absent root counts as removed (the planned bytes).
func (w *Workspaces) RemoveHostRoot(ctx context.Context, in RemoveHostRootInput) (int64, error) {
	stop := heartbeat(ctx)
	defer stop()
	op, err := w.Store.GetHostCleanup(ctx, in.Cleanup)
	if err != nil {
		return 0, err
	}
	if op.RuntimeHostID != in.Host {
		return 0, refuse("cleanup %s is not of host %s", in.Cleanup, in.Host)
	}
	if domain.CleanupStages.Index(op.Stage) < domain.CleanupStages.Index(domain.CleanupSandboxRemoved) {
		return 0, refuse("cleanup %s is %s: the root goes only after the sandbox", op.ID, op.Stage)
	}
	paths, err := workspace.ManagedPaths(w.Layout, in.Host)
	if err != nil {
		return 0, err
	}
	tomb := filepath.Join(filepath.Dir(paths.Root), "."+in.Host.String()+".removing")
	removed := op.PlannedRuntimeHostBytes
	if _, err := os.Lstat(paths.Root); err == nil {
		if removed, err = workspace.DirBytes(paths.Root); err != nil {
			return 0, err
		}
		if err := os.Rename(paths.Root, tomb); err != nil {
			return 0, fmt.Errorf("remove root of host %s: %w", in.Host, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	w.pause(ctx, "cleanup.root_renamed")
	if err := workspace.RemoveTree(tomb); err != nil {
		return 0, fmt.Errorf("remove root of host %s: %w", in.Host, err)
	}
	return removed, nil
}

// MeasureHost measures a host's root and its session workspaces on this node.
func (w *Workspaces) MeasureHost(ctx context.Context, in HostRef) (contract.HostCapacity, error) {
	out := contract.HostCapacity{WorkspaceBytes: map[uuid.UUID]int64{}}
	paths, err := workspace.ManagedPaths(w.Layout, in.Host)
	if err != nil {
		return out, err
	}
	if out.RootBytes, err = workspace.DirBytes(paths.Root); err != nil {
		return out, err
	}
	workspaces, err := w.Store.ListManagedWorkspaces(ctx, in.Host)
	if err != nil {
		return out, err
	}
	for _, ws := range workspaces {
		if ws.Source != domain.WorkspaceManaged {
			continue
		}
		if out.WorkspaceBytes[ws.ID], err = workspace.DirBytes(paths.Session(ws.RuntimeSessionID)); err != nil {
			return out, err
		}
	}
	return out, nil
}

// quiet refuses (cleanup_blocked) unless every member of the host is dormant, not live in
// this worker (live may be nil) and no operation runs on any of its workspaces.
func quiet(ctx context.Context, q *store.Q, host uuid.UUID, live func(uuid.UUID) bool) error {
	members, err := q.HostMembers(ctx, host)
	if err != nil {
		return err
	}
	for _, m := range members {
		if m.State != domain.MembershipDormant {
			return contract.Fail(fmt.Sprintf("member %s of host %s is %s", m.RuntimeSession, host, m.State),
				domain.ErrTypeCleanupBlocked, nil)
		}
		if live != nil && live(m.RuntimeSession) {
			return contract.Fail(fmt.Sprintf("member %s has a live runtime in this worker", m.RuntimeSession),
				domain.ErrTypeCleanupBlocked, nil)
		}
		if op, err := q.RunningWorkspaceOperation(ctx, m.RuntimeSession); err != nil {
			return err
		} else if op != nil {
			return contract.Fail(fmt.Sprintf("workspace %s has a running %s operation", m.RuntimeSession, op.Kind),
				domain.ErrTypeCleanupBlocked, nil)
		}
	}
	return nil
}

// CheckQuiet re-checks, right before a destructive cleanup step, that the host is still
// quiet: every member dormant and none live in this worker.
func (w *Workspaces) CheckQuiet(ctx context.Context, in HostRef) error {
	return quiet(ctx, w.Store.Q, in.Host, w.Live)
}
