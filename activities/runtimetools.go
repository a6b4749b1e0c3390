package activities

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/sandbox"
	"github.com/jam-dev/jam/internal/tools"
)

// toolSession binds Jam's tool registry to the instance the spec describes, with the scopes
// an owned runtime has (the workspace's repository tools only sandboxed), and, when the node serves MCP, issues the instance's token
// and tells the adapter where to reach the tools: the loopback URL host-native, the guest
// URL from inside a sandbox. The token dies with the instance (revokeTools) or when a newer
// generation of the session is issued one.
func (r *Runtimes) toolSession(spec *provider.Spec, sandboxed bool) (*tools.Session, error) {
	if r.Tools == nil {
		return nil, nil
	}
	sess := tools.Builtin().Session(tools.Identity{AgentID: spec.AgentID, RoomID: spec.RoomID,
		RuntimeSession: spec.RuntimeSession, Generation: spec.Generation}, r.Tools, tools.RuntimeScopes(sandboxed)...)
	spec.Tools = sess
	if r.MCP == nil || r.MCP.Server == nil {
		return sess, nil
	}
	url := r.MCP.URL
	if sandboxed {
		url = r.MCP.GuestURL
	}
	if url == "" {
		return sess, nil
	}
	tok, err := r.MCP.Server.Issue(sess)
	if err != nil {
		return nil, err
	}
	e := &provider.MCPEndpoint{Name: tools.MCPServerName, URL: url, Token: tok}
	if !sandboxed && len(r.MCP.Bridge) > 0 {
		// The bridge runs on this host with the token in its argument list's environment:
		// only the provider that spawns it sees it.
		e.BridgeCommand, e.BridgeArgs = r.MCP.Bridge[0], append(append([]string{}, r.MCP.Bridge[1:]...), "--url", url)
		e.BridgeEnv = []string{tools.BridgeTokenEnv + "=" + tok}
	}
	spec.MCP = e
	return sess, nil
}

// revokeTools ends the MCP token of a session's instance of generation gen.
func (r *Runtimes) revokeTools(session uuid.UUID, gen int64) {
	if r.MCP != nil && r.MCP.Server != nil {
		r.MCP.Server.Revoke(session, gen)
	}
}

// allowToolEndpoint lets the sandbox reach the node's MCP endpoint, and only it: the guest
// dials GuestURL through the sandbox's egress proxy, which passes exactly the target a rule
// allows. The sandbox's network journal manages the target (a rule of Jam's is created only
// when the effective policy does not already allow it); this covers a sandbox that stayed
// ready while the node's endpoint moved.
func (r *Runtimes) allowToolEndpoint(ctx context.Context, d *sandbox.Driver, name string) error {
	if r.Tools == nil || r.MCP == nil || r.MCP.Server == nil || r.MCP.GuestTarget == "" {
		return nil
	}
	target := r.MCP.GuestTarget
	j := &sandbox.NetworkJournal{Dir: r.Layout.SandboxOwnersDir(), Driver: d}
	if _, err := j.Reconcile(ctx, name, []string{target}, false); err != nil {
		return classify(fmt.Errorf("let sandbox %s reach Jam's tools at %s: %w", name, target, err))
	}
	return nil
}
