package workers

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jam-dev/jam/internal/testsupport/temporaltest"
	"github.com/jam-dev/jam/internal/testsupport/teststore"
)

func TestWorkersRegisterTheNodeAndKeepItsHeartbeatAlive(t *testing.T) {
	ts := temporaltest.Start(t)
	st := teststore.SQLite(t)
	ctx := context.Background()
	w, err := Start(ctx, Config{
		Client: temporaltest.Dial(t, ts.FrontendAddress()), Store: st, Node: "n1", DataDir: t.TempDir(),
		Version: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		HeartbeatInterval: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	first, err := st.GetNode(ctx, "n1")
	if err != nil {
		t.Fatalf("node not registered at start: %v", err)
	}
	waitFor(t, func() bool {
		n, err := st.GetNode(ctx, "n1")
		return err == nil && n.HeartbeatAt.After(first.HeartbeatAt)
	})

	// An operator who clears the row does not make the node vanish for good.
	if _, err := st.DB().ExecContext(ctx, `DELETE FROM nodes WHERE name = 'n1'`); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool {
		n, err := st.GetNode(ctx, "n1")
		return err == nil && n.StartedAt.Equal(first.StartedAt)
	})

	w.Stop()
	stopped, _ := st.GetNode(ctx, "n1")
	time.Sleep(200 * time.Millisecond)
	after, _ := st.GetNode(ctx, "n1")
	if !after.HeartbeatAt.Equal(stopped.HeartbeatAt) {
		t.Fatal("a stopped worker kept heartbeating")
	}
}

func TestWorkersRefuseABadNodeName(t *testing.T) {
	if _, err := Start(context.Background(), Config{Node: "no spaces"}); err == nil {
		t.Fatal("accepted")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
