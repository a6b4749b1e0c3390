// Package faults holds the crash-test pause points. A point pauses only when the worker was
// started with JAM_FAULT_PAUSE naming it (comma-separated) and JAM_FAULT_DIR set: it drops a
// file named after the point into that directory and blocks until its context ends, so a
// test can SIGKILL the worker exactly there. Production workers never set either variable.
package faults

import (
	"context"
	"os"
	"path/filepath"
	"strings"
)

// FromEnv returns the pause hook the environment asks for, or nil.
func FromEnv(getenv func(string) string) func(ctx context.Context, point string) {
	points, dir := getenv("JAM_FAULT_PAUSE"), getenv("JAM_FAULT_DIR")
	if points == "" || dir == "" {
		return nil
	}
	want := map[string]bool{}
	for _, p := range strings.Split(points, ",") {
		if p = strings.TrimSpace(p); p != "" && filepath.Base(p) == p {
			want[p] = true
		}
	}
	return func(ctx context.Context, point string) {
		if !want[point] {
			return
		}
		_ = os.WriteFile(filepath.Join(dir, point), nil, 0o600)
		<-ctx.Done()
	}
}
