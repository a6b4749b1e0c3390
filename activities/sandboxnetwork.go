package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/store"
)

// networkTargets is what the host's sandbox must reach: Jam's own tool endpoint and the
// union of the network profiles of the member about to start (nil: none) and every member
// not removed (a Shared host's members share a fingerprint, so mostly the same; the union is
// exact).
func (s *Sandbox) networkTargets(ctx context.Context, h domain.RuntimeHost, starting *domain.HostSession) ([]string, error) {
	var configs []domain.TemplateConfig
	if starting != nil {
		configs = append(configs, starting.Config)
	}
	members, err := s.Store.HostMembers(ctx, h.ID)
	if err != nil {
		return nil, err
	}
	for _, m := range members {
		if m.AgentID == uuid.Nil || m.Removed || (starting != nil && m.RuntimeSession == starting.RuntimeSessionID) {
			continue
		}
		hs, err := s.Store.GetHostSession(ctx, m.RuntimeSession)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		configs = append(configs, hs.Config)
	}
	var out []string
	if s.ToolTarget != "" {
		out = append(out, s.ToolTarget)
	}
	for _, c := range configs {
		out = append(out, domain.NetworkTargets(c.Normalized().NetworkProfile)...)
	}
	return slices.Compact(slices.Sorted(slices.Values(out))), nil
}

// HostNetworkInput names the runtime host whose sandbox network is inspected.
type HostNetworkInput struct {
	Host uuid.UUID `json:"host"`
}

// InspectNetwork reports the host's network journal and a bounded read-only readiness check
// of the targets its members need (and any the journal still holds). It changes nothing.
func (s *Sandbox) InspectNetwork(ctx context.Context, in HostNetworkInput) (contract.NetworkReport, error) {
	h, err := s.Store.GetRuntimeHost(ctx, in.Host)
	if errors.Is(err, store.ErrNotFound) {
		return contract.NetworkReport{}, contract.Fail(err.Error(), domain.ErrTypeHostScope, err)
	}
	if err != nil {
		return contract.NetworkReport{}, err
	}
	if !h.Sandboxed || h.SandboxName == "" {
		return contract.NetworkReport{}, contract.Fail(fmt.Sprintf("runtime host %s has no sandbox", h.ID), domain.ErrTypeNoSandbox, nil)
	}
	m, err := s.manager(ctx)
	if err != nil {
		return contract.NetworkReport{}, err
	}
	rep := contract.NetworkReport{Sandbox: h.SandboxName}
	if rep.Entries, err = m.Network.Read(h.SandboxName); err != nil {
		return contract.NetworkReport{}, err
	}
	want, err := s.networkTargets(ctx, h, nil)
	if err != nil {
		return contract.NetworkReport{}, err
	}
	for _, e := range rep.Entries {
		want = append(want, e.Target)
	}
	rep.Wanted = slices.Compact(slices.Sorted(slices.Values(want)))
	for _, r := range m.Driver.Readiness(ctx, h.SandboxName, rep.Wanted) {
		rep.Readiness = append(rep.Readiness, contract.NetworkCheck{Target: r.Target, Result: r.Result})
	}
	return rep, nil
}
