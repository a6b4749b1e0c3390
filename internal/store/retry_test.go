package store

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
)

// A busy SQLite database is what InTx retries; the classification must hold for the error
// the driver really returns, not only for one built by hand.
func TestABusySQLiteDatabaseIsRetryable(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "busy.db")
	open := func() *sql.DB {
		db, err := sql.Open("sqlite", "file:"+path+"?_txlock=immediate&_pragma=journal_mode(WAL)")
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(1)
		t.Cleanup(func() { db.Close() })
		return db
	}
	holder, contender := open(), open()
	ctx := context.Background()
	if _, err := holder.ExecContext(ctx, `CREATE TABLE t (x INTEGER)`); err != nil {
		t.Fatal(err)
	}
	tx, err := holder.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	_, err = contender.BeginTx(ctx, nil)
	if err == nil {
		t.Fatal("a second writer got the lock")
	}
	if !retryable(err) {
		t.Fatalf("%v is not classified retryable", err)
	}
	if retryable(context.Canceled) {
		t.Fatal("a canceled context must not be retried")
	}
}
