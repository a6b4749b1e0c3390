package activities

import (
	"context"
	"fmt"
	"strings"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
)

// missingEnv checks, before anything starts, that every variable the template's env
// allowlist names is set in the worker's environment, which is where a provider's values
// come from (host-native or through a sandbox's env file). A provider started without one
// fails later and obscurely (Codex retried a turn four times over "Missing environment
// variable", issue 44), so the start fails at once, classified credential_missing, with the
// fix. The API refuses such a template at save when it can ask the nodes; this holds for a
// node started later without the variable.
func missingEnv(ctx context.Context, row domain.TransportSpec, hs domain.HostSession, node string, worker []string) error {
	var missing []string
	for _, name := range hs.Config.EnvAllowlist {
		if !envHas(worker, name) {
			missing = append(missing, name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	names := strings.Join(missing, ", ")
	// startFailure adds the fix: set it in the node's environment, or change the template.
	return startFailure(ctx, fmt.Errorf("%w: %s, which the template's env allowlist passes on from the worker's environment (jam dev's or jam worker's), is not set there (e.g. %s=… jam dev)",
		provider.ErrCredentialMissing, names, missing[0]), row, hs, node)
}

// envHas reports whether env (KEY=VALUE entries) sets name, to any value.
func envHas(env []string, name string) bool {
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); ok && k == name {
			return true
		}
	}
	return false
}
