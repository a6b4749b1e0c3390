// Package store keeps Jam's records in Postgres or SQLite through one sqlx implementation.
// Every repository method is defined once on Q and runs unchanged on either dialect, inside
// or outside a transaction.
package store

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
	_ "modernc.org/sqlite" // sqlite driver

	"github.com/jam-dev/jam/schema"
)

// Store is an open database. Its embedded Q runs each call on its own; InTx groups calls.
type Store struct {
	*Q
	db      *sqlx.DB
	dialect schema.Dialect
	dsn     string

	hooksMu    sync.Mutex
	eventHooks []func()

	// notifyKick asks notifyLoop to NOTIFY other processes (Postgres only).
	notifyKick chan struct{}
	notifyStop chan struct{}
	notifyDone chan struct{}
	closeOnce  sync.Once

	horizon horizon

	// sqliteWriter queues this process's SQLite write transactions (capacity one). Without
	// it a writer that finds the file locked sleeps in SQLite's busy handler (1, 2, 5, 10…
	// ms) while the lock, held ~1 ms, sits free; queued here it is handed over at once. The
	// busy timeout still covers other processes sharing the file.
	sqliteWriter chan struct{}
}

// Q runs repository methods on the pool or on one transaction.
type Q struct {
	x     sqlx.ExtContext
	store *Store
	inTx  bool
	// appendedEvents is set when the transaction wrote to the event log.
	appendedEvents bool
}

var errNotInTx = errors.New("must run inside a transaction")

// Target is a parsed database URL.
type Target struct {
	Dialect schema.Dialect
	// DSN is what the driver opens (a Postgres URL, or a SQLite file DSN with Jam's pragmas).
	DSN string
	// Path is the SQLite file, empty for Postgres.
	Path string
}

// ParseURL accepts postgres://… / postgresql://… and sqlite:PATH (also sqlite://PATH).
func ParseURL(raw string) (Target, error) {
	switch {
	case strings.HasPrefix(raw, "postgres://"), strings.HasPrefix(raw, "postgresql://"):
		u, err := url.Parse(raw)
		if err != nil {
			return Target{}, fmt.Errorf("database url: %w", err)
		}
		// Send parameterized statements in one round trip instead of prepare-then-execute:
		// writers hold the writer lock for the length of their round trips.
		q := u.Query()
		if q.Get("binary_parameters") == "" {
			q.Set("binary_parameters", "yes")
			u.RawQuery = q.Encode()
		}
		return Target{Dialect: schema.Postgres, DSN: u.String()}, nil
	case strings.HasPrefix(raw, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(raw, "sqlite:"), "//")
		if path == "" || strings.ContainsAny(path, "?#") {
			return Target{}, errors.New("database url: sqlite:PATH needs a plain file path")
		}
		return Target{Dialect: schema.SQLite, DSN: sqliteDSN(path), Path: path}, nil
	default:
		return Target{}, errors.New("database url: want postgres://… or sqlite:PATH")
	}
}

// sqliteDSN opens a file with foreign keys on, WAL, a busy timeout that absorbs short write
// contention, IMMEDIATE transactions (a writer takes the lock at BEGIN, so two transactions
// never deadlock upgrading read locks) and a sortable UTC time format.
func sqliteDSN(path string) string {
	q := url.Values{}
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	q.Set("_time_format", "sqlite")
	return "file:" + path + "?" + q.Encode()
}

// Open connects to the database named by a URL (see ParseURL) and checks it answers.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	t, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	return OpenTarget(ctx, t)
}

// OpenTarget connects to a parsed target.
func OpenTarget(ctx context.Context, t Target) (*Store, error) {
	var db *sqlx.DB
	if t.Dialect == schema.Postgres {
		connector, err := newPreparingConnector(t.DSN)
		if err != nil {
			return nil, fmt.Errorf("open %s database: %w", t.Dialect, err)
		}
		db = sqlx.NewDb(sql.OpenDB(connector), string(t.Dialect))
	} else {
		var err error
		if db, err = sqlx.Open(string(t.Dialect), t.DSN); err != nil {
			return nil, fmt.Errorf("open %s database: %w", t.Dialect, err)
		}
	}
	if t.Dialect == schema.SQLite {
		// One writer at a time is SQLite's model; a small pool keeps readers concurrent
		// under WAL without piling up writers that would only wait on the lock.
		db.SetMaxOpenConns(4)
		db.SetMaxIdleConns(4)
	} else {
		// Keep every pooled connection open: database/sql keeps only two idle ones by
		// default, and a new Postgres connection is a new server process.
		db.SetMaxOpenConns(16)
		db.SetMaxIdleConns(16)
		db.SetConnMaxIdleTime(5 * time.Minute)
		// Statements are prepared per connection (prepared.go); a migration that changes a
		// column's type without changing a result's shape is met by renewing connections.
		db.SetConnMaxLifetime(30 * time.Minute)
	}
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("connect to %s database: %w", t.Dialect, err)
	}
	s := &Store{db: db, dialect: t.Dialect, dsn: t.DSN}
	if t.Dialect == schema.SQLite {
		s.sqliteWriter = make(chan struct{}, 1)
	}
	s.Q = &Q{x: db, store: s}
	if t.Dialect == schema.Postgres {
		s.notifyKick, s.notifyStop, s.notifyDone = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
		go s.notifyLoop()
	}
	return s, nil
}

// DB is the underlying pool, for migrations.
func (s *Store) DB() *sql.DB { return s.db.DB }

// Dialect says which database this is.
func (s *Store) Dialect() schema.Dialect { return s.dialect }

// Ping checks the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// Close sends a pending event notification, then closes the pool.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.notifyStop != nil {
			close(s.notifyStop)
			<-s.notifyDone
		}
	})
	return s.db.Close()
}

// Migrate applies every pending migration of this store's dialect.
func (s *Store) Migrate(ctx context.Context) error { return schema.Up(ctx, s.dialect, s.db.DB) }

const maxTxAttempts = 10

// InTx runs fn in one transaction and commits it. On Postgres it runs alone among writers
// (see writerLockKey). A deadlock or serialization failure (Postgres) or a busy database
// (SQLite) runs fn again from the start, so fn must not have side effects outside the
// transaction. Any other error rolls back and is returned.
func (s *Store) InTx(ctx context.Context, fn func(q *Q) error) error {
	return s.retryTx(ctx, exclusiveWriter, fn)
}

// Scope names what a scoped write transaction touches: it runs beside writers of other
// scopes and one at a time with writers of the same scope and with every InTx.
type Scope struct {
	set    bool
	k1, k2 int32
}

// RoomScope is one room's transcript, inbound rows and their events, and its membership
// and binding. Its writers read only that room's rows (and rows only an InTx changes:
// settings, agents, templates), so two rooms' posts and bindings need not wait for each
// other; one room's posts still commit in seq order.
func RoomScope(room uuid.UUID) Scope {
	return Scope{set: true, k1: int32(binary.BigEndian.Uint32(room[0:4])), k2: int32(binary.BigEndian.Uint32(room[4:8]) ^ binary.BigEndian.Uint32(room[8:12]) ^ binary.BigEndian.Uint32(room[12:16]))}
}

// NodeScope is one node's runtime slots: placements on a node count its slots and take one
// under it (PlaceRuntime), so two wakes never both take its last slot.
func NodeScope(node string) Scope {
	h := fnv.New32a()
	_, _ = h.Write([]byte(node))
	return Scope{set: true, k1: nodeScopeKey, k2: int32(h.Sum32())}
}

// nodeScopeKey is NodeScope's first key ("node"); a room whose id begins with the same four
// bytes only shares a lock with node placements, never its correctness.
const nodeScopeKey = 0x6e6f6465

// InScopedTx is InTx for a transaction confined to one scope. On Postgres it shares the
// writer lock with other scoped writers and takes its scope's own lock; on SQLite, which
// has one writer at a time, it is InTx.
func (s *Store) InScopedTx(ctx context.Context, scope Scope, fn func(q *Q) error) error {
	if s.dialect != schema.Postgres {
		return s.InTx(ctx, fn)
	}
	return s.retryTx(ctx, scope, fn)
}

// exclusiveWriter is InTx's: the whole store.
var exclusiveWriter = Scope{}

func (s *Store) retryTx(ctx context.Context, scope Scope, fn func(q *Q) error) error {
	var err error
	for attempt := 0; attempt < maxTxAttempts; attempt++ {
		if attempt > 0 {
			// Full jitter: colliding transactions spread out instead of colliding again.
			backoff := rand.N(min(time.Duration(2<<attempt)*time.Millisecond, 250*time.Millisecond)) + time.Millisecond
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(backoff):
			}
		}
		err = s.tryTx(ctx, scope, fn)
		if err == nil || !retryable(err) {
			return err
		}
	}
	return fmt.Errorf("transaction gave up after %d attempts: %w", maxTxAttempts, err)
}

// writerLockKey is the Postgres advisory lock every write transaction takes first. InTx
// takes it exclusively: it lines those writers up the way SQLite's IMMEDIATE transactions
// do, and its reads, made after it holds the lock (READ COMMITTED takes a snapshot per
// statement), see every earlier writer's commit, so read-validate-write sequences behave as
// if run one at a time. Scoped writers take it shared plus their scope's lock, so they run
// beside each other but never beside an InTx. Holding it also marks a transaction that may
// still commit event ids: readers stop below the ids such writers hold (horizon.go). The
// lock ends with the transaction. Reads outside transactions do not take it.
const writerLockKey = 0x6a616d5f77726974 // "jam_writ"

func (s *Store) tryTx(ctx context.Context, scope Scope, fn func(q *Q) error) error {
	appended, err := s.runTx(ctx, scope, fn)
	if err == nil && appended {
		// After the SQLite writer queue is released: hooks may read or write.
		s.eventsCommitted()
	}
	return err
}

// runTx runs fn in one transaction and commits it; appended says it wrote events.
func (s *Store) runTx(ctx context.Context, scope Scope, fn func(q *Q) error) (appended bool, err error) {
	if s.sqliteWriter != nil {
		select {
		case s.sqliteWriter <- struct{}{}:
		case <-ctx.Done():
			return false, ctx.Err()
		}
		defer func() { <-s.sqliteWriter }()
	}
	if s.dialect == schema.Postgres {
		// Sent with BEGIN (preparingConn.BeginTx); a failure to take them fails the begin.
		ctx = withTxPrelude(ctx, writerLocks(scope))
	}
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("begin transaction: %w", classify(err))
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	q := &Q{x: tx, store: s, inTx: true}
	if err = fn(q); err != nil {
		return false, err
	}
	if err = tx.Commit(); err != nil {
		return false, fmt.Errorf("commit: %w", classify(err))
	}
	return q.appendedEvents, nil
}

// writerLocks is the statement that takes a writer's advisory locks on Postgres: the writer
// lock, exclusively for InTx; shared, then the scope's own, for a scoped writer (one
// statement, so in that order). The keys are Jam's integers, not input.
func writerLocks(scope Scope) string {
	if scope == exclusiveWriter {
		return fmt.Sprintf(`SELECT pg_advisory_xact_lock(%d)`, int64(writerLockKey))
	}
	return fmt.Sprintf(`SELECT pg_advisory_xact_lock_shared(%d), pg_advisory_xact_lock(%d, %d)`,
		int64(writerLockKey), scope.k1, scope.k2)
}

// atomicIn runs fn in the current transaction, or in a new one of scope when q is not in a
// transaction.
func (q *Q) atomicIn(ctx context.Context, scope Scope, fn func(q *Q) error) error {
	if q.inTx {
		return fn(q)
	}
	return q.store.InScopedTx(ctx, scope, fn)
}

// atomic runs fn in the current transaction, or in a new one when q is not in a transaction.
func (q *Q) atomic(ctx context.Context, fn func(q *Q) error) error {
	if q.inTx {
		return fn(q)
	}
	return q.store.InTx(ctx, fn)
}

func (q *Q) rebind(query string) string { return q.store.db.Rebind(query) }

func (q *Q) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	res, err := q.x.ExecContext(ctx, q.rebind(query), args...)
	return res, classify(err)
}

// statement is one write with its arguments, for execAll.
type statement struct {
	query string
	args  []any
}

// execAll runs writes that do not depend on each other's results. On Postgres they go as
// one statement (each but the last a data-modifying WITH clause): one round trip instead of
// one each, which matters while the transaction holds its locks. Constraints are checked at
// the end of the statement, after all of them.
func (q *Q) execAll(ctx context.Context, sts ...statement) error {
	if q.store.dialect != schema.Postgres || len(sts) == 1 {
		for _, st := range sts {
			if _, err := q.exec(ctx, st.query, st.args...); err != nil {
				return err
			}
		}
		return nil
	}
	var b strings.Builder
	var args []any
	for i, st := range sts[:len(sts)-1] {
		if i == 0 {
			b.WriteString("WITH ")
		} else {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "w%d AS (%s RETURNING 1)", i, st.query)
		args = append(args, st.args...)
	}
	last := sts[len(sts)-1]
	b.WriteString(" ")
	b.WriteString(last.query)
	_, err := q.exec(ctx, b.String(), append(args, last.args...)...)
	return err
}

func (q *Q) get(ctx context.Context, dst any, query string, args ...any) error {
	err := sqlx.GetContext(ctx, q.x, dst, q.rebind(query), args...)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	return classify(err)
}

func (q *Q) selectAll(ctx context.Context, dst any, query string, args ...any) error {
	return classify(sqlx.SelectContext(ctx, q.x, dst, q.rebind(query), args...))
}

// utc normalises times read back from either driver.
func utc(t time.Time) time.Time { return t.UTC() }

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
