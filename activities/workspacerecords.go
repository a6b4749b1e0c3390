package activities

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
)

func refuse(format string, args ...any) error {
	return contract.Fail(fmt.Sprintf(format, args...), domain.ErrTypeWorkspaceRefused, nil)
}

// WorkspaceRecords are the store side of workspace operations and host cleanup (jam queue).
type WorkspaceRecords struct {
	Store *store.Store
}

// BeginWorkspaceOpInput is one requested workspace operation.
type BeginWorkspaceOpInput struct {
	Workspace    uuid.UUID               `json:"workspace"`
	Action       domain.WorkspaceAction  `json:"action"`
	ExportID     uuid.UUID               `json:"export_id,omitempty"`
	Retention    domain.ArchiveRetention `json:"retention,omitempty"`
	ForceDiscard bool                    `json:"force_discard,omitempty"`
	Repo         *domain.RepoRequest     `json:"repo,omitempty"`
}

// BeginWorkspaceOpResult is the running operation the workflow carries out: a new one, or
// the interrupted one it resumes (Resumed).
type BeginWorkspaceOpResult struct {
	Op        domain.WorkspaceOperation `json:"op"`
	Intent    domain.WorkspaceOpIntent  `json:"intent"`
	Workspace domain.ManagedWorkspace   `json:"workspace"`
	Host      domain.RuntimeHost        `json:"host"`
	Resumed   bool                      `json:"resumed"`
	// ExportRecorded: the export the intent names is already published (a resumed archive
	// past its export).
	ExportRecorded bool `json:"export_recorded,omitempty"`
	// Done: a retry_reconcile found nothing running; Op is the finished record of that check.
	Done bool `json:"done,omitempty"`
}

// BeginWorkspaceOp persists the Running operation before anything happens to the workspace.
// A running operation of the same request, or any with retry_reconcile, is resumed from its
// stored intent (so an interrupted archive finishes instead of starting over); any other
// running operation refuses the request. Preconditions are checked on the records here and
// again on the bytes by the node.
func (w *WorkspaceRecords) BeginWorkspaceOp(ctx context.Context, in BeginWorkspaceOpInput) (BeginWorkspaceOpResult, error) {
	ws, err := w.Store.GetManagedWorkspace(ctx, in.Workspace)
	if errors.Is(err, store.ErrNotFound) {
		return BeginWorkspaceOpResult{}, refuse("workspace %s does not exist", in.Workspace)
	}
	if err != nil {
		return BeginWorkspaceOpResult{}, err
	}
	host, err := w.Store.GetRuntimeHost(ctx, ws.RuntimeHostID)
	if err != nil {
		return BeginWorkspaceOpResult{}, err
	}
	out := BeginWorkspaceOpResult{Workspace: ws, Host: host}
	running, err := w.Store.RunningWorkspaceOperation(ctx, ws.ID)
	if err != nil {
		return out, err
	}
	if running, err = w.failInterruptedRepoOp(ctx, running); err != nil {
		return out, err
	}
	if running != nil {
		intent, err := domain.DecodeWorkspaceOpIntent(running.Intent)
		if err != nil {
			return out, contract.Fail(err.Error(), domain.ErrTypeValidation, err)
		}
		if in.Action != domain.WorkspaceActionRetryReconcile && !sameRequest(in, intent) {
			return out, contract.Fail(
				fmt.Sprintf("workspace %s has a running %s operation %s; retry_reconcile finishes it", ws.ID, running.Kind, running.ID),
				domain.ErrTypeOperationRunning, nil)
		}
		out.Op, out.Intent, out.Resumed = *running, intent, true
		if intent.Action == domain.WorkspaceActionArchive || intent.Action == domain.WorkspaceActionExport {
			if _, err := w.Store.GetWorkspaceExport(ctx, intent.ExportID); err == nil {
				out.ExportRecorded = true
			} else if !errors.Is(err, store.ErrNotFound) {
				return out, err
			}
		}
		return out, nil
	}
	intent := domain.WorkspaceOpIntent{Action: in.Action, ExportID: in.ExportID, Retention: in.Retention, ForceDiscard: in.ForceDiscard, Repo: in.Repo}
	if err := w.admit(ctx, ws, host, &intent); err != nil {
		return out, err
	}
	now := time.Now()
	op := domain.WorkspaceOperation{ID: uuid.New(), WorkspaceID: ws.ID, RuntimeHostID: ws.RuntimeHostID,
		RuntimeSessionID: ws.RuntimeSessionID, Kind: intent.Action.OpKind(), State: domain.OpRunning,
		Intent: intent.Encode(), StartedAt: now, UpdatedAt: now}
	if intent.Action == domain.WorkspaceActionRetryReconcile {
		// Nothing was interrupted: the check itself is the (finished) operation.
		op.State, op.ResultClass, op.FinishedAt, out.Done = domain.OpSucceeded, domain.ResultReconciled, &now, true
	}
	if _, err := w.Store.UpsertWorkspaceOperation(ctx, op); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return out, contract.Fail(
				fmt.Sprintf("workspace %s has a running operation", ws.ID), domain.ErrTypeOperationRunning, err)
		}
		return out, err
	}
	op, err = w.Store.GetWorkspaceOperation(ctx, op.ID)
	out.Op, out.Intent = op, intent
	return out, err
}

// sameRequest: asking again for what the running operation does resumes it.
func sameRequest(in BeginWorkspaceOpInput, running domain.WorkspaceOpIntent) bool {
	if in.Action != running.Action {
		return false
	}
	switch in.Action {
	case domain.WorkspaceActionRestore, domain.WorkspaceActionDeleteExport:
		return in.ExportID == uuid.Nil || in.ExportID == running.ExportID
	case domain.WorkspaceActionArchive:
		retention := in.Retention
		if retention == "" {
			retention = domain.RetainLatest
		}
		return retention == running.Retention && in.ForceDiscard == running.ForceDiscard
	}
	return true
}

// admit checks a new request against the records and completes its intent (the export an
// archive or export will create; the latest export a restore means).
func (w *WorkspaceRecords) admit(ctx context.Context, ws domain.ManagedWorkspace, host domain.RuntimeHost, intent *domain.WorkspaceOpIntent) error {
	managed := ws.Source == domain.WorkspaceManaged
	switch intent.Action {
	case domain.WorkspaceActionArchive, domain.WorkspaceActionExport:
		if !managed {
			return refuse("workspace %s is %s: Jam does not own its bytes", ws.ID, ws.Source)
		}
		// An archived workspace may still hold live bytes (a continuity reset archives its
		// records only); the node refuses when it has none.
		if intent.Action == domain.WorkspaceActionArchive && intent.Retention == "" {
			intent.Retention = domain.RetainLatest
		}
		intent.ExportID = uuid.New()
	case domain.WorkspaceActionRestore:
		if !managed {
			return refuse("workspace %s is %s: Jam does not own its bytes", ws.ID, ws.Source)
		}
		e, err := w.pickExport(ctx, ws, intent.ExportID)
		if err != nil {
			return err
		}
		if e.WorkspaceID != ws.ID || e.RuntimeHostID != ws.RuntimeHostID || e.RuntimeSessionID != ws.RuntimeSessionID {
			return refuse("export %s belongs to another workspace, host or session", e.ID)
		}
		if ws.State != domain.WorkspaceArchived {
			return refuse("workspace %s is %s, not archived: its destination exists", ws.ID, ws.State)
		}
		if op, err := w.Store.HostCleanupOfHost(ctx, host.ID); err == nil && op.Stage != domain.CleanupSucceeded {
			return refuse("runtime host %s is being cleaned up (%s); restore once the cleanup is done", host.ID, op.Stage)
		} else if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err := w.revivable(ctx, host); err != nil {
			return err
		}
		intent.ExportID = e.ID
	case domain.WorkspaceActionDeleteExport:
		e, err := w.Store.GetWorkspaceExport(ctx, intent.ExportID)
		if errors.Is(err, store.ErrNotFound) || (err == nil && e.WorkspaceID != ws.ID) {
			return refuse("export %s is not an export of workspace %s", intent.ExportID, ws.ID)
		}
		if err != nil {
			return err
		}
		if ws.State != domain.WorkspaceArchived {
			return refuse("workspace %s is %s: exports are deleted only once it is archived", ws.ID, ws.State)
		}
		if e.DeletedAt != nil {
			return refuse("export %s is already deleted", e.ID)
		}
	case domain.WorkspaceActionRetryReconcile:
	case domain.WorkspaceActionClone, domain.WorkspaceActionBranch, domain.WorkspaceActionCommit, domain.WorkspaceActionPush,
		domain.WorkspaceActionPullRequest, domain.WorkspaceActionChecks:
		return w.admitRepo(ctx, ws, host, intent)
	default:
		return refuse("unknown action %q", intent.Action)
	}
	return nil
}

func (w *WorkspaceRecords) pickExport(ctx context.Context, ws domain.ManagedWorkspace, id uuid.UUID) (domain.WorkspaceExport, error) {
	if id != uuid.Nil {
		e, err := w.Store.GetWorkspaceExport(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return e, refuse("export %s does not exist", id)
		}
		if err == nil && e.DeletedAt != nil {
			return e, refuse("export %s was deleted", id)
		}
		return e, err
	}
	all, err := w.Store.ListWorkspaceExports(ctx, ws.ID)
	if err != nil {
		return domain.WorkspaceExport{}, err
	}
	for _, e := range all {
		if e.DeletedAt == nil {
			return e, nil
		}
	}
	return domain.WorkspaceExport{}, refuse("workspace %s has no export to restore", ws.ID)
}

// FinishWorkspaceOpInput ends an operation, setting the workspace's (and host's) state in
// the same transaction when asked.
type FinishWorkspaceOpInput struct {
	Op             uuid.UUID               `json:"op"`
	State          domain.WorkspaceOpState `json:"state"`
	ResultClass    string                  `json:"result_class"`
	Error          string                  `json:"error,omitempty"`
	WorkspaceState domain.WorkspaceState   `json:"workspace_state,omitempty"`
	// ReviveHost returns an archived or removed host to parked (a restore).
	ReviveHost bool `json:"revive_host,omitempty"`
}

// maxOpError bounds the error text an operation record keeps.
const maxOpError = 512

// FinishWorkspaceOp records an operation's outcome. An already identical outcome changes
// nothing (a retried finish); a different one is a transition error.
func (w *WorkspaceRecords) FinishWorkspaceOp(ctx context.Context, in FinishWorkspaceOpInput) (domain.WorkspaceOperation, error) {
	var out domain.WorkspaceOperation
	err := w.Store.InTx(ctx, func(q *store.Q) error {
		op, err := q.GetWorkspaceOperation(ctx, in.Op)
		if err != nil {
			return err
		}
		if op.State.Terminal() {
			out = op
			return nil
		}
		now := time.Now()
		if in.WorkspaceState != "" {
			if err := q.SetWorkspaceState(ctx, op.WorkspaceID, in.WorkspaceState, now); err != nil {
				return err
			}
		}
		if in.ReviveHost {
			if err := q.ReviveHost(ctx, op.RuntimeHostID, now); err != nil {
				return err
			}
		}
		op.State, op.ResultClass, op.UpdatedAt = in.State, in.ResultClass, now
		op.Error = boundText(in.Error, maxOpError)
		op.FinishedAt = &now
		if _, err := q.UpsertWorkspaceOperation(ctx, op); err != nil {
			return err
		}
		out, err = q.GetWorkspaceOperation(ctx, op.ID)
		return err
	})
	return out, err
}

func boundText(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n]
	}
	return s
}

// SetWorkspaceStateInput sets a workspace's lifecycle state.
type SetWorkspaceStateInput struct {
	Workspace uuid.UUID             `json:"workspace"`
	State     domain.WorkspaceState `json:"state"`
}

// SetWorkspaceState records a workspace's state (removal_blocked after a blocked archive).
func (w *WorkspaceRecords) SetWorkspaceState(ctx context.Context, in SetWorkspaceStateInput) error {
	return w.Store.SetWorkspaceState(ctx, in.Workspace, in.State, time.Now())
}

// RecordExport publishes an export's record after its bytes were committed. An exact retry
// changes nothing; a different record under the id is refused.
func (w *WorkspaceRecords) RecordExport(ctx context.Context, e domain.WorkspaceExport) error {
	if _, err := w.Store.InsertWorkspaceExport(ctx, e); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return contract.Fail(err.Error(), domain.ErrTypeValidation, err)
		}
		return err
	}
	return nil
}

// MarkDormantInput names a member whose membership goes dormant.
type MarkDormantInput struct {
	RuntimeSession uuid.UUID `json:"runtime_session"`
}

// MarkDormant sets a member's membership dormant (an archived session holds no lease).
func (w *WorkspaceRecords) MarkDormant(ctx context.Context, in MarkDormantInput) error {
	err := w.Store.SetMembershipState(ctx, in.RuntimeSession, domain.MembershipDormant, time.Now())
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// revivable refuses a restore onto a retired Shared host while the agent has another live
// Shared host: at most one live Shared host per agent.
func (w *WorkspaceRecords) revivable(ctx context.Context, host domain.RuntimeHost) error {
	if host.Placement != domain.PlacementShared || (host.State != domain.HostArchived && host.State != domain.HostRemoved) {
		return nil
	}
	hosts, err := w.Store.ListRuntimeHosts(ctx, &host.AgentID)
	if err != nil {
		return err
	}
	for _, h := range hosts {
		if h.ID != host.ID && h.Placement == domain.PlacementShared && h.State != domain.HostArchived && h.State != domain.HostRemoved {
			return refuse("runtime host %s is %s and the agent now has another live Shared host %s", host.ID, host.State, h.ID)
		}
	}
	return nil
}

// failInterruptedRepoOp ends a repository operation found running as Failed: the caller
// holds the workspace's one WorkspaceOp workflow, so nothing is running it any more — a
// crash cut it, and a push or pull request is never replayed from its intent. Anything else
// running is returned as it was.
func (w *WorkspaceRecords) failInterruptedRepoOp(ctx context.Context, running *domain.WorkspaceOperation) (*domain.WorkspaceOperation, error) {
	if running == nil {
		return nil, nil
	}
	intent, err := domain.DecodeWorkspaceOpIntent(running.Intent)
	if err != nil || !intent.Action.IsRepoAction() || intent.Template {
		// A template clone is run by the runtime's preparation, which finishes it (or, after
		// a crash, fails it) itself.
		return running, nil
	}
	return nil, failInterrupted(ctx, w.Store, *running, "check the repository and ask again")
}

// failInterrupted records a repository operation a crash cut as Failed (interrupted): it
// is never replayed from its intent.
func failInterrupted(ctx context.Context, st *store.Store, op domain.WorkspaceOperation, advice string) error {
	now := time.Now()
	op.State, op.ResultClass, op.FinishedAt, op.UpdatedAt = domain.OpFailed, domain.ResultInterrupted, &now, now
	op.Error = "interrupted before it finished (the worker running it stopped); it is not replayed: " + advice
	if _, err := st.UpsertWorkspaceOperation(ctx, op); err != nil {
		return fmt.Errorf("fail interrupted %s operation %s: %w", op.Kind, op.ID, err)
	}
	return nil
}

// admitRepo checks a repository operation against the records: a managed workspace with
// live bytes, its request valid, a commit's author the agent the workspace belongs to.
func (w *WorkspaceRecords) admitRepo(ctx context.Context, ws domain.ManagedWorkspace, host domain.RuntimeHost, intent *domain.WorkspaceOpIntent) error {
	if ws.Source != domain.WorkspaceManaged {
		return refuse("workspace %s is %s: repository operations run in managed workspaces", ws.ID, ws.Source)
	}
	if ws.State == domain.WorkspaceArchived {
		return refuse("workspace %s is archived: restore it before working in it", ws.ID)
	}
	if intent.Repo == nil {
		return contract.Fail("a repository operation needs its request", domain.ErrTypeValidation, nil)
	}
	req := *intent.Repo
	if intent.Action == domain.WorkspaceActionCommit {
		a, err := w.Store.GetAgent(ctx, host.AgentID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		a.ID = host.AgentID
		req.AuthorName, req.AuthorEmail = domain.RepoAuthor(a)
	}
	if err := domain.ValidateRepoRequest(intent.Action, &req); err != nil {
		return contract.Fail(err.Error(), domain.ErrTypeValidation, err)
	}
	intent.Repo = &req
	return nil
}
