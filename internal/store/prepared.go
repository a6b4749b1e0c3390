package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/lib/pq"
)

// On Postgres every parameterized statement runs as a named prepared statement of its
// connection, prepared the first time that connection runs its text. An unnamed statement is
// parsed, analysed and planned on every call: under the posters benchmark that was a third
// of the server's CPU (parse 4%, analyse 7%, plan 9% of the machine, against 20% executing).
// A prepared one is planned for its first few runs and then, when the plan does not depend on
// the values, never again; a run is one round trip (Bind, Execute, Sync), as before.
//
// A pooler in transaction mode must keep protocol-level prepared statements per server
// connection (PgBouncer 1.21+: max_prepared_statements).

// maxPreparedPerConn bounds one connection's statements: texts that differ only in the
// length of a VALUES list are distinct statements, and past the bound they run unnamed.
const maxPreparedPerConn = 256

// preparingConnector opens lib/pq connections that prepare their statements.
type preparingConnector struct {
	pq *pq.Connector
	// epoch counts the schema changes a connection has met (a stale plan): a connection
	// opened before the current epoch holds statements prepared against the old schema, so
	// the pool retires it at its next use instead of letting each of its statements fail
	// once.
	epoch *atomic.Int64
}

func newPreparingConnector(dsn string) (preparingConnector, error) {
	c, err := pq.NewConnector(dsn)
	if err != nil {
		return preparingConnector{}, err
	}
	return preparingConnector{pq: c, epoch: new(atomic.Int64)}, nil
}

func (c preparingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	epoch := c.epoch.Load()
	cn, err := c.pq.Connect(ctx)
	if err != nil {
		return nil, err
	}
	pc, ok := cn.(pqConn)
	if !ok {
		_ = cn.Close()
		return nil, fmt.Errorf("postgres driver connection %T lacks a method Jam uses", cn)
	}
	tx, ok := cn.(driver.Tx) // lib/pq's connection is its own transaction
	if !ok {
		_ = cn.Close()
		return nil, fmt.Errorf("postgres driver connection %T is not its transaction", cn)
	}
	return &preparingConn{conn: pc, tx: tx, stmts: map[string]preparedStmt{}, epoch: epoch, schema: c.epoch}, nil
}

func (c preparingConnector) Driver() driver.Driver { return c.pq.Driver() }

// pqConn is what database/sql uses of a lib/pq connection; preparingConn passes each on.
type pqConn interface {
	driver.Conn
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.NamedValueChecker
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

type preparedStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

// preparingConn is one connection and its prepared statements by text. database/sql uses a
// connection from one goroutine at a time (Rows.Close included), so it needs no lock.
type preparingConn struct {
	conn  pqConn
	tx    driver.Tx
	stmts map[string]preparedStmt
	// rowsOpen is set while a query's rows are unread: lib/pq refuses a second query then
	// only on its unnamed path, and a prepared one would read the first one's replies.
	rowsOpen bool
	// epoch is the schema epoch the connection was opened in; schema the current one.
	epoch  int64
	schema *atomic.Int64
}

// errRowsOpen refuses a statement on a connection whose last query's rows are unread.
var errRowsOpen = errors.New("a query's rows are still open on this connection")

func (c *preparingConn) Prepare(query string) (driver.Stmt, error) { return c.conn.Prepare(query) }
func (c *preparingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.conn.PrepareContext(ctx, query)
}
func (c *preparingConn) Close() error                   { return c.conn.Close() }
func (c *preparingConn) Ping(ctx context.Context) error { return c.conn.Ping(ctx) }
func (c *preparingConn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.conn.CheckNamedValue(nv)
}

// ResetSession retires a connection opened before a schema change (see epoch).
func (c *preparingConn) ResetSession(ctx context.Context) error {
	if c.epoch < c.schema.Load() {
		return driver.ErrBadConn
	}
	return c.conn.ResetSession(ctx)
}

func (c *preparingConn) IsValid() bool { return c.epoch >= c.schema.Load() && c.conn.IsValid() }

// txPreludeKey carries a statement that BeginTx sends with BEGIN, in the same round trip.
type txPreludeKey struct{}

// withTxPrelude asks the transaction begun with ctx to run prelude, a statement without
// parameters, right after BEGIN and in the same simple query: a writer's locks cost no round
// trip of their own.
func withTxPrelude(ctx context.Context, prelude string) context.Context {
	return context.WithValue(ctx, txPreludeKey{}, prelude)
}

func (c *preparingConn) Begin() (driver.Tx, error) { //nolint:staticcheck // driver.Conn requires it
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

// BeginTx sends BEGIN itself, with the context's prelude when it carries one, as one simple
// query: an explicit BEGIN outlives its query, and lib/pq tracks the transaction state from
// the server's ReadyForQuery, so its Commit and Rollback work as after its own BEGIN. Every
// transaction begins here (never in lib/pq's BeginTx, whose context watch would outlive a
// transaction begun this way); database/sql rolls a transaction back when its context ends.
func (c *preparingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	begin, err := beginStatement(opts)
	if err != nil {
		return nil, err
	}
	if prelude, _ := ctx.Value(txPreludeKey{}).(string); prelude != "" {
		begin += "; " + prelude
	}
	if c.rowsOpen {
		return nil, errRowsOpen
	}
	if _, err := c.conn.ExecContext(ctx, begin, nil); err != nil {
		_ = c.tx.Rollback() // when BEGIN ran; failing, lib/pq retires the connection
		return nil, err
	}
	return c.tx, nil
}

// beginStatement is BEGIN with the options' isolation level and access mode.
func beginStatement(opts driver.TxOptions) (string, error) {
	begin := "BEGIN"
	switch sql.IsolationLevel(opts.Isolation) {
	case sql.LevelDefault:
	case sql.LevelReadUncommitted:
		begin += " ISOLATION LEVEL READ UNCOMMITTED"
	case sql.LevelReadCommitted:
		begin += " ISOLATION LEVEL READ COMMITTED"
	case sql.LevelRepeatableRead:
		begin += " ISOLATION LEVEL REPEATABLE READ"
	case sql.LevelSerializable:
		begin += " ISOLATION LEVEL SERIALIZABLE"
	default:
		return "", fmt.Errorf("isolation level %d is not supported", opts.Isolation)
	}
	if opts.ReadOnly {
		begin += " READ ONLY"
	}
	return begin, nil
}

func (c *preparingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if c.rowsOpen {
		return nil, errRowsOpen
	}
	st, err := c.prepared(ctx, query, args)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return c.conn.ExecContext(ctx, query, args)
	}
	res, err := st.ExecContext(ctx, args)
	return res, c.stale(err)
}

func (c *preparingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if c.rowsOpen {
		return nil, errRowsOpen
	}
	st, err := c.prepared(ctx, query, args)
	if err != nil {
		return nil, err
	}
	var rows driver.Rows
	if st == nil {
		rows, err = c.conn.QueryContext(ctx, query, args)
	} else {
		rows, err = st.QueryContext(ctx, args)
		err = c.stale(err)
	}
	if err != nil {
		return nil, err
	}
	if pr, ok := rows.(pqRows); ok {
		c.rowsOpen = true
		return &connRows{pqRows: pr, c: c}, nil
	}
	return rows, nil
}

// pqRows is what database/sql uses of lib/pq's rows.
type pqRows interface {
	driver.Rows
	driver.RowsNextResultSet
	driver.RowsColumnTypeScanType
	driver.RowsColumnTypeDatabaseTypeName
	driver.RowsColumnTypeLength
	driver.RowsColumnTypePrecisionScale
}

// connRows clears rowsOpen when the rows are closed.
type connRows struct {
	pqRows
	c *preparingConn
}

func (r *connRows) Close() error {
	r.c.rowsOpen = false
	return r.pqRows.Close()
}

// prepared returns the connection's statement for query, preparing it if need be; nil (and
// no error) when the query should run unnamed: it has no parameters (lib/pq then uses the
// simple protocol, one round trip and no statement), or the connection holds enough.
func (c *preparingConn) prepared(ctx context.Context, query string, args []driver.NamedValue) (preparedStmt, error) {
	if len(args) == 0 {
		return nil, nil
	}
	if st, ok := c.stmts[query]; ok {
		return st, nil
	}
	if len(c.stmts) >= maxPreparedPerConn {
		return nil, nil
	}
	st, err := c.conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	ps, ok := st.(preparedStmt)
	if !ok { // COPY: lib/pq's statement for it is not a query
		_ = st.Close()
		return nil, nil
	}
	c.stmts[query] = ps
	return ps, nil
}

// errStalePlan marks a call whose prepared statement the server would no longer run: a
// migration changed what it returns. A transaction that meets it runs again (retryable) on a
// connection opened since; outside a transaction database/sql retries the call on one
// (driver.ErrBadConn: the statement did not run).
var errStalePlan = errors.New("prepared statement outdated by a schema change")

// stale recognises the server's "cached plan must not change result type" by its code and
// the server routine that raises it, and starts a new schema epoch: this connection and every
// other one opened before it are retired at their next use.
func (c *preparingConn) stale(err error) error {
	var pqErr *pq.Error
	if err == nil || !errors.As(err, &pqErr) || pqErr.Code != "0A000" || pqErr.Routine != "RevalidateCachedQuery" {
		return err
	}
	for c.schema.Load() <= c.epoch {
		c.schema.CompareAndSwap(c.epoch, c.epoch+1)
	}
	return fmt.Errorf("%w: %w: %w", errStalePlan, driver.ErrBadConn, err)
}
