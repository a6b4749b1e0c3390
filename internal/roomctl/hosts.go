package roomctl

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/workflows"
)

// Hosts drives the RuntimeHost workflows and, for a host control, the RoomSession workflows
// of its members. It is the activities' HostLeases and MemberControl (activities cannot
// import the workflows) and the API's host control.
type Hosts struct {
	Client client.Client
}

var (
	_ activities.HostLeases    = (*Hosts)(nil)
	_ activities.MemberControl = (*Hosts)(nil)
)

// ErrMemberNotStopped: a host control's member kept its runtime (its teardown failed).
var ErrMemberNotStopped = errors.New("member not stopped")

// hostStart starts RuntimeHost:<host> or uses the running one.
func hostStart(host uuid.UUID) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       workflows.RuntimeHostID(host),
		TaskQueue:                workflows.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}
}

// updateHost sends an update to the host's workflow, starting it when it is not running.
func (h *Hosts) updateHost(ctx context.Context, updateID string, host uuid.UUID, name string, arg any, out any) error {
	op := h.Client.NewWithStartWorkflowOperation(hostStart(host), workflows.RuntimeHost, workflows.RuntimeHostInput{Host: host})
	args := []any{}
	if arg != nil {
		args = append(args, arg)
	}
	handle, err := h.Client.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
		StartWorkflowOperation: op,
		UpdateOptions: client.UpdateWorkflowOptions{UpdateID: updateID, WorkflowID: workflows.RuntimeHostID(host), UpdateName: name,
			Args: args, WaitForStage: client.WorkflowUpdateStageCompleted},
	})
	if err != nil {
		return fmt.Errorf("%s runtime host %s: %w", name, host, err)
	}
	if err := handle.Get(ctx, out); err != nil {
		return fmt.Errorf("%s runtime host %s: %w", name, host, err)
	}
	return nil
}

// Acquire takes the member's lease; the sandbox is ready when it returns.
func (h *Hosts) Acquire(ctx context.Context, updateID string, host, session uuid.UUID) (activities.HostLease, error) {
	var out activities.HostLease
	err := h.updateHost(ctx, updateID, host, workflows.UpdateAcquire, workflows.LeaseRequest{RuntimeSession: session}, &out)
	return out, err
}

// Release drops the member's lease. A host whose workflow is not running holds no lease.
func (h *Hosts) Release(ctx context.Context, updateID string, host, session uuid.UUID, reason domain.CheckpointReason) error {
	err := h.update(ctx, updateID, host, workflows.UpdateRelease, workflows.LeaseRequest{RuntimeSession: session, Reason: reason})
	if contract.IsNotFound(err) {
		return nil
	}
	return err
}

// Permit takes a turn permit for the member; it waits while a checkpoint holds the host.
func (h *Hosts) Permit(ctx context.Context, updateID string, host, session uuid.UUID) error {
	return h.update(ctx, updateID, host, workflows.UpdatePermit, workflows.LeaseRequest{RuntimeSession: session})
}

// Unpermit returns the member's turn permit.
func (h *Hosts) Unpermit(ctx context.Context, updateID string, host, session uuid.UUID) error {
	return h.update(ctx, updateID, host, workflows.UpdateUnpermit, workflows.LeaseRequest{RuntimeSession: session})
}

// update sends a member's update to a running host workflow.
func (h *Hosts) update(ctx context.Context, updateID string, host uuid.UUID, name string, req workflows.LeaseRequest) error {
	handle, err := h.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{UpdateID: updateID, WorkflowID: workflows.RuntimeHostID(host),
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
func (h *Hosts) Control(ctx context.Context, host uuid.UUID, req workflows.ControlRequest) (workflows.ControlResult, error) {
	var out workflows.ControlResult
	err := h.updateHost(ctx, "", host, workflows.UpdateControl, req, &out)
	return out, err
}

// Checkpoint captures a manual checkpoint of the host with every member's turn quiesced.
func (h *Hosts) Checkpoint(ctx context.Context, host uuid.UUID) (activities.CaptureCheckpointResult, error) {
	var out activities.CaptureCheckpointResult
	err := h.updateHost(ctx, "", host, workflows.UpdateCheckpoint, nil, &out)
	return out, err
}

// Status queries a host's lease state; a host whose workflow is not running has none.
func (h *Hosts) Status(ctx context.Context, host uuid.UUID) (workflows.RuntimeHostStatus, bool, error) {
	v, err := h.Client.QueryWorkflow(ctx, workflows.RuntimeHostID(host), "", workflows.QueryHost)
	if contract.IsNotFound(err) {
		return workflows.RuntimeHostStatus{}, false, nil
	}
	if err != nil {
		return workflows.RuntimeHostStatus{}, false, fmt.Errorf("query runtime host %s: %w", host, err)
	}
	var out workflows.RuntimeHostStatus
	if err := v.Get(&out); err != nil {
		return workflows.RuntimeHostStatus{}, false, fmt.Errorf("query runtime host %s: %w", host, err)
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
	after, err := s.UpdateWithID(ctx, updateID, session, workflows.UpdateStop, workflows.StopRequest{Reason: string(reason)})
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
	_, err := s.UpdateWithID(ctx, updateID, session, workflows.UpdateRemove, workflows.RemoveRequest{Final: true})
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
	_, err := h.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: workflows.RoomSessionID(session),
		UpdateName: workflows.UpdateRestart, Args: []any{workflows.RestartRequest{}},
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
	_, err := s.UpdateWithID(ctx, updateID, session, workflows.UpdateApplyConfig, workflows.ApplyConfigRequest{Generation: gen})
	if contract.IsNotFound(err) || contract.Is(err, domain.ErrTypeRetired) {
		return false, nil
	}
	return err == nil, err
}

// Replace recreates a host for a template edit that changed its compatibility fingerprint:
// a reset_sandbox control carrying the replacement.
func (h *Hosts) Replace(ctx context.Context, updateID string, rep activities.CommitHostReplacementInput) (bool, error) {
	var out workflows.ControlResult
	err := h.updateHost(ctx, updateID, rep.Host, workflows.UpdateControl,
		workflows.ControlRequest{Action: string(domain.HostResetSandbox), Replacement: &rep}, &out)
	return out.Replaced, err
}
