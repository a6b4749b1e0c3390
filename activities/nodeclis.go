package activities

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
)

// describeCLIBudget (a variable for tests) bounds the provider CLI probe of an operator's
// node probe, so the whole answer fits contract.NodeProbeTimeout (the probes run at once; an
// idle 2-core machine answers each in 0.03–1.3 s). A probe that runs out of it records
// nothing: a slow CLI is not a missing one.
var describeCLIBudget = 7 * time.Second

// ProbeCLIs resolves the default command of every owned transport whose provider family the
// node runs, the way a host-native runtime there would (ResolveExecutable with the worker's
// environment and the pin table), and records the answers on the node row, so placement sends
// a host-native runtime only to nodes where its CLI is installed. Probes run at once: each is
// a `--version` of a few hundred milliseconds, each bounded by the resolver's own timeout (as
// a runtime's start has it) and all by ctx: when ctx ends first nothing is recorded.
func (n *Node) ProbeCLIs(ctx context.Context) ([]domain.NodeCLI, error) {
	pins, err := readPins(ctx, n.Store)
	if err != nil {
		return nil, fmt.Errorf("node %s provider CLIs: %w", n.Name, err)
	}
	rows := n.cliRows()
	out := make([]domain.NodeCLI, len(rows))
	var wg sync.WaitGroup
	for i, row := range rows {
		wg.Go(func() { out[i] = n.probeCLI(ctx, row, pins) })
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("node %s provider CLIs: %w", n.Name, err)
	}
	if err := n.Store.SetNodeCLIs(ctx, n.Name, out); err != nil {
		return nil, err
	}
	return out, nil
}

// cliRows are the owned, current catalog rows the node has an adapter for, one per command.
func (n *Node) cliRows() []domain.TransportSpec {
	var rows []domain.TransportSpec
	seen := map[string]bool{}
	for _, row := range domain.TransportCatalog() {
		if !row.Owned || row.Legacy || row.Command == "" || seen[row.Command] || !slices.Contains(n.Adapters, row.Provider) {
			continue
		}
		seen[row.Command] = true
		rows = append(rows, row)
	}
	return rows
}

// probeCLI resolves one command; a refusal becomes the CLI's problem, in the resolver's words
// (the candidates and why each was refused), which is what the operator needs to fix it.
func (n *Node) probeCLI(ctx context.Context, row domain.TransportSpec, pins map[string]string) domain.NodeCLI {
	cli := domain.NodeCLI{Command: row.Command}
	env, err := provider.HostNativeEnv(n.Env, row, nil)
	if err != nil {
		cli.Problem = err.Error()
		return cli
	}
	exe, err := resolveCLI(ctx, row, "", pins, n.Env, env, n.Groups)
	var refusal *provider.ResolutionRefusal
	switch {
	case errors.As(err, &refusal):
		cli.Problem = refusal.Error()
	case err != nil:
		cli.Problem = fmt.Sprintf("could not resolve %s: %v", row.Command, err)
	default:
		cli.Path, cli.Version, cli.Source = exe.Path, exe.Version, string(exe.Source)
	}
	return cli
}
