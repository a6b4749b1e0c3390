package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"

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
type preparingConnector struct{ pq *pq.Connector }

func (c preparingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	cn, err := c.pq.Connect(ctx)
	if err != nil {
		return nil, err
	}
	pc, ok := cn.(pqConn)
	if !ok {
		_ = cn.Close()
		return nil, fmt.Errorf("postgres driver connection %T lacks a method Jam uses", cn)
	}
	return &preparingConn{conn: pc, stmts: map[string]driver.Stmt{}}, nil
}

func (c preparingConnector) Driver() driver.Driver { return c.pq.Driver() }

// pqConn is what database/sql uses of a lib/pq connection; preparingConn passes each on.
type pqConn interface {
	driver.Conn
	driver.ConnBeginTx
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
// connection from one goroutine at a time, so the map needs no lock.
type preparingConn struct {
	conn  pqConn
	stmts map[string]driver.Stmt
}

func (c *preparingConn) Prepare(query string) (driver.Stmt, error) { return c.conn.Prepare(query) }
func (c *preparingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.conn.PrepareContext(ctx, query)
}
func (c *preparingConn) Close() error                   { return c.conn.Close() }
func (c *preparingConn) Begin() (driver.Tx, error)      { return c.conn.Begin() } //nolint:staticcheck // driver.Conn requires it
func (c *preparingConn) Ping(ctx context.Context) error { return c.conn.Ping(ctx) }
func (c *preparingConn) ResetSession(ctx context.Context) error {
	return c.conn.ResetSession(ctx)
}
func (c *preparingConn) IsValid() bool { return c.conn.IsValid() }
func (c *preparingConn) CheckNamedValue(nv *driver.NamedValue) error {
	return c.conn.CheckNamedValue(nv)
}

// txPreludeKey carries a statement that BeginTx sends with BEGIN, in the same round trip.
type txPreludeKey struct{}

// withTxPrelude asks the transaction begun with ctx to run prelude, a statement without
// parameters, right after BEGIN and in the same simple query: a writer's locks cost no round
// trip of their own.
func withTxPrelude(ctx context.Context, prelude string) context.Context {
	return context.WithValue(ctx, txPreludeKey{}, prelude)
}

func (c *preparingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	prelude, _ := ctx.Value(txPreludeKey{}).(string)
	if prelude == "" {
		return c.conn.BeginTx(ctx, opts)
	}
	if opts != (driver.TxOptions{}) {
		return nil, errors.New("a transaction prelude runs with the default options only")
	}
	tx, ok := c.conn.(driver.Tx) // lib/pq's connection is its own transaction
	if !ok {
		return nil, errors.New("the postgres driver's connection is not its transaction")
	}
	// An explicit BEGIN in a simple query outlives it; lib/pq tracks the transaction
	// state from the server's ReadyForQuery, so its Commit and Rollback work as after its
	// own BEGIN.
	if _, err := c.conn.ExecContext(ctx, "BEGIN; "+prelude, nil); err != nil {
		_ = tx.Rollback() // when BEGIN ran; failing, lib/pq retires the connection
		return nil, err
	}
	return tx, nil
}

func (c *preparingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	st, err := c.prepared(ctx, query, args)
	if err != nil || st == nil {
		if err == nil {
			return c.conn.ExecContext(ctx, query, args)
		}
		return nil, err
	}
	res, err := st.ExecContext(ctx, args)
	return res, c.forgetStale(query, err)
}

func (c *preparingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	st, err := c.prepared(ctx, query, args)
	if err != nil || st == nil {
		if err == nil {
			return c.conn.QueryContext(ctx, query, args)
		}
		return nil, err
	}
	rows, err := st.QueryContext(ctx, args)
	return rows, c.forgetStale(query, err)
}

// prepared returns the connection's statement for query, preparing it if need be; nil (and
// no error) when the query should run unnamed: it has no parameters (lib/pq then uses the
// simple protocol, one round trip and no statement), or the connection holds enough.
func (c *preparingConn) prepared(ctx context.Context, query string, args []driver.NamedValue) (preparedStmt, error) {
	if len(args) == 0 {
		return nil, nil
	}
	if st, ok := c.stmts[query]; ok {
		return st.(preparedStmt), nil
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
// migration changed what it returns ("cached plan must not change result type"). The
// statement is forgotten, so a transaction run again (retryable) prepares it anew.
var errStalePlan = errors.New("prepared statement outdated by a schema change")

// forgetStale drops the statement behind err when it is stale, and says so in the error.
func (c *preparingConn) forgetStale(query string, err error) error {
	var pqErr *pq.Error
	if err == nil || !errors.As(err, &pqErr) || pqErr.Code != "0A000" { // feature_not_supported
		return err
	}
	if st, ok := c.stmts[query]; ok {
		delete(c.stmts, query)
		_ = st.Close() // Close is allowed in a failed transaction; failing, it retires the connection
	}
	return fmt.Errorf("%w: %w", errStalePlan, err)
}
