// Package realagent finds the real agent CLIs (npm opencode-ai, @openai/codex, ...) that
// adapter tests drive. A test skips when one is not installed, and fails instead under
// JAM_REQUIRE_REAL_AGENTS=1, as in CI (.ci/run installs them, pinned).
package realagent

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jam-dev/jam/internal/provider"
)

// resolved caches each command's resolution for the test binary: resolving runs the CLI
// for its version, which for a Node or Bun CLI costs a second of CPU or more, and a suite
// that asks for the same CLI in every one of its parallel tests would pay it each time.
var resolved sync.Map // command + "\x00" + PATH -> *resolution

type resolution struct {
	once sync.Once
	exe  provider.ResolvedExecutable
	err  error
}

// Require resolves command on PATH the way Jam resolves a provider, or skips the test
// (fails it when JAM_REQUIRE_REAL_AGENTS=1).
func Require(t testing.TB, command string) provider.ResolvedExecutable {
	t.Helper()
	v, _ := resolved.LoadOrStore(command+"\x00"+os.Getenv("PATH"), &resolution{})
	r := v.(*resolution)
	r.once.Do(func() {
		r.exe, r.err = provider.ResolveExecutable(context.Background(), provider.ExecutableRequest{Command: command,
			Env: os.Getenv, PATH: os.Getenv("PATH"), ProbeEnv: os.Environ(),
			ProbeTimeout: time.Minute})
	})
	if r.err != nil {
		if os.Getenv("JAM_REQUIRE_REAL_AGENTS") == "1" {
			t.Fatalf("%s is required (JAM_REQUIRE_REAL_AGENTS=1): %v", command, r.err)
		}
		t.Skipf("%s is not installed: %v", command, r.err)
	}
	return r.exe
}
