package test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jam-dev/jam/api"
	"github.com/jam-dev/jam/internal/devserver"
	"github.com/jam-dev/jam/internal/testsupport/temporaltest"
	"github.com/jam-dev/jam/internal/testsupport/testdb"
	"github.com/jam-dev/jam/internal/testsupport/wait"
	"github.com/jam-dev/jam/schema"
)

// The production shape: `jam migrate`, `jam server` and `jam worker` as separate processes
// against Postgres and an external Temporal.
func TestServerAndWorkerRunAgainstPostgresAndExternalTemporal(t *testing.T) {
	t.Parallel()
	dbURL := testdb.PostgresURL(t)
	// A cluster nobody ran `jam migrate temporal` against.
	ts := temporaltest.StartBare(t)
	ctx := context.Background()
	const token = "prod-test-token"
	listen, err := devserver.FreeAddress("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	base := []string{"JAM_DATABASE_URL=" + dbURL, "JAM_TEMPORAL_ADDRESS=" + ts.FrontendAddress()}

	// An unmigrated database is refused with the command that fixes it.
	refused := startJam(t, append(base, "JAM_HOME="+t.TempDir(), "JAM_API_TOKEN="+token, "JAM_LISTEN="+listen), "server")
	if code := refused.exitCode(30 * time.Second); code == 0 || !strings.Contains(refused.stderrText(), "jam migrate up") {
		t.Fatalf("server on an unmigrated database: exit %d, stderr %s", code, refused.stderrText())
	}

	latest, err := schema.LatestVersion(schema.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("schema version %d of %d", latest, latest)
	out, err := runJam(t, base, "migrate", "up")
	if err != nil || !strings.Contains(out, want) {
		t.Fatalf("migrate up: %v\n%s", err, out)
	}
	if out, err = runJam(t, base, "migrate", "version"); err != nil || !strings.Contains(out, want) {
		t.Fatalf("migrate version: %v\n%s", err, out)
	}

	server := startJam(t, append(base, "JAM_HOME="+t.TempDir(), "JAM_API_TOKEN="+token), "server", "--listen", listen)
	apiURL := "http://" + listen

	// Without Jam's search attributes the server is not ready and the worker refuses to
	// start, both saying how to create them; `jam migrate temporal` does.
	waitHTTP(t, apiURL+"/readyz", http.StatusServiceUnavailable, 30*time.Second)
	resp, err := http.Get(apiURL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var ready api.HealthBody
	_ = json.NewDecoder(resp.Body).Decode(&ready)
	_ = resp.Body.Close()
	if ready.Checks["search_attributes"] != "missing" || !strings.Contains(ready.Message, "jam migrate temporal") {
		t.Fatalf("readyz on a bare namespace: %+v", ready)
	}
	if _, err := runJam(t, append(base, "JAM_HOME="+t.TempDir()), "worker", "--node", "w0"); err == nil ||
		!strings.Contains(err.Error(), "jam migrate temporal") || !strings.Contains(err.Error(), "temporal operator search-attribute create") {
		t.Fatalf("worker on a bare namespace: %v", err)
	}
	if out, err := runJam(t, base, "migrate", "temporal"); err != nil || !strings.Contains(out, "JamRoom") {
		t.Fatalf("migrate temporal: %v\n%s", err, out)
	}
	if out, err := runJam(t, base, "migrate", "temporal"); err != nil {
		t.Fatalf("migrate temporal again: %v\n%s", err, out)
	}
	waitHTTP(t, apiURL+"/readyz", http.StatusOK, 30*time.Second)

	workerHome := filepath.Join(t.TempDir(), "node-w1")
	worker := startJam(t, append(base, "JAM_HOME="+workerHome), "worker", "--node", "w1")
	c := apiClient(apiURL, token)
	var nodes api.NodeList
	wait.Eventually(t, 30*time.Second, func() error {
		if err := c.Do(ctx, http.MethodGet, "/v1/nodes", nil, &nodes); err != nil {
			t.Fatal(err)
		}
		if len(nodes.Items) != 1 {
			return fmt.Errorf("nodes %+v", nodes.Items)
		}
		return nil
	}, "one node")
	if len(nodes.Items) != 1 || nodes.Items[0].Name != "w1" || nodes.Items[0].DataDir != workerHome {
		t.Fatalf("nodes %+v", nodes.Items)
	}
	// The API process starts a workflow; the worker process runs it and its node activity.
	var probe api.NodeProbeBody
	if err := c.Do(ctx, http.MethodPost, "/v1/nodes/w1/probe", nil, &probe); err != nil {
		t.Fatal(err)
	}
	if probe.Report.PID != worker.cmd.Process.Pid {
		t.Fatalf("probe answered by pid %d, want the worker %d", probe.Report.PID, worker.cmd.Process.Pid)
	}
	if code := worker.interrupt(45 * time.Second); code != 0 {
		t.Fatalf("worker exited %d after Ctrl-C", code)
	}
	// With the node's worker gone, a probe reports the node as not answering, in bounded time.
	start := time.Now()
	err = c.Do(ctx, http.MethodPost, "/v1/nodes/w1/probe", nil, nil)
	if !isStatus(err, http.StatusGatewayTimeout) || time.Since(start) > 20*time.Second {
		t.Fatalf("probe of a stopped node: %v after %s", err, time.Since(start))
	}
	// Readiness follows Temporal: with the cluster gone the server stays up and says so.
	if err := ts.Stop(); err != nil {
		t.Fatal(err)
	}
	waitHTTP(t, apiURL+"/readyz", http.StatusServiceUnavailable, 15*time.Second)
	waitHTTP(t, apiURL+"/healthz", http.StatusOK, time.Second)
	if code := server.interrupt(30 * time.Second); code != 0 {
		t.Fatalf("server exited %d after Ctrl-C", code)
	}
	if out, err = runJam(t, base, "migrate", "down", "--all"); err != nil || !strings.Contains(out, fmt.Sprintf("schema version 0 of %d", latest)) {
		t.Fatalf("migrate down: %v\n%s", err, out)
	}
}
