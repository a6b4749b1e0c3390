package activities

import (
	"context"
	"errors"
	"fmt"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
)

// CheckTemplate answers, read-only, whether a template being saved could start on this node
// as its worker is now: the variables its env_allowlist names that the worker's environment
// does not set (a provider gets them from it, host-native or in a sandbox's guest), and,
// host-native, whether its command resolves the way a runtime's start would resolve it (the
// template's path, JAM_<COMMAND>_BIN, the pin table, PATH) — by existence and the executable
// bit only, running nothing (provider.LocateExecutable), so a save stays fast and starts no
// CLI.
func (n *Node) CheckTemplate(ctx context.Context, in contract.TemplateCheckInput) (contract.TemplateCheck, error) {
	out := contract.TemplateCheck{Node: n.Name}
	for _, name := range in.Env {
		// The rule a start applies (missingEnv): unset is missing, any value is set.
		if !envHas(n.Env, name) {
			out.MissingEnv = append(out.MissingEnv, name)
		}
	}
	row, ok := domain.LookupTransport(in.Transport)
	if in.Sandboxed || !ok || !row.Owned || row.Command == "" {
		return out, nil // a sandbox's command is the guest's; a bad transport the validator's
	}
	pins, err := readPins(ctx, n.Store)
	if err != nil {
		return contract.TemplateCheck{}, fmt.Errorf("node %s template check: %w", n.Name, err)
	}
	cc := &contract.CommandCheck{Command: row.Command, Explicit: in.Command}
	out.Command = cc
	env, err := provider.HostNativeEnv(n.Env, row, nil)
	if err != nil {
		cc.Problem = err.Error()
		return out, nil
	}
	exe, err := provider.LocateExecutable(provider.ExecutableRequest{Command: row.Command, Explicit: in.Command,
		Env: envLookup(n.Env), PATH: envLookup(env)("PATH"), Pins: pins})
	var refusal *provider.ResolutionRefusal
	switch {
	case errors.As(err, &refusal):
		cc.Problem = refusal.Error()
	case err != nil:
		cc.Problem = fmt.Sprintf("could not resolve %s: %v", row.Command, err)
	default:
		cc.Path, cc.Source = exe.Path, string(exe.Source)
	}
	return out, nil
}
