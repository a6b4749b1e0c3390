package activities

import (
	"context"
	"errors"
	"fmt"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/temporal"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/tools"
)

// Repository runs a repository tool call as an operation on the caller's own workspace
// (its id is the runtime session's): the same WorkspaceOp an operator's request starts, so
// it is recorded first, runs once, and waits behind nothing — a workspace already busy is a
// refusal the model can act on.
func (b *ToolBackend) Repository(ctx context.Context, id tools.Identity, action domain.WorkspaceAction, req domain.RepoRequest) (domain.RepoResult, error) {
	if b.Temporal == nil {
		return domain.RepoResult{}, &tools.Refusal{Text: "Not run: repository operations are not available on this node."}
	}
	if _, err := b.Store.GetManagedWorkspace(ctx, id.RuntimeSession); errors.Is(err, store.ErrNotFound) {
		return domain.RepoResult{}, &tools.Refusal{Text: "Not run: your runtime has no managed workspace."}
	} else if err != nil {
		return domain.RepoResult{}, err
	}
	run, err := contract.Start(ctx, b.Temporal, contract.TypeWorkspaceOp, contract.WorkspaceOpID(id.RuntimeSession),
		contract.WorkspaceOpInput{Workspace: id.RuntimeSession, Action: action, Repo: &req})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return domain.RepoResult{}, &tools.Refusal{Text: "Not run: another operation is running on your workspace; try again shortly."}
	}
	if err != nil {
		return domain.RepoResult{}, err
	}
	var out contract.WorkspaceOpResult
	if err := run.Get(ctx, &out); err != nil {
		var app *temporal.ApplicationError
		if errors.As(err, &app) {
			// Refusals and git's or gh's own bounded message: what the model would have seen
			// had it run the command itself.
			return domain.RepoResult{}, &tools.Refusal{Text: fmt.Sprintf("Failed: %s", domain.Truncate(app.Message(), 2000))}
		}
		return domain.RepoResult{}, err
	}
	if out.Repository == nil {
		return domain.RepoResult{}, fmt.Errorf("workspace operation %s finished without a repository result", out.Operation.ID)
	}
	return *out.Repository, nil
}
