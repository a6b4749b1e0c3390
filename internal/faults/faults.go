// Package faults holds the crash-test pause points. A point pauses only when the worker was
// started with JAM_FAULT_PAUSE naming it (comma-separated) and JAM_FAULT_DIR set: it drops a
// file named after the point into that directory and blocks until its context ends, so a
// test can SIGKILL the worker exactly there. Production workers never set either variable.
package faults

import (
	"context"
	"errors"
	"fmt"
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

// ErrInjected is the failure an injected fault point returns.
var ErrInjected = errors.New("fault injected")

// FailFromEnv returns the failure hook the environment asks for, or nil: a point named in
// JAM_FAULT_FAIL (comma-separated) fails while the file <JAM_FAULT_DIR>/<point>.fail exists,
// so a test removes the cause by deleting the file. Production workers never set either.
func FailFromEnv(getenv func(string) string) func(point string) error {
	points, dir := getenv("JAM_FAULT_FAIL"), getenv("JAM_FAULT_DIR")
	if points == "" || dir == "" {
		return nil
	}
	want := map[string]bool{}
	for _, p := range strings.Split(points, ",") {
		if p = strings.TrimSpace(p); p != "" && filepath.Base(p) == p {
			want[p] = true
		}
	}
	return func(point string) error {
		if !want[point] {
			return nil
		}
		if _, err := os.Stat(filepath.Join(dir, point+".fail")); err == nil {
			return fmt.Errorf("%w at %s", ErrInjected, point)
		}
		return nil
	}
}
