package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
)

func superseded(err error) error {
	if errors.Is(err, store.ErrSuperseded) {
		return contract.Fail(err.Error(), domain.ErrTypeSuperseded, err)
	}
	return err
}

// ConfigRef names one session's configuration generation.
type ConfigRef struct {
	RuntimeSession uuid.UUID `json:"runtime_session"`
	Generation     int64     `json:"generation"`
	// Reason is why applying it failed (FailConfig).
	Reason string `json:"reason,omitempty"`
}

// TemplateApplyPlan is what applying a generation touches: sessions applied one by one, and
// runtime hosts whose compatibility fingerprint the edit changed, recreated once with every
// member (those members are not in Sessions).
type TemplateApplyPlan struct {
	Superseded bool                 `json:"superseded"`
	Sessions   []uuid.UUID          `json:"sessions"`
	Hosts      []HostReplacement    `json:"hosts"`
	Node       map[uuid.UUID]string `json:"node,omitempty"`
}

// HostReplacement is a runtime host recreated with a replacement fingerprint.
type HostReplacement struct {
	Host        uuid.UUID `json:"host"`
	Fingerprint string    `json:"fingerprint"`
	// Members are the template's sessions on the host.
	Members []uuid.UUID `json:"members"`
}

// PlanTemplateApply reads, fenced by the template's desired generation, which sessions and
// hosts an apply of the generation touches.
func (s *Sessions) PlanTemplateApply(ctx context.Context, in contract.TemplateApplyInput) (TemplateApplyPlan, error) {
	out := TemplateApplyPlan{Sessions: []uuid.UUID{}, Hosts: []HostReplacement{}}
	t, err := s.Store.GetTemplate(ctx, in.Template)
	if err != nil {
		return out, err
	}
	if t.DesiredGeneration != in.Generation {
		out.Superseded = true
		return out, nil
	}
	sessions, err := s.Store.TemplateSessions(ctx, in.Template)
	if err != nil {
		return out, err
	}
	fingerprint := domain.CompatibilityFingerprint(t.Config, "")
	recreate := map[uuid.UUID]int{}
	for _, hs := range sessions {
		if hs.EffectiveGeneration >= in.Generation {
			continue
		}
		h, err := s.Store.HostOfSession(ctx, hs.RuntimeSessionID)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return out, err
		case h.Sandboxed && t.Config.Sandbox.Enabled && h.Compatibility != fingerprint &&
			h.State != domain.HostArchived && h.State != domain.HostRemoved:
			i, ok := recreate[h.ID]
			if !ok {
				i = len(out.Hosts)
				recreate[h.ID] = i
				out.Hosts = append(out.Hosts, HostReplacement{Host: h.ID, Fingerprint: fingerprint})
			}
			out.Hosts[i].Members = append(out.Hosts[i].Members, hs.RuntimeSessionID)
			continue
		}
		out.Sessions = append(out.Sessions, hs.RuntimeSessionID)
	}
	return out, nil
}

// MarkApplying records the session's runtime being replaced by the generation; applied=true
// when it is effective already.
func (s *Sessions) MarkApplying(ctx context.Context, in ConfigRef) (bool, error) {
	applied, err := s.Store.MarkConfigApplying(ctx, in.RuntimeSession, in.Generation, time.Now())
	return applied, superseded(err)
}

// CommitConfigResult is what the committed configuration means for the running session.
type CommitConfigResult struct {
	// IdleSecs is its idle-reap threshold (0 in results recorded before it).
	IdleSecs int `json:"idle_secs,omitempty"`
}

// CommitConfig makes the generation effective for the session, and says the idle threshold
// it brings (a template's idle_secs applies to the runtime it restarted, not only to the
// next wake).
func (s *Sessions) CommitConfig(ctx context.Context, in ConfigRef) (CommitConfigResult, error) {
	if err := superseded(s.Store.CommitConfig(ctx, in.RuntimeSession, in.Generation, time.Now())); err != nil {
		return CommitConfigResult{}, err
	}
	hs, err := s.Store.GetHostSession(ctx, in.RuntimeSession)
	if err != nil {
		return CommitConfigResult{}, nil // committed; the next wake reads the threshold
	}
	idle, err := s.idleSecs(ctx, hs.Config)
	if err != nil {
		return CommitConfigResult{}, nil
	}
	return CommitConfigResult{IdleSecs: idle}, nil
}

// FailConfig records a failed apply: the old configuration stays effective.
func (s *Sessions) FailConfig(ctx context.Context, in ConfigRef) error {
	return s.Store.FailConfig(ctx, in.RuntimeSession, in.Generation, in.Reason, time.Now())
}

// CommitHostReplacement gives the host its replacement fingerprint and its members the
// generation, at once.
func (h *Hosts) CommitHostReplacement(ctx context.Context, in contract.CommitHostReplacementInput) error {
	return superseded(h.Store.CommitHostReplacement(ctx, in.Host, in.Template, in.Generation, in.Fingerprint, time.Now()))
}

// ApplyMember asks the member's RoomSession to apply the generation (it waits for a running
// turn to end). A session with no running workflow has no runtime: the generation becomes
// effective at once.
func (h *Hosts) ApplyMember(ctx context.Context, in ConfigRef) error {
	stop := heartbeat(ctx)
	defer stop()
	handled, err := h.Members.ApplyConfig(ctx, updateID(ctx), in.RuntimeSession, in.Generation)
	if err != nil {
		return typed(err)
	}
	if !handled {
		if err := h.Store.CommitConfig(ctx, in.RuntimeSession, in.Generation, time.Now()); err != nil {
			return superseded(fmt.Errorf("commit configuration of %s: %w", in.RuntimeSession, err))
		}
	}
	return nil
}

// ReplaceHost recreates a host for the generation through its RuntimeHost workflow (members
// stopped, sandbox destroyed once, fingerprint and configuration committed, live members
// back).
func (h *Hosts) ReplaceHost(ctx context.Context, in contract.CommitHostReplacementInput) (bool, error) {
	stop := heartbeat(ctx)
	defer stop()
	replaced, err := h.Leases.Replace(ctx, updateID(ctx), in)
	return replaced, typed(err)
}
