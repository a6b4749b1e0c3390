// Package fakesbx builds test/fakesbx once per test binary and gives each test its own state
// directory, so the real sandbox driver runs against a faithful fake `sbx`.
package fakesbx

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var (
	once sync.Once
	path string
	bErr error
	bOut []byte
)

// Binary returns the path of a freshly built fake `sbx` (named sbx).
func Binary(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..", "..")
		dir, err := os.MkdirTemp("", "fakesbx-*")
		if err != nil {
			bErr = err
			return
		}
		path = filepath.Join(dir, "sbx")
		cmd := exec.Command("go", "build", "-o", path, "./test/fakesbx")
		cmd.Dir = root
		bOut, bErr = cmd.CombinedOutput()
	})
	if bErr != nil {
		t.Fatalf("build fake sbx: %v\n%s", bErr, bOut)
	}
	return path
}

// Env is the environment of a fake `sbx` with its own state directory and the given
// injected failures (FAKESBX_FAIL).
func Env(t testing.TB, fail string, extra ...string) []string {
	t.Helper()
	return append([]string{"FAKESBX_STATE=" + t.TempDir(), "FAKESBX_FAIL=" + fail, "PATH=" + os.Getenv("PATH")}, extra...)
}
