package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/repo"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/workspace"
)

// cloneTemplateRepositories clones the template's repositories into a new session workspace
// before its provider starts, each as an ordinary clone operation (recorded running with its
// intent first, then finished). A repository already there (a clone of an earlier wake) is
// left alone; a failed clone fails the preparation with the clone's own error, so the
// session shows it. A template clone a crash interrupted is recorded failed and not
// replayed: its partial directory stays, and the next preparation reports it.
func (r *Runtimes) cloneTemplateRepositories(ctx context.Context, h domain.RuntimeHost, hs domain.HostSession, runner repo.Runner, dir string) error {
	if len(hs.Config.Repositories) == 0 {
		return nil
	}
	if err := r.failInterruptedTemplateClone(ctx, hs.RuntimeSessionID); err != nil {
		return err
	}
	done, err := r.clonedTemplateDirs(ctx, hs.RuntimeSessionID)
	if err != nil {
		return err
	}
	for _, tr := range hs.Config.Repositories {
		req := domain.RepoRequest{URL: tr.URL, Dir: tr.Dir}
		if err := domain.ValidateRepoRequest(domain.WorkspaceActionClone, &req); err != nil {
			return contract.Fail(fmt.Sprintf("template repository %s: %v", domain.Truncate(tr.URL, 200), err), domain.ErrTypeValidation, err)
		}
		if done[req.Dir] {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, req.Dir)); err == nil {
			return contract.Fail(fmt.Sprintf(
				"template repository %s: the workspace already holds %s that no finished clone made (an interrupted clone's partial bytes, or the agent's own); move it aside and restart the session",
				req.Dir, req.Dir), domain.ErrTypeRepoCommandFailed, nil)
		}
		if err := r.cloneTemplateRepository(ctx, h, hs, runner, dir, req); err != nil {
			return err
		}
	}
	return nil
}

func (r *Runtimes) cloneTemplateRepository(ctx context.Context, h domain.RuntimeHost, hs domain.HostSession, runner repo.Runner, dir string, req domain.RepoRequest) error {
	now := time.Now()
	intent := domain.WorkspaceOpIntent{Action: domain.WorkspaceActionClone, Repo: &req, Template: true}
	op := domain.WorkspaceOperation{ID: uuid.New(), WorkspaceID: hs.RuntimeSessionID, RuntimeHostID: h.ID,
		RuntimeSessionID: hs.RuntimeSessionID, Kind: domain.WorkspaceOpClone, State: domain.OpRunning,
		Intent: intent.Encode(), StartedAt: now, UpdatedAt: now}
	if _, err := r.Store.UpsertWorkspaceOperation(ctx, op); err != nil {
		if errors.Is(err, store.ErrConflict) {
			// Another operation runs on the workspace: this preparation retries after it.
			return fmt.Errorf("clone template repository %s: the workspace has a running operation: %w", req.Dir, err)
		}
		return err
	}
	stop := heartbeat(ctx)
	_, cerr := repo.Do(ctx, runner, dir, domain.WorkspaceActionClone, req)
	stop()
	cerr = repoError(domain.WorkspaceActionClone, cerr)
	end := time.Now()
	op.FinishedAt, op.UpdatedAt = &end, end
	op.State, op.ResultClass = domain.OpSucceeded, domain.ResultCloned
	if cerr != nil {
		var app interface{ Message() string }
		msg := "the clone failed"
		if errors.As(cerr, &app) {
			msg = app.Message()
		}
		op.State, op.ResultClass, op.Error = domain.OpFailed, domain.ResultFailed, domain.Truncate(msg, 2048)
	}
	if _, err := r.Store.UpsertWorkspaceOperation(ctx, op); err != nil {
		return errors.Join(cerr, fmt.Errorf("finish clone operation %s: %w", op.ID, err))
	}
	if cerr != nil {
		return contract.Fail(fmt.Sprintf("template repository %s could not be cloned: %s", req.Dir, op.Error), domain.ErrTypeRepoCommandFailed, cerr)
	}
	return nil
}

// failInterruptedTemplateClone: a template clone found running belongs to an earlier
// attempt of this preparation that a crash cut (this one has not started any).
func (r *Runtimes) failInterruptedTemplateClone(ctx context.Context, session uuid.UUID) error {
	running, err := r.Store.RunningWorkspaceOperation(ctx, session)
	if err != nil || running == nil {
		return err
	}
	intent, err := domain.DecodeWorkspaceOpIntent(running.Intent)
	if err != nil || !intent.Template {
		return nil
	}
	return failInterrupted(ctx, r.Store, *running, "its partial directory stays for the operator to move aside")
}

// clonedTemplateDirs are the directories a template clone of this workspace finished.
func (r *Runtimes) clonedTemplateDirs(ctx context.Context, session uuid.UUID) (map[string]bool, error) {
	ops, err := r.Store.ListWorkspaceOperations(ctx, session, 500)
	if err != nil {
		return nil, err
	}
	done := map[string]bool{}
	for _, op := range ops {
		if op.Kind != domain.WorkspaceOpClone || op.State != domain.OpSucceeded {
			continue
		}
		if in, err := domain.DecodeWorkspaceOpIntent(op.Intent); err == nil && in.Template && in.Repo != nil {
			done[in.Repo.Dir] = true
		}
	}
	return done, nil
}

// templateRepositories clones a sandboxed managed session's template repositories in its
// guest, once the host's sandbox is proven Jam's.
func (r *Runtimes) templateRepositories(ctx context.Context, h domain.RuntimeHost, hs domain.HostSession) error {
	if len(hs.Config.Repositories) == 0 {
		return nil
	}
	if src := hs.Config.Sandbox.WorkspaceSource; src != "" && src != domain.WorkspaceManaged {
		return nil
	}
	m, err := r.Sandbox.manager(ctx)
	if err != nil {
		return err
	}
	if err := m.Verify(ctx, OwnerOf(h), h.SandboxName); err != nil {
		return classify(err)
	}
	paths, err := workspace.ManagedPaths(r.Layout, h.ID)
	if err != nil {
		return err
	}
	return r.cloneTemplateRepositories(ctx, h, hs, guestRunner{d: m.Driver, name: h.SandboxName}, paths.Session(hs.RuntimeSessionID))
}
