package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/checkpoint"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/workspace"
)

// Activation is what exact-resume preparation found for a session's provider state.
type Activation string

const (
	// ActivationFresh: the session never bound a provider identity; nothing to resume.
	ActivationFresh Activation = "fresh"
	// ActivationLive: the provider's state is on the host's disk; the provider resumes from it.
	ActivationLive Activation = "live"
	// ActivationRestored: the state was missing and the newest verified checkpoint holding
	// the session was restored into the provider-state directory.
	ActivationRestored Activation = "restored"
	// ActivationUnavailable: the state is missing and no verified checkpoint holds the
	// session: the runtime fails closed before it is built.
	ActivationUnavailable Activation = "unavailable"
)

// activated is the result of activate: which checkpoint the resume answers to (nil when no
// checkpoint of the host holds the session).
type activated struct {
	kind       Activation
	checkpoint *uuid.UUID
	detail     string
}

// activate prepares a sandboxed session's provider state for an exact resume. A session that
// bound a provider identity resumes that identity from the host's provider-state directory;
// when the directory is empty (a fresh host root: the node lost its disk, the host was
// recreated), the newest checkpoint that holds the session and verifies is restored into it
// first. With neither, the runtime fails before it is built — never a silent fresh thread.
func (r *Runtimes) activate(ctx context.Context, h domain.RuntimeHost, hs domain.HostSession, provider domain.Provider) (activated, error) {
	if hs.ProviderSessionID == "" {
		return activated{kind: ActivationFresh}, nil
	}
	paths, err := workspace.ManagedPaths(r.Layout, h.ID)
	if err != nil {
		return activated{}, err
	}
	state, err := paths.ProviderState(provider)
	if err != nil {
		return activated{}, err
	}
	all, err := r.Store.ListCheckpoints(ctx, h.ID)
	if err != nil {
		return activated{}, err
	}
	var holding []domain.ProviderCheckpoint
	for _, c := range all {
		for _, s := range c.Sessions {
			if s.RuntimeSession == hs.RuntimeSessionID && s.ProviderSessionID == hs.ProviderSessionID && c.PayloadDeletedAt == nil {
				holding = append(holding, c)
				break
			}
		}
	}
	// One activation per host at a time on this node: two members of a Shared host that
	// both find the state gone must not both restore into it.
	unlock := r.lockHost(h.ID)
	defer unlock()
	entries, err := os.ReadDir(state)
	switch {
	case err == nil && len(entries) > 0:
		// The provider resumes from its own state; that says nothing about any checkpoint.
		return activated{kind: ActivationLive}, nil
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return activated{}, fmt.Errorf("provider state of %s: %w", h.ID, err) // unreadable is not empty
	}
	gens := checkpoint.Store{Root: paths.Checkpoints()}
	var reasons []string
	for _, c := range holding {
		in, err := gens.Inspect(c.ID)
		if err != nil {
			return activated{}, err
		}
		if in.Status != checkpoint.StatusComplete || in.Manifest.Checksum != c.ManifestChecksum {
			reasons = append(reasons, fmt.Sprintf("checkpoint %s is %s", c.ID, in.Status))
			// The attempt fails closed either way; its observation is best-effort evidence.
			_ = r.observe(ctx, c.ID, hs, domain.ResumeFailed, "checkpoint "+string(in.Status)+": "+in.Detail)
			continue
		}
		if _, err := gens.Restore(ctx, c.ID, state); err != nil {
			return activated{}, fmt.Errorf("restore checkpoint %s for %s: %w", c.ID, hs.RuntimeSessionID, err)
		}
		id := c.ID
		return activated{kind: ActivationRestored, checkpoint: &id}, nil
	}
	detail := "no checkpoint holds it"
	if len(reasons) > 0 {
		detail = fmt.Sprint(reasons)
	}
	return activated{kind: ActivationUnavailable, detail: detail},
		contract.Fail(fmt.Sprintf(
			"runtime session %s is bound to provider session %s but its provider state is gone and %s; inspect the host's continuity and start fresh explicitly",
			hs.RuntimeSessionID, hs.ProviderSessionID, detail), domain.ErrTypeExactResume, nil)
}

// hostLocks serializes activation per runtime host within this node's worker (a host's
// members all run on its node).
var hostLocks sync.Map

func (r *Runtimes) lockHost(host uuid.UUID) (unlock func()) {
	m, _ := hostLocks.LoadOrStore(host, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// observe records one resume attempt against the checkpoint it answers to. The record is the
// evidence continuity inspection reads, so a failure to write it fails the caller.
func (r *Runtimes) observe(ctx context.Context, checkpointID uuid.UUID, hs domain.HostSession, outcome domain.ResumeOutcome, detail string) error {
	err := r.Store.RecordResumeObservation(ctx, domain.ResumeObservation{ID: uuid.New(), CheckpointID: checkpointID,
		RuntimeSession: hs.RuntimeSessionID, ExpectedProviderSessionID: hs.ProviderSessionID, Outcome: outcome,
		Detail: detail, RecordedAt: time.Now()})
	if err != nil {
		return fmt.Errorf("record resume observation of %s: %w", hs.RuntimeSessionID, err)
	}
	return nil
}
