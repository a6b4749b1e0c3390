package workers

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jam-dev/jam/activities"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/provider"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// A node whose host store is shared kills the runtimes whose rooms may move once its
// heartbeat has not been recorded for the fence interval (another node may soon run those
// rooms on the same files), tells their sessions, once per outage, and keeps taking runtimes
// afterwards; runtimes pinned to the node stay. A node with a host store of its own never
// fences.
func TestANodeSharingItsHostStoreKillsItsMovableRuntimesWhenItsHeartbeatLapses(t *testing.T) {
	for _, shared := range []bool{true, false} {
		var mu sync.Mutex
		var exits []RuntimeExit
		r := NewRuntimeRegistry(quietLog(), nil, func(e RuntimeExit) {
			mu.Lock()
			defer mu.Unlock()
			exits = append(exits, e)
		})
		t.Cleanup(func() { r.Shutdown(context.Background()) })
		movable := agentSpec(t, uuid.New(), 1)
		movable.MayMove = true
		rt, p := startRuntime(t, r, movable)
		// A runtime whose room cannot move (sandboxed, or state outside its host root) is
		// pinned to this node anyway: the fence leaves it.
		pinned, _ := startRuntime(t, r, agentSpec(t, uuid.New(), 1))
		cfg := Config{Node: "n1", Logger: quietLog()}
		if shared {
			cfg.HostStore = t.TempDir()
		}
		w := &Workers{runtimes: r, fenceDone: make(chan struct{})}
		w.lastBeat.Store(time.Now().Add(-time.Minute).UnixNano()) // lapsed
		ctx, cancel := context.WithCancel(context.Background())
		go w.fence(ctx, cfg, 2*time.Second, &activities.Sandbox{})
		if !shared {
			wait.Never(t, 2500*time.Millisecond, func() bool { return r.Len() != 2 }, "a node with its own host store fenced")
			cancel()
			<-w.fenceDone
			continue
		}
		killed := time.Now()
		select {
		case <-rt.Exited():
		case <-time.After(15 * time.Second):
			t.Fatal("the lapsed node's runtime was not killed")
		}
		requireGroupGone(t, p.PID)
		// Killed outright: no session/close and no SIGTERM grace in between.
		assert.Less(t, time.Since(killed), 2*time.Second+provider.ChildShutdownGrace)
		assert.True(t, pinned.Liveness().ProcessAlive, "the fence killed a runtime whose room cannot move")
		wait.Eventually(t, 5*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(exits) == 1 && exits[0].Reason == domain.RuntimeFenced
		}, "the session told its runtime was fenced")
		// Once per outage: a runtime started meanwhile stays until the next lapse.
		again := agentSpec(t, uuid.New(), 1)
		again.MayMove = true
		startRuntime(t, r, again)
		wait.Never(t, 2500*time.Millisecond, func() bool { return r.Len() != 2 }, "fenced twice for one outage")
		w.lastBeat.Store(time.Now().Add(-time.Minute).UnixNano()) // a later beat, lapsed again
		wait.Eventually(t, 10*time.Second, func() bool { return r.Len() == 1 }, "the next lapse to fence again")
		cancel()
		<-w.fenceDone
		mu.Lock()
		require.Len(t, exits, 2)
		mu.Unlock()
	}
	assert.Less(t, FenceAfter+2*time.Second, domain.NodeFencedAfter,
		"the fence (checked every second) comes well before others move the node's rooms")
}
