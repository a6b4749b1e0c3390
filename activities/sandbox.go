package activities

import (
	"context"
	"os"

	"github.com/jam-dev/jam/internal/sandbox"
)

// Sandbox holds the activities that drive this node's `sbx`. It is registered only on the
// node's task queue: the sandboxes and their files live on this machine.
type Sandbox struct {
	// Getenv reads JAM_SBX and PATH; nil is os.Getenv.
	Getenv func(string) string
}

// ProbeSandboxInput is empty; the node is chosen by the task queue.
type ProbeSandboxInput struct{}

// ProbeSandboxSupport classifies this node's `sbx` (absent, too old, daemon down, ok) within
// sandbox.ReadOnlyTimeout. It never fails: the classification is the answer.
func (s *Sandbox) ProbeSandboxSupport(ctx context.Context, _ ProbeSandboxInput) (sandbox.Support, error) {
	get := s.Getenv
	if get == nil {
		get = os.Getenv
	}
	return sandbox.Probe(ctx, get(sandbox.EnvSbx), get("PATH"), nil), nil
}
