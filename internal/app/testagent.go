package app

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
)

// withBundledTestAgent makes the jam-testagent built beside this jam binary the environment
// default of the ACP catalog row (the embedded default provider), unless the operator named
// one, in the worker's environment snapshot env. Resolution stays the provider resolver's:
// this only fills its environment default, and the process's own environment is left alone.
func withBundledTestAgent(env []string, log *slog.Logger) []string {
	row, ok := domain.LookupTransport(domain.TransportACP)
	if !ok {
		return env
	}
	envVar := provider.EnvVarFor(row.Command)
	if envLookup(env)(envVar) != "" {
		return env
	}
	self, err := os.Executable()
	if err != nil {
		return env
	}
	candidate := filepath.Join(filepath.Dir(self), row.Command)
	if info, err := os.Stat(candidate); err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
		log.Info("the default provider is not beside jam; it is resolved from PATH", "command", row.Command, "env", envVar)
		return env
	}
	log.Info("default provider", "command", row.Command, "path", candidate)
	// An empty value set by the operator is replaced, as before: the last entry wins.
	return append(slices.Clip(env), envVar+"="+candidate)
}
