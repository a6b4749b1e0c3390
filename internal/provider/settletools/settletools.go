// Package settletools gives an adapter that offers Jam's tools natively (Codex dynamic tools,
// Copilot external tools) the built-in settlement tools when its spec wires no registry
// (adapter tests): settlement needs them. It lives apart from package provider because the
// tool registry is built on that package.
package settletools

import (
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/tools"
)

// For is the built-in registry limited to the settlement tools, for spec's runtime instance,
// staging into st. It is a provider.LifecycleConfig.SettleTools.
func For(spec provider.Spec, st provider.DispositionStager) provider.ToolCaller {
	local := tools.Builtin().Session(tools.Identity{AgentID: spec.AgentID, RoomID: spec.RoomID,
		RuntimeSession: spec.RuntimeSession, Generation: spec.Generation}, nil, domain.ScopeSettle)
	local.Bind(st)
	return local
}
