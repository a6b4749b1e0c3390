package store

import (
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jam-dev/jam/internal/domain"
	"github.com/jam-dev/jam/internal/testsupport/testdb"
	"github.com/jam-dev/jam/internal/testsupport/wait"
)

func TestPostgresPreparesAStatementOncePerConnection(t *testing.T) {
	t.Parallel()
	s := openTest(t, testdb.PostgresURL(t))
	ctx := context.Background()
	var prepared int
	if err := s.InTx(ctx, func(q *Q) error {
		for i := range 3 {
			var n int
			if err := q.get(ctx, &n, `SELECT ?::int + 40`, i); err != nil {
				return err
			}
			if n != i+40 {
				t.Errorf("run %d read %d", i, n)
			}
		}
		// No parameters: the simple protocol, on the same connection as the runs above.
		return q.get(ctx, &prepared, `SELECT count(*) FROM pg_prepared_statements WHERE statement = 'SELECT $1::int + 40'`)
	}); err != nil {
		t.Fatal(err)
	}
	if prepared != 1 {
		t.Fatalf("the connection holds %d prepared statements of the text, want 1", prepared)
	}
}

func TestAStatementOutdatedByAMigrationIsPreparedAgain(t *testing.T) {
	t.Parallel()
	s := openTest(t, testdb.PostgresURL(t))
	s.DB().SetMaxOpenConns(1) // one connection: the second read meets the statement the first prepared
	ctx := context.Background()
	if _, err := s.DB().ExecContext(ctx, `CREATE TABLE drift (a int)`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx, `INSERT INTO drift VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	type row struct {
		A int  `db:"a"`
		B *int `db:"b"`
	}
	read := func() ([]row, error) {
		var rows []row
		err := s.InTx(ctx, func(q *Q) error { return q.selectAll(ctx, &rows, `SELECT * FROM drift WHERE a = ?`, 1) })
		return rows, err
	}
	readPool := func() ([]row, error) {
		var rows []row
		return rows, s.selectAll(ctx, &rows, `SELECT * FROM drift WHERE a = ?`, 1)
	}
	// Four connections hold the statement: four transactions read at once.
	s.DB().SetMaxOpenConns(4)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			_ = s.InTx(ctx, func(q *Q) error {
				var rows []row
				<-start
				return q.selectAll(ctx, &rows, `SELECT * FROM drift WHERE a = ?`, 1)
			})
		})
	}
	close(start)
	wg.Wait()
	if _, err := readPool(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx, `ALTER TABLE drift ADD COLUMN b int DEFAULT 2`); err != nil {
		t.Fatal(err)
	}
	// Outside a transaction and inside one, every read after the migration succeeds:
	// database/sql retries the first on a new connection, and the rest run on connections
	// opened since.
	for i := range 6 {
		rows, err := readPool()
		if err == nil {
			rows, err = read()
		}
		if err != nil {
			t.Fatalf("read %d after the migration: %v", i, err)
		}
		if len(rows) != 1 || rows[0].B == nil || *rows[0].B != 2 {
			t.Fatalf("read %+v after the migration, want the new column", rows)
		}
	}
}

func TestATransactionBegunByACallerOfTheDBLeavesLaterOnesAlone(t *testing.T) {
	t.Parallel()
	s := openTest(t, testdb.PostgresURL(t))
	s.DB().SetMaxOpenConns(1) // the store's transactions run on the caller's connection
	ctx := context.Background()
	callers, cancel := context.WithCancel(ctx)
	defer cancel()
	tx, err := s.DB().BeginTx(callers, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := s.InTx(ctx, func(q *Q) error {
			var n int
			return q.get(ctx, &n, `SELECT ?::int`, i)
		}); err != nil {
			t.Fatalf("transaction %d: %v", i, err)
		}
	}
}

func TestAStatementWhileAQuerysRowsAreOpenIsRefused(t *testing.T) {
	t.Parallel()
	s := openTest(t, testdb.PostgresURL(t))
	ctx := context.Background()
	if err := s.InTx(ctx, func(q *Q) error {
		rows, err := q.x.QueryxContext(ctx, q.rebind(`SELECT generate_series(1, ?::int)`), 3)
		if err != nil {
			return err
		}
		if !rows.Next() {
			t.Fatal("no first row")
		}
		var n int
		if err := q.get(ctx, &n, `SELECT ?::int`, 7); !errors.Is(err, errRowsOpen) {
			t.Errorf("a statement while rows are open: %v (read %d), want it refused", err, n)
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if err := q.get(ctx, &n, `SELECT ?::int`, 7); err != nil || n != 7 {
			t.Errorf("after the rows closed: read %d, %v", n, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestAWriterThatCannotTakeItsLockLeavesNoOpenTransaction(t *testing.T) {
	t.Parallel()
	url := testdb.PostgresURL(t)
	holder := openTest(t, url)
	ctx := context.Background()
	room := createRoom(t, holder, "locked")
	join(t, holder, room.ID, "alice")
	for _, tc := range []struct {
		name string
		// options are the waiting store's session settings; timeout its call's.
		options string
		timeout time.Duration
	}{
		{name: "its context ends", timeout: 300 * time.Millisecond},
		{name: "the server gives up", options: "-c lock_timeout=300ms", timeout: time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := neturl.Parse(url)
			if err != nil {
				t.Fatal(err)
			}
			if tc.options != "" {
				q := u.Query()
				q.Set("options", tc.options)
				u.RawQuery = q.Encode()
			}
			s, err := Open(ctx, u.String())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			s.DB().SetMaxOpenConns(1) // the post after the failure runs on the same connection

			release := holdWriter(t, holder)
			short, cancel := context.WithTimeout(ctx, tc.timeout)
			defer cancel()
			_, err = s.PostMessage(short, domain.Message{ID: uuid.New(), RoomID: room.ID, AuthorKind: domain.ParticipantHuman,
				AuthorHuman: "alice", Text: "too late", CreatedAt: fixtureTime})
			if err := release(); err != nil {
				t.Fatal(err)
			}
			if err == nil {
				t.Fatal("a post that could not take the writer lock succeeded")
			}
			wait.Eventually(t, 10*time.Second, func() error {
				var open int
				if err := holder.get(ctx, &open, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND state LIKE 'idle in transaction%'`); err != nil {
					return err
				}
				if open != 0 {
					return fmt.Errorf("%d connections are still in a transaction", open)
				}
				return nil
			}, "no connection left in a transaction")
			if _, err := s.PostMessage(ctx, domain.Message{ID: uuid.New(), RoomID: room.ID, AuthorKind: domain.ParticipantHuman,
				AuthorHuman: "alice", Text: "after", CreatedAt: fixtureTime}); err != nil {
				t.Fatalf("the next post: %v", err)
			}
		})
	}
}
