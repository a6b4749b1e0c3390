package app

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// environmentFuncs are the calls that read or change the process environment, by package.
var environmentFuncs = map[string][]string{
	"os":      {"Getenv", "Setenv", "LookupEnv", "Environ", "Unsetenv", "ExpandEnv", "Clearenv"},
	"syscall": {"Getenv", "Setenv", "Environ", "Unsetenv", "Clearenv"},
}

// startupDirs may touch the environment: the configuration is parsed there once and injected
// (cmd/*, internal/app); test support and the cross-process tests drive processes through it.
var startupDirs = []string{"cmd", "internal/app", "internal/testsupport", "test"}

// TestOnlyStartupCodeReadsTheEnvironment keeps configuration parsed once at start: outside
// the startup code, no non-test file of the module reads or changes the process environment.
func TestOnlyStartupCodeReadsTheEnvironment(t *testing.T) {
	root := moduleRoot(t)
	var offenders []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" ||
				name == "vendor" || name == "node_modules" || allowed(rel)) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		offenders = append(offenders, environmentCalls(fset, f, rel)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(offenders) > 0 {
		t.Errorf("the process environment is read or changed outside %s; parse it there and inject it (workers.Config):\n\t%s",
			strings.Join(startupDirs, ", "), strings.Join(offenders, "\n\t"))
	}
}

// TestTheEnvironmentRuleFindsACall guards the rule's own parser: a renamed import is still
// caught, a method of the same name on a value of another name is not.
func TestTheEnvironmentRuleFindsACall(t *testing.T) {
	src := `package x

import (
	stdos "os"
	"syscall"
)

type env struct{}

func (env) Getenv(string) string { return "" }

func f() {
	_ = stdos.Getenv("A")
	_, _ = syscall.Getenv("B")
	var e env
	_ = e.Getenv("C")
	_ = stdos.Args
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "x.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	got := environmentCalls(fset, f, "x.go")
	want := []string{"x.go:13: os.Getenv", "x.go:14: syscall.Getenv"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func allowed(rel string) bool {
	for _, dir := range startupDirs {
		if rel == dir || strings.HasPrefix(rel, dir+"/") {
			return true
		}
	}
	return false
}

// environmentCalls lists the uses of environmentFuncs in f as "file:line: pkg.Func".
func environmentCalls(fset *token.FileSet, f *ast.File, rel string) []string {
	// The local names of the environment packages in this file (an import may be renamed).
	names := map[string]string{}
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil || environmentFuncs[path] == nil {
			continue
		}
		name := path
		if imp.Name != nil {
			name = imp.Name.Name
		}
		names[name] = path
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		x, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		// Strict on purpose: a local shadowing the import's name would be reported too, and
		// is better renamed than exempted.
		path, ok := names[x.Name]
		if !ok || !slices.Contains(environmentFuncs[path], sel.Sel.Name) {
			return true
		}
		out = append(out, rel+":"+strconv.Itoa(fset.Position(sel.Pos()).Line)+": "+path+"."+sel.Sel.Name)
		return true
	})
	return out
}

// moduleRoot is the directory of the go.mod above this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
