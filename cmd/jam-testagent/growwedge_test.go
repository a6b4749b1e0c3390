package main

import (
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"
)

// [[wedge]] hangs the turn with nothing on the stream until session/cancel ends it.
func TestWedgeHangsSilentlyUntilCancelled(t *testing.T) {
	ctx := testCtx(t)
	h := startAgent(t, config{StateDir: t.TempDir()})
	sid := h.newSession(t, ctx)
	type result struct {
		resp acp.PromptResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := h.prompt(ctx, sid, "[[wedge]] stuck")
		done <- result{resp, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("a wedged turn ended by itself: %+v %v", r.resp, r.err)
	case <-time.After(500 * time.Millisecond):
	}
	if n := len(h.client.take()); n != 0 {
		t.Errorf("a wedged turn emitted %d updates", n)
	}
	if err := h.conn.Cancel(ctx, acp.CancelNotification{SessionId: sid}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil || r.resp.StopReason != acp.StopReasonCancelled {
			t.Fatalf("cancelled wedge = %+v, %v", r.resp, r.err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the wedged turn did not end on session/cancel")
	}
	if got := h.mustReply(t, ctx, sid, "after"); got != "echo: after" {
		t.Errorf("the session after a wedge replied %q", got)
	}
}

// [[grow N]] takes N MiB more for the life of the process and says how much it holds.
func TestGrowKeepsWhatItAllocated(t *testing.T) {
	ctx := testCtx(t)
	h := startAgent(t, config{StateDir: t.TempDir()})
	sid := h.newSession(t, ctx)
	before := ballastMiB()
	got := h.mustReply(t, ctx, sid, "[[grow 3]]")
	if after := ballastMiB(); after != before+3 {
		t.Fatalf("ballast went from %d to %d MiB", before, after)
	}
	if want := "holding"; len(got) < len(want) || got[:len(want)] != want {
		t.Errorf("reply %q", got)
	}
	if n := mebibytes("nonsense"); n != 1 {
		t.Errorf("an invalid size grew %d MiB", n)
	}
}

// [[wedge-once]] wedges the first process of a state directory only: the one started after
// it (a watchdog's recycle) answers the same message.
func TestWedgeOnceWedgesOnlyTheFirstProcessOfAStateDir(t *testing.T) {
	state := t.TempDir()
	first, second := &agent{cfg: config{StateDir: state}}, &agent{cfg: config{StateDir: state}}
	if !first.firstWedge() {
		t.Fatal("the first process did not wedge")
	}
	if first.firstWedge() || second.firstWedge() {
		t.Fatal("a process wedged again after the first")
	}
	ctx := testCtx(t)
	h := startAgent(t, config{StateDir: state})
	sid := h.newSession(t, ctx)
	if got := h.mustReply(t, ctx, sid, "[[wedge-once]] again"); got != "echo: again" {
		t.Fatalf("after the first wedge: %q", got)
	}
}
