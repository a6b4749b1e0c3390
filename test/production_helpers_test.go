package test

import (
	"net/http"
	"testing"
	"time"

	"github.com/jam-dev/jam/api/client"
	"github.com/jam-dev/jam/internal/devserver"
	"github.com/jam-dev/jam/internal/testsupport/temporaltest"
	"github.com/jam-dev/jam/internal/testsupport/testdb"
)

// production is `jam migrate up` and `jam server` against Postgres and an in-process
// Temporal: the environment a `jam worker` joins (base) and an operator client.
type production struct {
	base   []string
	client *client.Client
	server *proc
	// url is the API's base URL, for the CLI (JAM_URL).
	url string
	// temporal is the Temporal frontend's address.
	temporal string
}

func startProductionServer(t *testing.T, token string) production {
	t.Helper()
	dbURL := testdb.PostgresURL(t)
	ts := temporaltest.Start(t)
	listen, err := devserver.FreeAddress("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	base := []string{"JAM_DATABASE_URL=" + dbURL, "JAM_TEMPORAL_ADDRESS=" + ts.FrontendAddress()}
	if out, err := runJam(t, base, "migrate", "up"); err != nil {
		t.Fatalf("migrate up: %v\n%s", err, out)
	}
	server := startJam(t, append(base, "JAM_HOME="+t.TempDir(), "JAM_API_TOKEN="+token), "server", "--listen", listen)
	waitHTTP(t, "http://"+listen+"/readyz", http.StatusOK, 30*time.Second)
	return production{base: base, client: apiClient("http://"+listen, token), server: server, url: "http://" + listen,
		temporal: ts.FrontendAddress()}
}
