package test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/devserver"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

// jam dev keeps no more room sessions in memory than its workflow cache holds: the embedded
// Temporal server starts the process's first SDK worker, which sizes the SDK's one cache, so
// the bound must be set before the server starts (it was not, and 10,000 dormant rooms stayed
// resident). Counted in jam dev's own goroutines: a cached RoomSession parks coroutines there.
func TestJamDevKeepsNoMoreRoomSessionsInMemoryThanItsWorkflowCache(t *testing.T) {
	t.Parallel()
	const cache, rooms = 10, 30
	pprofAddr, err := devserver.FreeAddress("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	d := startDevEnv(t, filepath.Join(t.TempDir(), "jam-home"),
		ownedEnv(t, t.TempDir(), "JAM_WORKFLOW_CACHE_SIZE="+strconv.Itoa(cache)), "--pprof-listen", pprofAddr)
	c := d.client
	var agent api.AgentBody
	must(t, c.Do(context.Background(), http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "cached", Kind: domain.AgentOwned}, &agent))
	// A bound room runs no workflow until its first message: message every room.
	msgs := make([]api.MessageBody, rooms)
	for i := range msgs {
		room, _ := roomWith(t, c, fmt.Sprintf("room-%d", i), agent.ID)
		msgs[i] = postText(t, c, room.ID, "hello")
	}
	for _, m := range msgs {
		awaitReply(t, c, m, 60*time.Second)
	}
	// Every session ran its tasks; only the cache's worth stays (eviction is synchronous with
	// the task that overflows it, so this holds once they all answered).
	var resident int
	wait.Eventually(t, 10*time.Second, func() error {
		resident = residentRoomSessions(t, pprofAddr)
		if resident > cache {
			return fmt.Errorf("%d room sessions resident with a cache of %d", resident, cache)
		}
		return nil
	}, "jam dev to hold at most its workflow cache of room sessions")
	if resident == 0 {
		t.Fatal("no room session resident: the count no longer sees them (the check would pass for nothing)")
	}
}

// residentRoomSessions counts the RoomSession workflow functions parked in jam dev's
// goroutines (pprof's goroutine profile, debug=1: "N @ ..." records with their frames).
func residentRoomSessions(t *testing.T, addr string) int {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, rec := range strings.Split(string(b), "\n\n") {
		count, rest, ok := strings.Cut(rec, " @ ")
		if !ok || !strings.Contains(rest, "jam/workflows.RoomSession+") {
			continue
		}
		if k, err := strconv.Atoi(strings.TrimSpace(count)); err == nil {
			n += k
		}
	}
	return n
}
