package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"

	"github.com/jam-dev/jam/internal/checkpoint"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/workspace"
)

// Workspaces are the byte side of workspace operations and host cleanup, on the node that
// holds the host's files: removal inspection, export, restore, pruning, removal.
type Workspaces struct {
	Store  *store.Store
	Layout domain.Layout
	// Sandbox reads the node's sandbox inventory for the cleanup preflight.
	Sandbox *Sandbox
	// PATH is the worker's PATH, on which the removal inspection finds and runs git.
	PATH string
	// Live reports whether a runtime of the session runs in this worker (nil: none does).
	Live func(session uuid.UUID) bool
	// Pause is the fault-injection point of crash tests (nil in production: see faults.go).
	Pause func(ctx context.Context, point string)
	// Fail is the failure-injection point of operator tests (nil in production).
	Fail func(point string) error
}

func (w *Workspaces) pause(ctx context.Context, point string) {
	if w.Pause != nil {
		w.Pause(ctx, point)
	}
}

func (w *Workspaces) exports() workspace.Exports { return workspace.NewExports(w.Layout) }

func refOf(ws domain.ManagedWorkspace, export uuid.UUID) contract.WorkspaceRef {
	return contract.WorkspaceRef{Workspace: ws.ID, Host: ws.RuntimeHostID, Session: ws.RuntimeSessionID, Export: export}
}

// InspectRemoval inventories the repositories of the session workspace (bounded, read-only)
// and lists what removing it would lose: uncommitted or unpushed work, or a repository that
// could not be inspected.
func (w *Workspaces) InspectRemoval(ctx context.Context, in contract.WorkspaceRef) (contract.RemovalReport, error) {
	paths, err := workspace.ManagedPaths(w.Layout, in.Host)
	if err != nil {
		return contract.RemovalReport{}, err
	}
	stop := heartbeat(ctx)
	defer stop()
	dir := paths.Session(in.Session)
	if err := liveBytes(dir, in.Workspace); err != nil {
		return contract.RemovalReport{}, err
	}
	inv, err := workspace.InspectRepositories(ctx, dir, w.PATH)
	if err != nil {
		return contract.RemovalReport{}, fmt.Errorf("inspect repositories of workspace %s: %w", in.Workspace, err)
	}
	bytes, err := workspace.DirBytes(dir)
	if err != nil {
		return contract.RemovalReport{}, err
	}
	return contract.RemovalReport{Repositories: inv, Blockers: inv.Blockers(), Bytes: bytes}, nil
}

// CreateExport copies the session workspace and the newest checkpoint generation that holds
// the session (verified) into an immutable export under the id the operation recorded. An
// exact retry verifies and returns the export already committed. The record returned is
// derived from the export's manifest, so a retried publication is identical.
func (w *Workspaces) CreateExport(ctx context.Context, in contract.WorkspaceRef) (domain.WorkspaceExport, error) {
	if in.Export == uuid.Nil {
		return domain.WorkspaceExport{}, contract.Fail("export id is required", domain.ErrTypeValidation, nil)
	}
	paths, err := workspace.ManagedPaths(w.Layout, in.Host)
	if err != nil {
		return domain.WorkspaceExport{}, err
	}
	if w.Fail != nil {
		if err := w.Fail("export.create"); err != nil {
			return domain.WorkspaceExport{}, err
		}
	}
	stop := heartbeat(ctx)
	defer stop()
	src := workspace.ExportSource{Workspace: paths.Session(in.Session)}
	ex := w.exports()
	existed, err := ex.Exists(in.Export)
	if err != nil {
		return domain.WorkspaceExport{}, err
	}
	if !existed {
		if err := liveBytes(src.Workspace, in.Workspace); err != nil {
			return domain.WorkspaceExport{}, err
		}
		// Only a new export chooses its checkpoint; a committed one keeps what it holds.
		ck, err := w.newestCheckpointOf(ctx, paths, in.Host, in.Session)
		if err != nil {
			return domain.WorkspaceExport{}, err
		}
		if ck != uuid.Nil {
			src.CheckpointID, src.Checkpoint = ck, checkpoint.Store{Root: paths.Checkpoints()}.Dir(ck)
		}
	} else {
		m, err := ex.Stat(in.Export)
		if err != nil {
			return domain.WorkspaceExport{}, exportError(err)
		}
		if m.CheckpointID != nil {
			src.CheckpointID = *m.CheckpointID
		}
	}
	m, err := ex.Create(in.Export, workspace.ExportOwner{Workspace: in.Workspace, Host: in.Host, Session: in.Session}, src)
	if err == nil && existed {
		// A retry verifies what an earlier attempt committed, byte for byte.
		m, err = ex.Verify(in.Export)
	}
	if err != nil && activity.GetInfo(ctx).Attempt >= maxExportAttempts {
		// A workspace that keeps changing under the copy (a session writing to it) is
		// refused rather than retried for ever with the operation holding the workspace.
		return domain.WorkspaceExport{}, contract.Fail(
			fmt.Sprintf("workspace %s could not be exported after %d attempts; stop its session and try again", in.Workspace, maxExportAttempts),
			domain.ErrTypeWorkspaceRefused, err)
	}
	if err != nil {
		return domain.WorkspaceExport{}, exportError(err)
	}
	w.pause(ctx, "export.committed")
	return exportRecord(m), nil
}

// maxExportAttempts bounds the retries of one export.
const maxExportAttempts = 5

// liveBytes refuses a step that needs the live workspace when it has none (an archived
// workspace whose bytes were removed).
func liveBytes(dir string, ws uuid.UUID) error {
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return refuse("workspace %s has no live bytes (archived); restore it first", ws)
	} else if err != nil {
		return err
	}
	return nil
}

func exportRecord(m workspace.ExportManifest) domain.WorkspaceExport {
	return domain.WorkspaceExport{ID: m.ID, WorkspaceID: m.Owner.Workspace, RuntimeHostID: m.Owner.Host,
		RuntimeSessionID: m.Owner.Session, CheckpointID: m.CheckpointID, ManifestChecksum: m.Checksum,
		Bytes: m.Bytes, CreatedAt: m.CreatedAt}
}

func exportError(err error) error {
	var msg string
	switch {
	case errors.Is(err, workspace.ErrExportConflict):
		msg = "an export with another owner or checkpoint exists under this id"
	case errors.Is(err, workspace.ErrExportTooLarge):
		msg = "the workspace exceeds the export limits (200,000 entries, 64 GiB, depth 64)"
	case errors.Is(err, workspace.ErrExportCorrupt):
		msg = "the export does not verify against its manifest"
	case errors.Is(err, workspace.ErrExportMissing):
		msg = "the export is missing on this node"
	case errors.Is(err, workspace.ErrDestinationExists):
		msg = "the destination exists; a restore never writes over it"
	default:
		return err
	}
	// The message is fixed (it reaches the API and the record); the cause, with its paths,
	// stays in the worker's log and the workflow history.
	return contract.Fail(msg, domain.ErrTypeWorkspaceRefused, err)
}

// newestCheckpointOf is the newest kept generation of the host that captured the session and
// verifies on this disk; Nil when there is none.
func (w *Workspaces) newestCheckpointOf(ctx context.Context, paths workspace.Paths, host, session uuid.UUID) (uuid.UUID, error) {
	all, err := w.Store.ListCheckpoints(ctx, host)
	if err != nil {
		return uuid.Nil, err
	}
	gens := checkpoint.Store{Root: paths.Checkpoints()}
	for _, k := range all {
		if k.PayloadDeletedAt != nil || !captured(k, session) {
			continue
		}
		insp, err := gens.Inspect(k.ID)
		if err != nil {
			return uuid.Nil, err
		}
		if insp.Status == checkpoint.StatusComplete && insp.Manifest.Checksum == k.ManifestChecksum {
			return k.ID, nil
		}
	}
	return uuid.Nil, nil
}

func captured(k domain.ProviderCheckpoint, session uuid.UUID) bool {
	for _, s := range k.Sessions {
		if s.RuntimeSession == session {
			return true
		}
	}
	return false
}

// PruneExportsInput keeps one export of a workspace and deletes the others.
type PruneExportsInput struct {
	Workspace uuid.UUID `json:"workspace"`
	Keep      uuid.UUID `json:"keep"`
}

// PruneExports deletes every other export of the workspace (archive retention keep_latest):
// bytes first, then the record's deleted_at. Each step is idempotent.
func (w *Workspaces) PruneExports(ctx context.Context, in PruneExportsInput) (int, error) {
	stop := heartbeat(ctx)
	defer stop()
	all, err := w.Store.ListWorkspaceExports(ctx, in.Workspace)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range all {
		if e.ID == in.Keep || e.DeletedAt != nil {
			continue
		}
		if err := w.exports().Remove(e.ID); err != nil {
			return n, err
		}
		if err := w.Store.MarkExportDeleted(ctx, e.ID, time.Now()); err != nil {
			return n, err
		}
		n++
	}
	w.pause(ctx, "archive.pruned")
	return n, nil
}

// RemoveSessionBytes removes the live session workspace, only after the export that
// preserves it verifies byte for byte. Shared siblings are never touched; an absent
// workspace is already removed.
func (w *Workspaces) RemoveSessionBytes(ctx context.Context, in contract.WorkspaceRef) error {
	stop := heartbeat(ctx)
	defer stop()
	m, err := w.exports().Verify(in.Export)
	if err != nil {
		return exportError(err)
	}
	if m.Owner.Workspace != in.Workspace || m.Owner.Host != in.Host || m.Owner.Session != in.Session {
		return refuse("export %s does not preserve workspace %s", in.Export, in.Workspace)
	}
	paths, err := workspace.ManagedPaths(w.Layout, in.Host)
	if err != nil {
		return err
	}
	if err := workspace.RemoveSessionWorkspace(paths, in.Session); err != nil {
		return err
	}
	w.pause(ctx, "archive.bytes_removed")
	return nil
}

// RestoreExport proves the export is this workspace's, then restores its checkpoint
// generation (when the host lost it) and its workspace through a private staging directory.
// The destination must not exist.
func (w *Workspaces) RestoreExport(ctx context.Context, in contract.WorkspaceRef) error {
	rec, err := w.Store.GetWorkspaceExport(ctx, in.Export)
	if errors.Is(err, store.ErrNotFound) {
		return refuse("export %s has no record", in.Export)
	}
	if err != nil {
		return err
	}
	if rec.WorkspaceID != in.Workspace || rec.RuntimeHostID != in.Host || rec.RuntimeSessionID != in.Session {
		return refuse("export %s belongs to another workspace, host or session", in.Export)
	}
	ex := w.exports()
	stop := heartbeat(ctx)
	defer stop()
	m, err := ex.Verify(in.Export)
	if err != nil {
		return exportError(err)
	}
	if m.Checksum != rec.ManifestChecksum || m.Owner.Workspace != in.Workspace || m.Owner.Host != in.Host || m.Owner.Session != in.Session {
		return refuse("export %s on disk is not the one recorded", in.Export)
	}
	paths, err := workspace.ManagedPaths(w.Layout, in.Host)
	if err != nil {
		return err
	}
	dest := paths.Session(in.Session)
	if _, err := os.Lstat(dest); err == nil {
		// Our own restore whose answer was lost holds exactly the export; anything else is
		// never written over.
		same, err := ex.MatchesWorkspace(in.Export, dest)
		if err != nil {
			return err
		}
		if !same {
			return refuse("the destination of workspace %s exists; restore never writes over it", in.Workspace)
		}
	}
	if m.CheckpointID != nil {
		gens := checkpoint.Store{Root: paths.Checkpoints()}
		if _, err := ex.RestoreCheckpoint(in.Export, gens.Dir(*m.CheckpointID)); err != nil {
			return exportError(err)
		}
		if k, err := w.Store.GetCheckpoint(ctx, *m.CheckpointID); err == nil && k.PayloadDeletedAt != nil {
			// The generation is back on disk: once it verifies, its record says so again.
			if insp, err := gens.Inspect(k.ID); err == nil && insp.Status == checkpoint.StatusComplete && insp.Manifest.Checksum == k.ManifestChecksum {
				if err := w.Store.RestoreCheckpointPayload(ctx, k.ID); err != nil {
					return err
				}
			}
		} else if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	if _, err := os.Lstat(dest); err == nil {
		return nil
	}
	// Staged under the host's recovery directory, which no sandbox mounts, then renamed in.
	if err := ex.RestoreWorkspaceVia(in.Export, dest, paths.Recovery()); err != nil {
		return exportError(err)
	}
	return nil
}

// DeleteExportBytes removes one export's bytes (an absent export is already removed); the
// record's deleted_at follows.
func (w *Workspaces) DeleteExportBytes(ctx context.Context, in contract.WorkspaceRef) error {
	stop := heartbeat(ctx)
	defer stop()
	if err := w.exports().Remove(in.Export); err != nil {
		return err
	}
	w.pause(ctx, "export_delete.bytes_removed")
	return w.Store.MarkExportDeleted(ctx, in.Export, time.Now())
}
