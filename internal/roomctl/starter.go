// Package roomctl drives the RoomSession workflows from outside them: membership, messages
// and run intent become starts, signals and updates, and the API reads session state. It is
// client code (it does I/O and fans out), so it lives beside the workflows, not among them.
package roomctl

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/lifecycle"
	"github.com/jam-dev/jam/internal/store"
)

// Starter drives the RoomSession workflows from membership, messages and run intent. It is
// the lifecycle.Starter of `jam dev` and `jam server`. It runs outside workflows (in the API
// process), so it may do I/O.
type Starter struct {
	Client client.Client
	Store  *store.Store
	// Eager is the lifecycle's JAM_OWNED_RUNTIME_LAZY=0: every binding starts its session
	// (which binds live). Under the lazy lifecycle a fresh binding starts nothing.
	Eager bool
}

var _ lifecycle.Starter = (*Starter)(nil)

// agentFanOut bounds how many sessions an agent-scope operation drives at once.
const agentFanOut = 16

// startOptions starts RoomSession:<session> or finds the running one. A retired and closed
// run may be started again (an authoritative re-add reuses the runtime session).
func startOptions(in contract.RoomSessionInput) client.StartWorkflowOptions {
	return contract.TaggedStart(client.StartWorkflowOptions{
		ID:                       contract.RoomSessionID(in.RuntimeSession),
		TaskQueue:                contract.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, contract.TypeRoomSession, in)
}

// Poke signals the session's workflow that its room may have backlog, starting the workflow
// if it is not running (SignalWithStart): a binding whose workflow start was lost heals here.
func (s *Starter) Poke(ctx context.Context, b domain.Binding) error {
	in := contract.RoomSessionInput{RuntimeSession: b.RuntimeSessionID, AgentID: b.AgentID, RoomID: b.RoomID}
	_, err := s.Client.SignalWithStartWorkflow(ctx, contract.RoomSessionID(b.RuntimeSessionID), contract.SignalInbound, nil,
		startOptions(in), contract.TypeRoomSession, in)
	if err != nil {
		return fmt.Errorf("poke room session %s: %w", b.RuntimeSessionID, err)
	}
	return nil
}

// Retry tells a session held in a permanent start failure that something changed, so it
// tries once more; a session that is not failed ignores it, and one with no running
// workflow has nothing to retry.
func (s *Starter) Retry(ctx context.Context, session uuid.UUID, reason string) error {
	err := s.Client.SignalWorkflow(ctx, contract.RoomSessionID(session), "", contract.SignalRetry,
		contract.RetrySignal{Reason: reason})
	if err != nil && !contract.IsNotFound(err) {
		return fmt.Errorf("retry room session %s: %w", session, err)
	}
	return nil
}

// RoomBound registers the room session. Under the lazy lifecycle a fresh binding has
// nothing to do until its first message, whose poke starts the workflow (SignalWithStart):
// the binding row is the registration, and binding costs no workflow start (issue 25: a
// start and its first task cost ~20 CPU-ms of Temporal each, which bounded binding 10,000
// rooms to minutes on two cores). docs/architecture.md §4 (RoomSession) describes this lazy
// start: every path that drives a session starts a workflow that is not running (Poke,
// session stop/restart), and the API shows such a session dormant. A
// reused binding is poked: its retired workflow waits for the re-add.
func (s *Starter) RoomBound(ctx context.Context, b domain.Binding, fresh bool) error {
	if fresh && !s.Eager {
		return nil
	}
	return s.Poke(ctx, b)
}

// RoomInbound pokes the session a message was queued for.
func (s *Starter) RoomInbound(ctx context.Context, b domain.Binding) error { return s.Poke(ctx, b) }

// RoomUnbound retires the session: its runtime stops (BeforeRemove) and the workflow waits
// for an authoritative re-add.
func (s *Starter) RoomUnbound(ctx context.Context, b domain.Binding) error {
	_, err := s.Update(ctx, b.RuntimeSessionID, contract.UpdateRemove, contract.RemoveRequest{})
	if contract.IsNotFound(err) || contract.Is(err, domain.ErrTypeRetired) {
		return nil
	}
	return err
}

// AgentRunIntent applies an agent-scope stop, start or restart to every room session of the
// agent. The intent is already persisted; every wake reads it, so a session this misses
// (Jam crashed midway) still honours it.
func (s *Starter) AgentRunIntent(ctx context.Context, agent uuid.UUID, intent domain.RunIntent, restart bool) error {
	return s.eachSession(ctx, agent, false, func(ctx context.Context, hs domain.HostSession) error {
		var err error
		switch {
		case intent == domain.RunIntentStopped:
			_, err = s.Update(ctx, hs.RuntimeSessionID, contract.UpdateStop, contract.StopRequest{Reason: string(domain.StopAgent)})
		case restart:
			// Every room's runtime stops; only rooms with backlog come back.
			_, err = s.Update(ctx, hs.RuntimeSessionID, contract.UpdateRestart, contract.RestartRequest{OnlyIfBacklog: true})
		default:
			err = s.Client.SignalWorkflow(ctx, contract.RoomSessionID(hs.RuntimeSessionID), "", contract.SignalInbound, nil)
		}
		if contract.IsNotFound(err) {
			if intent == domain.RunIntentStopped {
				return nil // nothing runs
			}
			return s.startIfNeeded(ctx, hs)
		}
		return err
	})
}

// startIfNeeded starts the workflow of a session that has none when it has something to do:
// messages queued, or the eager lifecycle. A lazy room never messaged stays without one, so
// starting or restarting an agent with many such rooms starts no workflow for them.
func (s *Starter) startIfNeeded(ctx context.Context, hs domain.HostSession) error {
	if !s.Eager {
		n, err := s.Store.CountUnsettled(ctx, hs.AgentID, hs.RoomID)
		if err != nil {
			return fmt.Errorf("backlog of room session %s: %w", hs.RuntimeSessionID, err)
		}
		if n == 0 {
			return nil
		}
	}
	return s.Poke(ctx, domain.Binding{RuntimeSessionID: hs.RuntimeSessionID, AgentID: hs.AgentID, RoomID: hs.RoomID})
}

// AgentDeleting stops every runtime of the agent and ends its session workflows.
func (s *Starter) AgentDeleting(ctx context.Context, agent uuid.UUID) error {
	return s.eachSession(ctx, agent, true, func(ctx context.Context, hs domain.HostSession) error {
		_, err := s.Update(ctx, hs.RuntimeSessionID, contract.UpdateRemove, contract.RemoveRequest{Final: true})
		if contract.IsNotFound(err) {
			return nil
		}
		return err
	})
}

func (s *Starter) eachSession(ctx context.Context, agent uuid.UUID, removed bool, f func(context.Context, domain.HostSession) error) error {
	sessions, err := s.Store.ListHostSessions(ctx, store.SessionFilter{Agent: &agent, IncludeRemoved: removed})
	if err != nil {
		return err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, agentFanOut)
	)
	for _, hs := range sessions {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := f(ctx, hs); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("session %s: %w", hs.RuntimeSessionID, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Update sends a RoomSession update and waits for its result.
func (s *Starter) Update(ctx context.Context, session uuid.UUID, name string, arg any) (contract.RoomSessionStatus, error) {
	return s.UpdateWithID(ctx, "", session, name, arg)
}

// UpdateWithID is Update under a caller-chosen update id ("" = a new one): a retry with the
// same id attaches to the update already sent.
func (s *Starter) UpdateWithID(ctx context.Context, updateID string, session uuid.UUID, name string, arg any) (contract.RoomSessionStatus, error) {
	h, err := s.Client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{UpdateID: updateID,
		WorkflowID: contract.RoomSessionID(session), UpdateName: name, Args: []any{arg},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err != nil {
		return contract.RoomSessionStatus{}, fmt.Errorf("%s room session %s: %w", name, session, err)
	}
	var out contract.RoomSessionStatus
	if err := h.Get(ctx, &out); err != nil {
		return contract.RoomSessionStatus{}, fmt.Errorf("%s room session %s: %w", name, session, err)
	}
	return out, nil
}

// StartUpdate sends a RoomSession update under updateID and returns the run once the
// session accepted it (its validator ran); an operation follows the rest.
func (s *Starter) StartUpdate(ctx context.Context, session uuid.UUID, updateID, name string, arg any) (string, error) {
	return contract.StartHostUpdate(ctx, s.Client, contract.RoomSessionID(session), updateID, name, arg)
}

// State queries a session's status.
func (s *Starter) State(ctx context.Context, session uuid.UUID) (contract.RoomSessionStatus, error) {
	v, err := s.Client.QueryWorkflow(ctx, contract.RoomSessionID(session), "", contract.QueryState)
	if err != nil {
		return contract.RoomSessionStatus{}, fmt.Errorf("query room session %s: %w", session, err)
	}
	var out contract.RoomSessionStatus
	if err := v.Get(&out); err != nil {
		return contract.RoomSessionStatus{}, fmt.Errorf("query room session %s: %w", session, err)
	}
	return out, nil
}
