// Package wait is how tests wait: Eventually polls until a condition holds, Never polls
// through a window and fails if a condition ever holds. Both poll in the test's own goroutine
// (a condition may call t.Fatal), with a short backoff, and fail with what was awaited and
// what was last observed. Tests use these instead of hand-written deadline loops and instead
// of sleeping and then asserting that nothing happened.
package wait

import (
	"fmt"
	"time"
)

// TB is the part of testing.TB the helpers use; *testing.T and *testing.B satisfy it.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Cond is a condition under test: a func() bool holds when it returns true; a func() error
// holds when it returns nil, and its error says what was observed instead.
type Cond interface {
	func() bool | func() error
}

// The backoff between polls: the first poll is immediate, then the pause doubles from
// firstPause up to maxPause, and never runs past the deadline.
const (
	firstPause = 5 * time.Millisecond
	maxPause   = 100 * time.Millisecond
)

// Eventually polls cond until it holds, and fails t (Fatalf) when it does not hold within
// timeout, naming what was awaited (what, formatted with args) and the last observation:
// the last error of a func() error, or the number of polls of a func() bool. cond is checked
// once more at the deadline, so a condition that holds by then passes.
func Eventually[C Cond](t TB, timeout time.Duration, cond C, what string, args ...any) {
	t.Helper()
	check := asCheck(cond)
	start := time.Now()
	deadline := start.Add(timeout)
	pause := firstPause
	for polls := 1; ; polls++ {
		err := check()
		if err == nil {
			return
		}
		now := time.Now()
		if !now.Before(deadline) {
			t.Fatalf("waited %s for %s: not so after %d polls; last observed: %v",
				timeout, describe(what, args), polls, err)
			return
		}
		time.Sleep(min(pause, deadline.Sub(now)))
		pause = min(2*pause, maxPause)
	}
}

// Never polls happened through window and fails t (Fatalf) as soon as it holds, naming what
// must not happen (what, formatted with args) and when it was seen. It returns after window
// when happened never held.
//
// A negative test cannot prove that something never happens; the best it can do is watch
// for it over a bounded window long enough for it to have happened were the code wrong
// (a Reconcile period, a handshake bound, a second delivery). Never makes that window
// explicit, and unlike a sleep followed by one check it also catches something that happens
// and is then undone inside the window.
func Never(t TB, window time.Duration, happened func() bool, what string, args ...any) {
	t.Helper()
	start := time.Now()
	end := start.Add(window)
	pause := firstPause
	for polls := 1; ; polls++ {
		if happened() {
			t.Fatalf("%s: it did, %s into a %s window (poll %d)",
				describe(what, args), time.Since(start).Round(time.Millisecond), window, polls)
			return
		}
		now := time.Now()
		if !now.Before(end) {
			return
		}
		time.Sleep(min(pause, end.Sub(now)))
		pause = min(2*pause, maxPause)
	}
}

var errNotYet = fmt.Errorf("the condition did not hold")

func asCheck[C Cond](cond C) func() error {
	switch c := any(cond).(type) {
	case func() bool:
		return func() error {
			if c() {
				return nil
			}
			return errNotYet
		}
	case func() error:
		return c
	}
	panic("unreachable")
}

func describe(what string, args []any) string {
	if len(args) == 0 {
		return what
	}
	return fmt.Sprintf(what, args...)
}
