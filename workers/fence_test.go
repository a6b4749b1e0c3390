package workers

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// A node whose host store is shared tears its runtimes down once its heartbeat has not been
// recorded for the fence interval (another node may run its rooms on the same files by then),
// tells their sessions, once per outage, and keeps taking runtimes afterwards. A node with a
// host store of its own never fences.
func TestANodeSharingItsHostStoreTearsItsRuntimesDownWhenItsHeartbeatLapses(t *testing.T) {
	for _, shared := range []bool{true, false} {
		var mu sync.Mutex
		var exits []RuntimeExit
		r := NewRuntimeRegistry(quietLog(), nil, func(e RuntimeExit) {
			mu.Lock()
			defer mu.Unlock()
			exits = append(exits, e)
		})
		t.Cleanup(func() { r.Shutdown(context.Background()) })
		rt, p := startRuntime(t, r, agentSpec(t, uuid.New(), 1))
		cfg := Config{Node: "n1", Logger: quietLog()}
		if shared {
			cfg.HostStore = t.TempDir()
		}
		w := &Workers{runtimes: r, fenceDone: make(chan struct{})}
		w.lastBeat.Store(time.Now().Add(-time.Minute).UnixNano()) // lapsed
		ctx, cancel := context.WithCancel(context.Background())
		go w.fence(ctx, cfg, 2*time.Second)
		if !shared {
			wait.Never(t, 2500*time.Millisecond, func() bool { return r.Len() != 1 }, "a node with its own host store fenced")
			cancel()
			<-w.fenceDone
			continue
		}
		select {
		case <-rt.Exited():
		case <-time.After(15 * time.Second):
			t.Fatal("the lapsed node's runtime was not torn down")
		}
		requireGroupGone(t, p.PID)
		wait.Eventually(t, 5*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(exits) == 1 && exits[0].Reason == domain.RuntimeFenced
		}, "the session told its runtime was fenced")
		// Once per outage: a runtime started meanwhile stays until the next lapse.
		startRuntime(t, r, agentSpec(t, uuid.New(), 1))
		wait.Never(t, 2500*time.Millisecond, func() bool { return r.Len() != 1 }, "fenced twice for one outage")
		w.lastBeat.Store(time.Now().Add(-time.Minute).UnixNano()) // a later beat, lapsed again
		wait.Eventually(t, 10*time.Second, func() bool { return r.Len() == 0 }, "the next lapse to fence again")
		cancel()
		<-w.fenceDone
		mu.Lock()
		require.Len(t, exits, 2)
		mu.Unlock()
	}
	assert.Equal(t, domain.NodeStaleAfter-domain.NodeHeartbeatInterval, FenceAfter, "the fence comes a heartbeat before others see the node stale")
}
