package roomctl

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
)

// Hosts drives the RuntimeHost workflows and, for a host control, the RoomSession workflows
// of its members. It is the activities' HostLeases and MemberControl (activities cannot
// import the workflows) and the API's host control.
type Hosts struct {
	Client client.Client
}

var (
	_ contract.HostLeases    = (*Hosts)(nil)
	_ contract.MemberControl = (*Hosts)(nil)
)

// ErrMemberNotStopped: a host control's member kept its runtime (its teardown failed).
var ErrMemberNotStopped = errors.New("member not stopped")

// hostStart starts RuntimeHost:<host> or uses the running one.
func hostStart(host uuid.UUID) client.StartWorkflowOptions {
	return contract.TaggedStart(client.StartWorkflowOptions{
		ID:                       contract.RuntimeHostID(host),
		TaskQueue:                contract.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, contract.TypeRuntimeHost, contract.RuntimeHostInput{Host: host})
}

// updateHost sends an update to the host's workflow, starting it when it is not running,
// and waits for its result.
func (h *Hosts) updateHost(ctx context.Context, updateID string, host uuid.UUID, name string, arg any, out any) error {
	handle, err := h.sendHostUpdate(ctx, updateID, host, name, arg, client.WorkflowUpdateStageCompleted)
	if err != nil {
		return err
	}
	if err := handle.Get(ctx, out); err != nil {
		return fmt.Errorf("%s runtime host %s: %w", name, host, err)
	}
	return nil
}

// StartUpdate sends an update to the host's workflow (starting it when it is not running)
// and returns the run once the host accepted it: a long operation follows the rest.
func (h *Hosts) StartUpdate(ctx context.Context, host uuid.UUID, updateID, name string, arg any) (string, error) {
	handle, err := h.sendHostUpdate(ctx, updateID, host, name, arg, client.WorkflowUpdateStageAccepted)
	if err != nil {
		return "", err
	}
	return handle.RunID(), nil
}

func (h *Hosts) sendHostUpdate(ctx context.Context, updateID string, host uuid.UUID, name string, arg any,
	stage client.WorkflowUpdateStage) (client.WorkflowUpdateHandle, error) {
	op := h.Client.NewWithStartWorkflowOperation(hostStart(host), contract.TypeRuntimeHost, contract.RuntimeHostInput{Host: host})
	args := []any{}
	if arg != nil {
		args = append(args, arg)
	}
	handle, err := h.Client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: op,
		UpdateOptions: client.UpdateWorkflowOptions{UpdateID: updateID, WorkflowID: contract.RuntimeHostID(host), UpdateName: name,
			Args: args, WaitForStage: stage},
	})
	if err != nil {
		return nil, fmt.Errorf("%s runtime host %s: %w", name, host, err)
	}
	return handle, nil
}

// Acquire takes the member's lease; the sandbox is ready when it returns.
func (h *Hosts) Acquire(ctx context.Context, updateID string, host, session uuid.UUID, node string) (contract.HostLease, error) {
	var out contract.HostLease
	err := h.updateHost(ctx, updateID, host, contract.UpdateAcquire, contract.LeaseRequest{RuntimeSession: session, Node: node}, &out)
	return out, err
}

// Release drops the member's lease. A host whose workflow is not running holds no lease.
func (h *Hosts) Release(ctx context.Context, updateID string, host, session uuid.UUID, reason domain.CheckpointReason) error {
	err := h.update(ctx, updateID, host, contract.UpdateRelease, contract.LeaseRequest{RuntimeSession: session, Reason: reason})
	if contract.IsNotFound(err) {
		return nil
	}
	return err
}

// Permit takes a turn permit for the member; it waits while a checkpoint holds the host.
func (h *Hosts) Permit(ctx context.Context, updateID string, host, session uuid.UUID) error {
	return h.update(ctx, updateID, host, contract.UpdatePermit, contract.LeaseRequest{RuntimeSession: session})
}

// Unpermit returns the member's turn permit.
func (h *Hosts) Unpermit(ctx context.Context, updateID string, host, session uuid.UUID) error {
	return h.update(ctx, updateID, host, contract.UpdateUnpermit, contract.LeaseRequest{RuntimeSession: session})
}

// Settle: see contract.HostLeases. It starts no host workflow: one not running has no park
// in progress and no turn since its last run's checkpoints.
func (h *Hosts) Settle(ctx context.Context, updateID string, host uuid.UUID) error {
	handle, err := h.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{UpdateID: updateID, WorkflowID: contract.RuntimeHostID(host),
		UpdateName: contract.UpdateSettle, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err == nil {
		err = handle.Get(ctx, nil)
	}
	if contract.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("settle runtime host %s: %w", host, err)
	}
	return nil
}

// update sends a member's update to a running host workflow.
func (h *Hosts) update(ctx context.Context, updateID string, host uuid.UUID, name string, req contract.LeaseRequest) error {
	handle, err := h.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{UpdateID: updateID, WorkflowID: contract.RuntimeHostID(host),
		UpdateName: name, Args: []any{req},
		WaitForStage: client.WorkflowUpdateStageCompleted})
	if err == nil {
		err = handle.Get(ctx, nil)
	}
	if err != nil {
		return fmt.Errorf("%s runtime host %s: %w", name, host, err)
	}
	return nil
}

// Control runs a host-scope control and returns every member it affected.
func (h *Hosts) Control(ctx context.Context, host uuid.UUID, req contract.ControlRequest) (contract.ControlResult, error) {
	var out contract.ControlResult
	err := h.updateHost(ctx, "", host, contract.UpdateControl, req, &out)
	return out, err
}

// Checkpoint captures a manual checkpoint of the host with every member's turn quiesced.
func (h *Hosts) Checkpoint(ctx context.Context, host uuid.UUID) (contract.CaptureCheckpointResult, error) {
	var out contract.CaptureCheckpointResult
	err := h.updateHost(ctx, "", host, contract.UpdateCheckpoint, nil, &out)
	return out, err
}

// Status queries a host's lease state; a host whose workflow is not running has none.
func (h *Hosts) Status(ctx context.Context, host uuid.UUID) (contract.RuntimeHostStatus, bool, error) {
	v, err := h.Client.QueryWorkflow(ctx, contract.RuntimeHostID(host), "", contract.QueryHost)
	if contract.IsNotFound(err) {
		return contract.RuntimeHostStatus{}, false, nil
	}
	if err != nil {
		return contract.RuntimeHostStatus{}, false, fmt.Errorf("query runtime host %s: %w", host, err)
	}
	var out contract.RuntimeHostStatus
	if err := v.Get(&out); err != nil {
		return contract.RuntimeHostStatus{}, false, fmt.Errorf("query runtime host %s: %w", host, err)
	}
	return out, true, nil
}

// StopMember stops a member's runtime and reports whether it was live. A member with no
// running workflow was not live.
func (h *Hosts) StopMember(ctx context.Context, updateID string, session uuid.UUID, reason domain.SessionStopReason) (bool, error) {
	s := Starter{Client: h.Client}
	before, err := s.State(ctx, session)
	if contract.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	after, err := s.UpdateWithID(ctx, updateID, session, contract.UpdateStop, contract.StopRequest{Reason: string(reason)})
	if err != nil {
		if contract.IsNotFound(err) || contract.Is(err, domain.ErrTypeRetired) {
			return false, nil
		}
		return false, err
	}
	if after.Leased {
		// Its teardown failed: a child may still run on the host, which must not be parked
		// or destroyed under it.
		return false, fmt.Errorf("%w: member %s could not be torn down: %s", ErrMemberNotStopped, session, after.LastError)
	}
	return before.Phase == domain.PhaseLive || before.Phase == domain.PhaseStarting, nil
}

// RetireMember ends a replaced session's workflow; one already gone is done.
func (h *Hosts) RetireMember(ctx context.Context, updateID string, session uuid.UUID) error {
	s := Starter{Client: h.Client}
	_, err := s.UpdateWithID(ctx, updateID, session, contract.UpdateRemove, contract.RemoveRequest{Final: true})
	if err != nil && !contract.IsNotFound(err) {
		return err
	}
	return nil
}

// Wake starts or pokes the workflow of a bound session.
func (h *Hosts) Wake(ctx context.Context, b domain.Binding) error {
	return (&Starter{Client: h.Client}).Poke(ctx, b)
}

// RestartMember asks the member to come back live; it returns once the workflow accepted the
// request, not when the runtime is up (the runtime needs this host, which is busy answering).
func (h *Hosts) RestartMember(ctx context.Context, session uuid.UUID) error {
	_, err := h.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: contract.RoomSessionID(session),
		UpdateName: contract.UpdateRestart, Args: []any{contract.RestartRequest{}},
		WaitForStage: client.WorkflowUpdateStageAccepted})
	if err != nil && !contract.IsNotFound(err) {
		return fmt.Errorf("restart room session %s: %w", session, err)
	}
	return nil
}

// ApplyConfig asks a member's workflow to apply configuration generation gen and waits until
// it did (or failed, recorded on the session). A session with no workflow, or a retired one,
// has no runtime to replace: handled=false.
func (h *Hosts) ApplyConfig(ctx context.Context, updateID string, session uuid.UUID, gen int64) (bool, error) {
	s := Starter{Client: h.Client}
	_, err := s.UpdateWithID(ctx, updateID, session, contract.UpdateApplyConfig, contract.ApplyConfigRequest{Generation: gen})
	if contract.IsNotFound(err) || contract.Is(err, domain.ErrTypeRetired) {
		return false, nil
	}
	return err == nil, err
}

// Replace recreates a host for a template edit that changed its compatibility fingerprint:
// a reset_sandbox control carrying the replacement.
func (h *Hosts) Replace(ctx context.Context, updateID string, rep contract.CommitHostReplacementInput) (bool, error) {
	var out contract.ControlResult
	err := h.updateHost(ctx, updateID, rep.Host, contract.UpdateControl,
		contract.ControlRequest{Action: string(domain.HostResetSandbox), Replacement: &rep}, &out)
	return out.Replaced, err
}
