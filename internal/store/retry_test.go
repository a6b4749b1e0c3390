package store

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"
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

// A SQLite writer queued behind another in the same process waits in Jam's queue, not in
// SQLite's busy handler: it gives up when its context ends, and runs once the holder
// commits.
func TestASQLiteWriterQueuesBehindTheHolderAndHonoursItsContext(t *testing.T) {
	t.Parallel()
	s := openTest(t, "sqlite:"+filepath.Join(t.TempDir(), "queue.db"))
	ctx := context.Background()
	release := holdWriter(t, s)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := s.InTx(short, func(*Q) error { return nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a writer behind the holder: %v, want its context's end", err)
	}
	ran := make(chan error, 1)
	go func() { ran <- s.InTx(ctx, func(*Q) error { return nil }) }()
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := <-ran; err != nil {
		t.Fatalf("the queued writer after the holder committed: %v", err)
	}
}

// holdWriter runs an InTx that holds the writer lock (the exclusive advisory lock on
// Postgres, the file's on SQLite) until release is called; release waits for its commit.
func holdWriter(t *testing.T, s *Store) (release func() error) {
	t.Helper()
	held, stop, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- s.InTx(context.Background(), func(*Q) error {
			close(held)
			<-stop
			return nil
		})
	}()
	select {
	case <-held:
	case err := <-done:
		t.Fatalf("hold the writer lock: %v", err)
	}
	return func() error {
		close(stop)
		return <-done
	}
}
