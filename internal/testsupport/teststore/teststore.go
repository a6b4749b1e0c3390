// Package teststore opens fresh, migrated stores for tests (see testdb for where they live).
package teststore

import (
	"context"
	"testing"
	"time"

	"github.com/jam-dev/jam/internal/store"
	"github.com/jam-dev/jam/internal/testsupport/testdb"
)

// Open opens and migrates the store at url, closing it when the test ends.
func Open(t testing.TB, url string) *store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := store.Open(ctx, url)
	if err != nil {
		t.Fatalf("open test store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate test store: %v", err)
	}
	return s
}

// SQLite returns a migrated store on a new SQLite file.
func SQLite(t testing.TB) *store.Store { t.Helper(); return Open(t, testdb.SQLiteURL(t)) }

// Postgres returns a migrated store on a new Postgres database (see testdb.PostgresURL).
func Postgres(t testing.TB) *store.Store { t.Helper(); return Open(t, testdb.PostgresURL(t)) }

// ForEach runs fn once per dialect as subtests "sqlite" and "postgres", each on a fresh store.
func ForEach(t *testing.T, fn func(t *testing.T, s *store.Store)) {
	t.Helper()
	testdb.ForEachURL(t, func(t *testing.T, url string) { fn(t, Open(t, url)) })
}
