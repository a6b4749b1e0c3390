package provider

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// LocateExecutable consults what ResolveExecutable does, in its order, and answers from the
// files alone: it runs no candidate, and refuses what a start would refuse for the file.
func TestLocateExecutableFollowsTheResolverWithoutRunningAnything(t *testing.T) {
	t.Parallel()
	ran := filepath.Join(t.TempDir(), "ran")
	body := "touch " + ran + "; echo 1.0.0"
	onPath, named, pinned := toolDir(t, body), toolDir(t, body), toolDir(t, body)
	notExec := writeFile(t, t.TempDir(), testCommand, "#!/bin/sh\n"+body+"\n", 0o644)
	missing := filepath.Join(t.TempDir(), "gone", testCommand)
	env := EnvVarFor(testCommand)
	cases := []struct {
		name       string
		req        ExecutableRequest
		wantPath   string
		wantSource ExecutableSource
		refused    []string
	}{
		{name: "path", req: ExecutableRequest{PATH: pathList(filepath.Dir(notExec), onPath)},
			wantPath: filepath.Join(onPath, testCommand), wantSource: SourcePath},
		{name: "explicit wins", req: ExecutableRequest{Explicit: filepath.Join(named, testCommand), PATH: onPath,
			Env: envOf(map[string]string{env: missing})}, wantPath: filepath.Join(named, testCommand), wantSource: SourceExplicit},
		{name: "environment default before the pin", req: ExecutableRequest{Env: envOf(map[string]string{env: filepath.Join(named, testCommand)}),
			Pins: map[string]string{testCommand: missing}, PATH: onPath}, wantPath: filepath.Join(named, testCommand), wantSource: SourceEnvironment},
		{name: "pin before PATH", req: ExecutableRequest{Pins: map[string]string{testCommand: filepath.Join(pinned, testCommand)}, PATH: onPath},
			wantPath: filepath.Join(pinned, testCommand), wantSource: SourcePin},
		{name: "explicit missing is not replaced", req: ExecutableRequest{Explicit: missing, PATH: onPath},
			refused: []string{"the template's command " + missing + ": does not exist", "--command /absolute/path"}},
		{name: "environment default not executable", req: ExecutableRequest{Env: envOf(map[string]string{env: notExec}), PATH: onPath},
			refused: []string{env + " in the worker's environment names " + notExec + ": is not executable", "unset it"}},
		{name: "pin missing", req: ExecutableRequest{Pins: map[string]string{testCommand: missing}, PATH: onPath},
			refused: []string{"runtime.defaults.provider_executables", missing, "does not exist"}},
		{name: "not on PATH", req: ExecutableRequest{PATH: pathList(t.TempDir(), t.TempDir())},
			refused: []string{"not found on PATH (2 directories searched)", "install " + testCommand, "--command /absolute/path", env + "="}},
		{name: "only unusable copies on PATH", req: ExecutableRequest{PATH: filepath.Dir(notExec)},
			refused: []string{"no copy on PATH is usable", notExec + " (path): is not executable"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := c.req
			req.Command = testCommand
			got, err := LocateExecutable(req)
			if c.refused != nil {
				requireRefusal(t, err)
				for _, s := range c.refused {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("refusal %q does not say %q", err, s)
					}
				}
				// The resolver refuses the same way at a start.
				if _, rerr := ResolveExecutable(context.Background(), req); rerr == nil || rerr.Error() != err.Error() {
					t.Errorf("at a start: %v, want %v", rerr, err)
				}
				return
			}
			if err != nil || got.Path != c.wantPath || got.Source != c.wantSource || got.Version != "" {
				t.Fatalf("got %+v, %v; want %s from %s", got, err, c.wantPath, c.wantSource)
			}
		})
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("LocateExecutable ran a candidate")
	}
}
