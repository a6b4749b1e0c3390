package store

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/testdb"
)

// BenchmarkWorkspaceOperationLifecycle measures one operation's journaled life (create
// running, then succeed: two validated upserts, two event rows) on each dialect.
//
//	make bench   (Postgres too when JAM_TEST_DATABASE_URL is set)
func BenchmarkWorkspaceOperationLifecycle(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) { benchLifecycle(b, testdb.SQLiteURL(b)) })
	b.Run("postgres", func(b *testing.B) {
		if os.Getenv(testdb.EnvURL) == "" {
			b.Skip("set " + testdb.EnvURL)
		}
		benchLifecycle(b, testdb.PostgresURL(b))
	})
}

func benchLifecycle(b *testing.B, url string) {
	ctx := context.Background()
	s, err := Open(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	ws := newWorkspace(b, s)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		op := domain.WorkspaceOperation{
			ID: uuid.New(), WorkspaceID: ws.workspace, RuntimeHostID: ws.host, RuntimeSessionID: ws.session,
			Kind: domain.WorkspaceOpExport, State: domain.OpRunning, StartedAt: time.Now(), UpdatedAt: time.Now(),
		}
		if _, err := s.UpsertWorkspaceOperation(ctx, op); err != nil {
			b.Fatal(err)
		}
		end := time.Now()
		op.State, op.FinishedAt, op.UpdatedAt = domain.OpSucceeded, &end, end
		if _, err := s.UpsertWorkspaceOperation(ctx, op); err != nil {
			b.Fatal(err)
		}
	}
}
