package activities

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/checkpoint"
	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/workspace"
)

// InspectContinuityInput names the host to inspect.
type InspectContinuityInput struct {
	Host uuid.UUID `json:"host"`
}

// InspectContinuity reports whether every session of the host bound to a provider identity
// can be resumed exactly from the newest checkpoint, verifying that checkpoint on this node's
// disk. It reads only. Start-fresh is offered only for a failure while no runtime runs.
func (c *Checkpoints) InspectContinuity(ctx context.Context, in InspectContinuityInput) (contract.ContinuityReport, error) {
	h, err := c.Store.GetRuntimeHost(ctx, in.Host)
	if errors.Is(err, store.ErrNotFound) {
		return contract.ContinuityReport{}, contract.Fail(err.Error(), domain.ErrTypeHostScope, err)
	}
	if err != nil {
		return contract.ContinuityReport{}, err
	}
	members, err := c.Store.HostMembers(ctx, h.ID)
	if err != nil {
		return contract.ContinuityReport{}, err
	}
	rep := contract.ContinuityReport{Host: h.ID, Status: domain.ContinuityHealthy, Sessions: []contract.ContinuitySession{}}
	for _, m := range members {
		if m.State == domain.MembershipActive {
			rep.RuntimeRunning = true
		}
		hs, err := c.Store.GetHostSession(ctx, m.RuntimeSession)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return contract.ContinuityReport{}, err
		}
		if hs.ProviderSessionID != "" {
			rep.Sessions = append(rep.Sessions, contract.ContinuitySession{RuntimeSession: hs.RuntimeSessionID,
				ProviderSessionID: hs.ProviderSessionID, ProviderVersion: hs.ProviderVersion})
		}
	}
	all, err := c.Store.ListCheckpoints(ctx, h.ID)
	if err != nil {
		return contract.ContinuityReport{}, err
	}
	var newest *domain.ProviderCheckpoint
	for i := range all {
		if all[i].PayloadDeletedAt == nil {
			newest = &all[i]
			break
		}
	}
	if newest != nil {
		rep.Checkpoint, rep.CheckpointProviderVersion = &newest.ID, newest.ProviderVersion
		paths, err := workspace.ManagedPaths(c.Layout, h.ID)
		if err != nil {
			return contract.ContinuityReport{}, err
		}
		insp, err := checkpoint.Store{Root: paths.Checkpoints()}.Inspect(newest.ID)
		if err != nil {
			return contract.ContinuityReport{}, err
		}
		rep.CheckpointState = string(insp.Status)
		if insp.Status == checkpoint.StatusComplete && insp.Manifest.Checksum != newest.ManifestChecksum {
			rep.CheckpointState, insp.Detail = string(checkpoint.StatusCorrupt), "the manifest is not the one recorded"
		}
		if rep.CheckpointState != string(checkpoint.StatusComplete) {
			rep.Detail = insp.Detail
		}
	}
	for i := range rep.Sessions {
		s := &rep.Sessions[i]
		if newest == nil {
			continue
		}
		for _, cs := range newest.Sessions {
			if cs.RuntimeSession == s.RuntimeSession && cs.ProviderSessionID == s.ProviderSessionID {
				s.Captured = true
			}
		}
		o, err := c.Store.LatestResumeObservation(ctx, newest.ID, s.RuntimeSession)
		switch {
		case err == nil:
			s.LastResume = &contract.ResumeEvidence{ID: o.ID, Outcome: o.Outcome, Detail: o.Detail, RecordedAt: o.RecordedAt}
		case !errors.Is(err, store.ErrNotFound):
			return contract.ContinuityReport{}, err
		}
	}
	rep.Status = continuityStatus(rep)
	if rep.Status == domain.ContinuityProviderVersionMismatch && rep.Detail == "" {
		for _, s := range rep.Sessions {
			if versionChanged(rep, s) {
				rep.Detail = fmt.Sprintf("the newest checkpoint was taken by provider version %s; session %s's provider now reports %s",
					rep.CheckpointProviderVersion, s.RuntimeSession, s.ProviderVersion)
				break
			}
		}
	}
	rep.CanStartFresh = rep.Status != domain.ContinuityHealthy && !rep.RuntimeRunning
	rep.EvidenceChecksum = evidenceChecksum(rep)
	return rep, nil
}

// continuityStatus applies the rules in order: nothing bound is healthy; then missing,
// corrupt, a session not captured, a provider version change, and a failed latest resume.
func continuityStatus(r contract.ContinuityReport) domain.ContinuityStatus {
	switch {
	case len(r.Sessions) == 0:
		return domain.ContinuityHealthy
	case r.Checkpoint == nil:
		return domain.ContinuityMissing
	case r.CheckpointState != string(checkpoint.StatusComplete):
		return domain.ContinuityCorrupt
	}
	for _, s := range r.Sessions {
		if !s.Captured {
			return domain.ContinuitySessionNotCaptured
		}
	}
	for _, s := range r.Sessions {
		if versionChanged(r, s) {
			return domain.ContinuityProviderVersionMismatch
		}
	}
	for _, s := range r.Sessions {
		if s.LastResume != nil && s.LastResume.Outcome == domain.ResumeFailed {
			return domain.ContinuityResumeFailed
		}
	}
	return domain.ContinuityHealthy
}

// versionChanged: the newest checkpoint was taken by another provider version than the one
// the session's provider last reported (both known), and that newer provider has not since
// resumed from it successfully.
func versionChanged(r contract.ContinuityReport, s contract.ContinuitySession) bool {
	if r.CheckpointProviderVersion == "" || s.ProviderVersion == "" || r.CheckpointProviderVersion == s.ProviderVersion {
		return false
	}
	return s.LastResume == nil || s.LastResume.Outcome != domain.ResumeSucceeded
}

// evidenceChecksum covers the host, the checkpoint and its state, the failure, the sessions
// and their observations: anything that would change what start-fresh acts on.
//
// An observation counts by what it says (outcome and detail), not by when it was recorded:
// the same failure observed again by a retrying room does not invalidate the operator's
// confirmation; a different one does.
func evidenceChecksum(r contract.ContinuityReport) string {
	type session struct {
		RuntimeSession    uuid.UUID
		ProviderSessionID string
		Captured          bool
		Outcome           domain.ResumeOutcome
		Detail            string
		ProviderVersion   string
	}
	e := struct {
		Host              uuid.UUID
		Status            domain.ContinuityStatus
		Checkpoint        *uuid.UUID
		State             string
		CheckpointVersion string
		Sessions          []session
	}{Host: r.Host, Status: r.Status, Checkpoint: r.Checkpoint, State: r.CheckpointState, CheckpointVersion: r.CheckpointProviderVersion}
	for _, s := range r.Sessions {
		es := session{RuntimeSession: s.RuntimeSession, ProviderSessionID: s.ProviderSessionID, Captured: s.Captured,
			ProviderVersion: s.ProviderVersion}
		if s.LastResume != nil {
			es.Outcome, es.Detail = s.LastResume.Outcome, s.LastResume.Detail
		}
		e.Sessions = append(e.Sessions, es)
	}
	b, _ := json.Marshal(e)
	sum := sha256.Sum256(append([]byte("jam.continuity-evidence.v2\n"), b...))
	return hex.EncodeToString(sum[:])
}
