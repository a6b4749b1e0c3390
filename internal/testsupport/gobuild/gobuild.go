// Package gobuild builds a program of this module once per test binary, so tests run the
// real executable (the test agent, the fake sbx) as a child process.
package gobuild

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// Program is one main package of this module, built on first use.
type Program struct {
	// Pkg is the package path relative to the module root ("./cmd/jam-testagent").
	Pkg string
	// Name is the executable's file name.
	Name string

	once sync.Once
	mu   sync.Mutex
	dir  string
	path string
	err  error
	out  []byte
}

// Binary returns the path of the built executable, building it the first time.
func (p *Program) Binary(t testing.TB) string {
	t.Helper()
	p.once.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..", "..")
		dir, err := os.MkdirTemp("", p.Name+"-*")
		if err != nil {
			p.err = err
			return
		}
		p.mu.Lock()
		p.dir = dir
		p.mu.Unlock()
		p.path = filepath.Join(dir, p.Name)
		cmd := exec.Command("go", "build", "-o", p.path, p.Pkg)
		cmd.Dir = root
		p.out, p.err = cmd.CombinedOutput()
	})
	if p.err != nil {
		t.Fatalf("build %s: %v\n%s", p.Pkg, p.err, p.out)
	}
	return p.path
}

// Cleanup removes the built executable; call it from TestMain after m.Run.
func (p *Program) Cleanup() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dir != "" {
		_ = os.RemoveAll(p.dir)
	}
}
