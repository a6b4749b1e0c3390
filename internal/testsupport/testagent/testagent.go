// Package testagent builds cmd/jam-testagent once per test binary, so adapter, registry and
// integration tests drive the real scripted ACP agent as a child process.
package testagent

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var (
	once  sync.Once
	path  string
	bErr  error
	bOut  []byte
	bDir  string
	bLock sync.Mutex
)

// Binary returns the path of a freshly built jam-testagent.
func Binary(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..", "..")
		bDir, bErr = os.MkdirTemp("", "jam-testagent-*")
		if bErr != nil {
			return
		}
		path = filepath.Join(bDir, "jam-testagent")
		cmd := exec.Command("go", "build", "-o", path, "./cmd/jam-testagent")
		cmd.Dir = root
		bOut, bErr = cmd.CombinedOutput()
	})
	if bErr != nil {
		t.Fatalf("build jam-testagent: %v\n%s", bErr, bOut)
	}
	return path
}

// Cleanup removes the built binary; call it from TestMain after m.Run.
func Cleanup() {
	bLock.Lock()
	defer bLock.Unlock()
	if bDir != "" {
		_ = os.RemoveAll(bDir)
	}
}
