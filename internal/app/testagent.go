package app

import (
	"log/slog"
	"os"
	"path/filepath"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
)

// useBundledTestAgent makes the jam-testagent built beside this jam binary the environment
// default of the ACP catalog row (the embedded default provider), unless the operator named
// one. Resolution stays the provider resolver's: this only fills its environment default.
func useBundledTestAgent(log *slog.Logger) {
	row, ok := domain.LookupTransport(domain.TransportACP)
	if !ok {
		return
	}
	envVar := provider.EnvVarFor(row.Command)
	if os.Getenv(envVar) != "" {
		return
	}
	self, err := os.Executable()
	if err != nil {
		return
	}
	candidate := filepath.Join(filepath.Dir(self), row.Command)
	if info, err := os.Stat(candidate); err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
		log.Info("the default provider is not beside jam; it is resolved from PATH", "command", row.Command, "env", envVar)
		return
	}
	if err := os.Setenv(envVar, candidate); err == nil {
		log.Info("default provider", "command", row.Command, "path", candidate)
	}
}
