package test

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/devserver"
	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/temporaltest"
	"github.com/jam-dev/jam/internal/testsupport/testagent"
	"github.com/jam-dev/jam/internal/testsupport/testdb"
)

// The production shape with the worker killed mid-turn (SIGKILL: no activity completes, no
// teardown runs) and a new worker started under the same node name: the queued message is
// answered exactly once and the killed worker's child does not outlive it.
func TestAWorkerKilledMidTurnAnswersTheMessageExactlyOnce(t *testing.T) {
	dbURL := testdb.PostgresURL(t)
	ts := temporaltest.Start(t)
	ctx := context.Background()
	exe := testagent.Binary(t)
	const token = "crash-test-token"
	listen, err := devserver.FreeAddress("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	base := []string{"JAM_DATABASE_URL=" + dbURL, "JAM_TEMPORAL_ADDRESS=" + ts.FrontendAddress()}
	if out, err := runJam(t, base, "migrate", "up"); err != nil {
		t.Fatalf("migrate up: %v\n%s", err, out)
	}
	startJam(t, append(base, "JAM_HOME="+t.TempDir(), "JAM_API_TOKEN="+token), "server", "--listen", listen)
	apiURL := "http://" + listen
	waitHTTP(t, apiURL+"/readyz", http.StatusOK, 30*time.Second)
	c := apiClient(apiURL, token)

	workerEnv := append(append(base, "JAM_HOME="+filepath.Join(t.TempDir(), "node-w1")), ownedEnv(t, t.TempDir())...)
	worker := startJam(t, workerEnv, "worker", "--node", "w1")
	var agent api.AgentBody
	must(t, c.Do(ctx, http.MethodPost, "/v1/agents", api.CreateAgentRequest{Name: "builder", Kind: domain.AgentOwned}, &agent))
	room, session := roomWith(t, c, "lab", agent.ID)

	m := postText(t, c, room.ID, "[[slow 5]] long work")
	deadline := time.Now().Add(60 * time.Second)
	var pid int
	for pid == 0 {
		if s := getSession(t, c, session); s.Runtime != nil && s.Runtime.InTurn && s.Runtime.PID != 0 {
			pid = s.Runtime.PID
		}
		if time.Now().After(deadline) {
			t.Fatal("the turn never started")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := worker.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-worker.exited
	// No orphan: the child dies with its worker.
	for start := time.Now(); alive(pid); time.Sleep(50 * time.Millisecond) {
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the killed worker's child %d is still running", pid)
		}
	}
	if rs := repliesTo(t, c, m); len(rs) != 0 {
		t.Fatalf("answered by a dead worker: %+v", rs)
	}

	killedAt := time.Now()
	worker2 := startJam(t, workerEnv, "worker", "--node", "w1")
	awaitReply(t, c, m, 90*time.Second)
	t.Logf("answered %s after the kill", time.Since(killedAt).Round(time.Millisecond))
	time.Sleep(time.Second)
	if n := len(repliesTo(t, c, m)); n != 1 {
		t.Fatalf("the message was answered %d times, want exactly once", n)
	}
	if got := providerChildren(t, 0, exe); len(got) != 1 || parentOf(got[0]) != worker2.cmd.Process.Pid {
		t.Fatalf("provider processes %v, want one child of the new worker %d", got, worker2.cmd.Process.Pid)
	}
	if code := worker2.interrupt(45 * time.Second); code != 0 {
		t.Fatalf("worker exited %d after Ctrl-C", code)
	}
	awaitChildren(t, 0, exe, 0, 5*time.Second)
}
