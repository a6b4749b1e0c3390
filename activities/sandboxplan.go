package activities

import (
	"fmt"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/sandbox"
	"github.com/jam-dev/jam/internal/workspace"
)

// SandboxNamePrefix starts every sandbox name Jam derives.
const SandboxNamePrefix = "jam"

// SandboxName is the derived name of a runtime host's sandbox.
func SandboxName(agent, host uuid.UUID) string {
	return sandbox.DeriveName(SandboxNamePrefix, agent, host)
}

// OwnerOf is the canonical owner of a runtime host's sandbox.
func OwnerOf(h domain.RuntimeHost) sandbox.OwnerKey {
	return sandbox.OwnerKey{Kind: sandbox.OwnerRuntimeHost, AgentID: h.AgentID, ID: h.ID}
}

// SandboxPlan is the exact creation intent of a host's sandbox, from the host (owner, name,
// node paths) and the configuration of the member that asks for it. A Managed workspace
// mounts the host's workspace root and, separately, the provider's state directory; host
// workspaces mount (or clone) the operator's checkout.
func SandboxPlan(l domain.Layout, h domain.RuntimeHost, c domain.TemplateConfig) (sandbox.Plan, error) {
	row, ok := domain.LookupTransport(c.Transport)
	if !ok || row.SandboxAgent == "" {
		return sandbox.Plan{}, &domain.ValidationError{Field: "transport", Detail: fmt.Sprintf("%q does not run in a sandbox", c.Transport)}
	}
	if err := sandbox.ValidateName(h.SandboxName); err != nil {
		return sandbox.Plan{}, err
	}
	paths, err := workspace.ManagedPaths(l, h.ID)
	if err != nil {
		return sandbox.Plan{}, err
	}
	state, err := paths.ProviderState(row.Provider)
	if err != nil {
		return sandbox.Plan{}, err
	}
	source := c.Sandbox.ConfigurationSource
	if source == "" {
		source = domain.ConfigJamManaged
	}
	p := sandbox.Plan{Owner: OwnerOf(h), Name: h.SandboxName, Agent: row.SandboxAgent,
		Workspace: paths.WorkspaceRoot(), Additional: []string{state}, ConfigurationSource: string(source)}
	switch c.Sandbox.WorkspaceSource {
	case domain.WorkspacePrivateHostClone:
		p.Workspace, p.Clone = c.Sandbox.HostPath, true
	case domain.WorkspaceDirectHost:
		p.Workspace = c.Sandbox.HostPath
	}
	return p, nil
}
