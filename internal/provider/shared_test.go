package provider

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
)

type member struct{ name string }

// A Shared host's members share the one process its first member started; a start that
// failed is not reused; the last member out is told so, and a session's own process is
// never pooled.
func TestASharedHostsMembersShareOneProcessUntilTheLastLeaves(t *testing.T) {
	var pool SharedPool[*member, int]
	ctx, host := context.Background(), uuid.New()
	starts := 0
	start := func(s *Shared[*member, int]) error { starts++; s.Proc = starts; return nil }
	a, b := &member{"a"}, &member{"b"}
	sa, err := pool.Attach(ctx, host, a, start)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := pool.Attach(ctx, host, b, start)
	if err != nil || sb != sa || starts != 1 || sb.Proc != 1 {
		t.Fatalf("second member: %v, same %v, starts %d", err, sb == sa, starts)
	}
	sa.Register("thread-a", a)
	if r, ok := sa.Route("thread-a"); !ok || r != a {
		t.Fatal("route")
	}
	if sa.Release(a) {
		t.Fatal("the first of two members out was told it was the last")
	}
	if _, ok := sa.Route("thread-a"); ok {
		t.Fatal("a released member's route is kept")
	}
	if !sb.Release(b) {
		t.Fatal("the last member out was not told")
	}
	// The released process is out of the pool: the next member starts another.
	if s, _ := pool.Attach(ctx, host, a, start); s == sa || starts != 2 {
		t.Fatalf("a member after the last left joined the old process (starts %d)", starts)
	}

	failed := errors.New("no handshake")
	other := uuid.New()
	if _, err := pool.Attach(ctx, other, a, func(*Shared[*member, int]) error { return failed }); !errors.Is(err, failed) {
		t.Fatalf("failed start: %v", err)
	}
	if s, err := pool.Attach(ctx, other, b, start); err != nil || s.Proc != 3 {
		t.Fatalf("after a failed start: %v %+v", err, s)
	}

	own1, _ := pool.Attach(ctx, uuid.Nil, a, start)
	own2, _ := pool.Attach(ctx, uuid.Nil, b, start)
	if own1 == own2 {
		t.Fatal("sessions without a Shared host share a process")
	}
	if got := own1.Exited(); len(got) != 1 || got[0] != a {
		t.Fatalf("exited members %v", got)
	}
}
