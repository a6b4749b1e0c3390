package wait

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a TB whose Fatalf records the message and ends its goroutine, as testing.T's does.
type recorder struct {
	failed bool
	msg    string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls f with a recorder in its own goroutine (Fatalf ends it) and returns the recorder.
func run(f func(TB)) *recorder {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	return r
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	start := time.Now()
	r := run(func(tb TB) {
		Eventually(tb, 5*time.Second, func() bool { return n.Add(1) == 4 }, "the fourth poll")
	})
	if r.failed {
		t.Fatalf("failed: %s", r.msg)
	}
	if n.Load() != 4 {
		t.Fatalf("%d polls, want 4", n.Load())
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("took %s: the backoff is not short", took)
	}
}

func TestEventuallyAcceptsAConditionThatReturnsAnError(t *testing.T) {
	t.Parallel()
	var n int
	r := run(func(tb TB) {
		Eventually(tb, 5*time.Second, func() error {
			if n++; n < 3 {
				return fmt.Errorf("poll %d", n)
			}
			return nil
		}, "the third poll")
	})
	if r.failed || n != 3 {
		t.Fatalf("failed %v (%s) after %d polls", r.failed, r.msg, n)
	}
}

func TestEventuallyFailsAtItsTimeoutSayingWhatAndTheLastObservation(t *testing.T) {
	t.Parallel()
	var n int
	start := time.Now()
	r := run(func(tb TB) {
		Eventually(tb, 200*time.Millisecond, func() error {
			n++
			return fmt.Errorf("presence %s", "dormant")
		}, "session %d to be live", 7)
	})
	took := time.Since(start)
	if !r.failed {
		t.Fatal("did not fail")
	}
	for _, want := range []string{"200ms", "session 7 to be live", "last observed: presence dormant"} {
		if !strings.Contains(r.msg, want) {
			t.Errorf("message %q does not say %q", r.msg, want)
		}
	}
	if took < 200*time.Millisecond || took > 2*time.Second {
		t.Errorf("failed after %s, want about 200ms", took)
	}
	if n < 3 {
		t.Errorf("%d polls in 200ms", n)
	}
}

func TestEventuallyWithABoolSaysTheConditionDidNotHold(t *testing.T) {
	t.Parallel()
	r := run(func(tb TB) {
		Eventually(tb, 50*time.Millisecond, func() bool { return false }, "nothing")
	})
	if !r.failed || !strings.Contains(r.msg, "for nothing") || !strings.Contains(r.msg, "did not hold") {
		t.Fatalf("failed %v: %q", r.failed, r.msg)
	}
}

func TestEventuallyChecksOnceMoreAtTheDeadline(t *testing.T) {
	t.Parallel()
	start := time.Now()
	r := run(func(tb TB) {
		Eventually(tb, 100*time.Millisecond, func() bool { return time.Since(start) >= 100*time.Millisecond }, "the deadline")
	})
	if r.failed {
		t.Fatalf("failed: %s", r.msg)
	}
}

func TestNeverWatchesTheWholeWindow(t *testing.T) {
	t.Parallel()
	var n int
	start := time.Now()
	r := run(func(tb TB) {
		Never(tb, 150*time.Millisecond, func() bool { n++; return false }, "anything")
	})
	if r.failed {
		t.Fatalf("failed: %s", r.msg)
	}
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Fatalf("returned after %s, before the window ended", took)
	}
	if n < 3 {
		t.Fatalf("%d polls in the window", n)
	}
}

func TestNeverFailsAsSoonAsTheConditionHolds(t *testing.T) {
	t.Parallel()
	var n int
	start := time.Now()
	r := run(func(tb TB) {
		Never(tb, 10*time.Second, func() bool { n++; return n == 3 }, "a %s reply", "second")
	})
	if !r.failed || !strings.Contains(r.msg, "a second reply") || !strings.Contains(r.msg, "poll 3") {
		t.Fatalf("failed %v: %q", r.failed, r.msg)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("failed after %s, not as soon as it happened", took)
	}
}

// The helpers take *testing.T itself; a condition may call t.Fatal from the test's goroutine.
func TestTheHelpersTakeATestingT(t *testing.T) {
	t.Parallel()
	Eventually(t, time.Second, func() error { return nil }, "nothing")
	Never(t, 10*time.Millisecond, func() bool { return false }, "anything")
}
