// Package fakesbx builds test/fakesbx once per test binary and gives each test its own state
// directory, so the real sandbox driver runs against a faithful fake `sbx`.
package fakesbx

import (
	"os"
	"testing"

	"github.com/jam-dev/jam/internal/testsupport/gobuild"
)

var program = &gobuild.Program{Pkg: "./test/fakesbx", Name: "sbx"}

// Binary returns the path of a freshly built fake `sbx` (named sbx).
func Binary(t testing.TB) string { t.Helper(); return program.Binary(t) }

// Cleanup removes the built binary; call it from TestMain after m.Run.
func Cleanup() { program.Cleanup() }

// Env is the environment of a fake `sbx` with its own state directory and the given
// injected failures (FAKESBX_FAIL).
func Env(t testing.TB, fail string, extra ...string) []string {
	t.Helper()
	return append([]string{"FAKESBX_STATE=" + t.TempDir(), "FAKESBX_FAIL=" + fail, "PATH=" + os.Getenv("PATH")}, extra...)
}
