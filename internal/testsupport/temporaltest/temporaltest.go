// Package temporaltest starts an in-process Temporal server (in memory, free ports, no UI)
// for integration tests, and dials clients to it.
package temporaltest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/jam-dev/jam/internal/contract"
	"github.com/jam-dev/jam/internal/devserver"
)

// Start runs a server for the test, with Jam's search attributes registered as `jam
// migrate temporal` registers them on an operator's cluster, and stops it when the test ends.
func Start(t testing.TB) *devserver.Server {
	t.Helper()
	return start(t, contract.SearchAttributeNames())
}

// StartBare runs a server without Jam's search attributes: a cluster nobody migrated.
func StartBare(t testing.TB) *devserver.Server {
	t.Helper()
	return start(t, nil)
}

func start(t testing.TB, attrs []string) *devserver.Server {
	t.Helper()
	s, err := devserver.Start(devserver.Options{
		FrontendAddress:  "127.0.0.1:0",
		Logger:           slog.New(slog.NewTextHandler(io.Discard, nil)),
		LogLevel:         slog.LevelError,
		SearchAttributes: attrs,
	})
	if err != nil {
		t.Fatalf("start in-process temporal: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

// Dial connects a client to address in the default namespace, closed when the test ends.
func Dial(t testing.TB, address string) client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.DialContext(ctx, client.Options{
		HostPort: address,
		Logger:   sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	})
	if err != nil {
		t.Fatalf("dial temporal at %s: %v", address, err)
	}
	t.Cleanup(c.Close)
	return c
}
