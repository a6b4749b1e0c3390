// Package testagent builds cmd/jam-testagent once per test binary, so adapter, registry and
// integration tests drive the real scripted ACP agent as a child process.
package testagent

import (
	"testing"

	"github.com/jam-dev/jam/internal/testsupport/gobuild"
)

var program = &gobuild.Program{Pkg: "./cmd/jam-testagent", Name: "jam-testagent"}

// Binary returns the path of a freshly built jam-testagent.
func Binary(t testing.TB) string { t.Helper(); return program.Binary(t) }

// Cleanup removes the built binary; call it from TestMain after m.Run.
func Cleanup() { program.Cleanup() }
