// Package realagent finds the real agent CLIs (npm opencode-ai, @openai/codex, ...) that
// adapter tests drive. A test skips when one is not installed, and fails instead under
// JAM_REQUIRE_REAL_AGENTS=1, as in CI (.ci/run installs them, pinned).
package realagent

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jam-dev/jam/internal/provider"
)

// Require resolves command on PATH the way Jam resolves a provider, or skips the test
// (fails it when JAM_REQUIRE_REAL_AGENTS=1).
func Require(t testing.TB, command string) provider.ResolvedExecutable {
	t.Helper()
	exe, err := provider.ResolveExecutable(context.Background(), provider.ExecutableRequest{Command: command,
		Env: os.Getenv, PATH: os.Getenv("PATH"), ProbeEnv: os.Environ(),
		ProbeTimeout: time.Minute})
	if err != nil {
		if os.Getenv("JAM_REQUIRE_REAL_AGENTS") == "1" {
			t.Fatalf("%s is required (JAM_REQUIRE_REAL_AGENTS=1): %v", command, err)
		}
		t.Skipf("%s is not installed: %v", command, err)
	}
	return exe
}
