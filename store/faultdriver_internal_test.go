package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// A fault-injecting driver: a driver.Connector that wraps the real one
// (go-sql-driver/mysql against the real MariaDB of the tests) and, at a
// chosen step of a transaction, answers with a chosen error instead of the
// server: the errors of engines that cannot run here (TiDB, Percona XtraDB
// Cluster, Vitess) and failures that a real server gives only by accident.
// A store uses it through withConnector (openFaulty).
//
// Whatever is not injected goes to the real server, so the database's
// rows are the truth the tests compare what the store returned with.

// A faultOp is one operation the store asked of a connection.
type faultOp struct {
	kind  string // "begin", "exec", "query", "commit", "rollback"
	query string // the statement of an exec or a query
	conn  int    // which connection (numbered in the order opened)
	// failed: answered with an injected error (a BEGIN so answered began
	// nothing).
	failed bool
}

// The steps of leafd's transactions, as the injections name them.
const (
	stepBegin  = "BEGIN"
	stepCommit = "COMMIT"
	// An allocation: its UPDATE of leaf_alloc, the SELECT that reads it
	// back, the high-water mark's first statement.
	stepUpdate = "UPDATE leaf_alloc"
	stepSelect = "SELECT max_id"
	stepMark   = "high-water mark"
	// A worker id's claim: the database's clock, the locking read of the
	// rows, the read (or first write) of the recorded snowflake layout,
	// the INSERT or UPDATE that claims one.
	stepClock  = "clock"
	stepRows   = "SELECT … FOR UPDATE"
	stepLayout = "layout"
	stepClaim  = "claim write"
	// A lease renewal: one UPDATE, in autocommit.
	stepRenew = "renew"
	// Migrations: the named lock, goose's version table as leafd reads it.
	stepGetLock = "GET_LOCK"
	stepApplied = "applied versions"
)

// is reports whether op is step.
func (op faultOp) is(step string) bool {
	q := strings.TrimSpace(op.query)
	switch step {
	case stepBegin:
		return op.kind == "begin"
	case stepCommit:
		return op.kind == "commit"
	case stepUpdate:
		return op.kind == "exec" && strings.HasPrefix(q, "UPDATE leaf_alloc\nSET max_id")
	case stepSelect:
		return op.kind == "query" && strings.HasPrefix(q, "SELECT max_id, step FROM leaf_alloc")
	case stepMark:
		return op.kind == "exec" && strings.HasPrefix(q, "INSERT INTO leafd_tag_highwater")
	case stepClock:
		return op.kind == "query" && strings.HasPrefix(q, "SELECT CAST(UNIX_TIMESTAMP")
	case stepRows:
		return op.kind == "query" && strings.HasPrefix(q, "SELECT worker_id") && strings.HasSuffix(q, "FOR UPDATE")
	case stepLayout:
		return strings.Contains(q, "leafd_snowflake_layout")
	case stepClaim:
		return op.kind == "exec" && (strings.HasPrefix(q, "INSERT INTO leaf_worker") || strings.HasPrefix(q, "UPDATE leaf_worker SET owner"))
	case stepRenew:
		return op.kind == "exec" && strings.HasPrefix(q, "UPDATE leaf_worker SET lease_until_ms")
	case stepGetLock:
		return op.kind == "query" && strings.HasPrefix(q, "SELECT GET_LOCK")
	case stepApplied:
		return op.kind == "query" && strings.HasPrefix(q, "SELECT version_id FROM goose_db_version")
	}
	panic("unknown step " + step)
}

// Errors that an injection returns to make the connection fail rather
// than answer: the connection is cut (the driver's ErrInvalidConn) after the
// real COMMIT succeeded (its outcome lost on the way back), or before the
// COMMIT reached the server (which then rolls the transaction back).
var (
	errLoseAfterCommit  = errors.New("cut the connection after a successful COMMIT")
	errLoseBeforeCommit = errors.New("cut the connection before the COMMIT")
)

// An injection answers err at step, the first times times it is reached
// (every time when times is negative). wait, when set, runs first, at every
// time the step is reached (and may block).
type injection struct {
	step  string
	err   error
	times int
	wait  func()
	hits  int
}

// faults is the state a fault connector shares with its connections: the
// injections and every operation seen.
type faults struct {
	mu    sync.Mutex
	inj   []*injection
	ops   []faultOp
	conns int
}

// inject adds an injection.
func (f *faults) inject(step string, err error, times int) *injection {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := &injection{step: step, err: err, times: times}
	f.inj = append(f.inj, i)
	return i
}

// reset drops the injections and the operations seen.
func (f *faults) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inj, f.ops = nil, nil
}

// check records op and returns the error to answer instead of the server,
// or nil.
func (f *faults) check(op faultOp) error {
	f.mu.Lock()
	var wait func()
	var err error
	for _, i := range f.inj {
		if !op.is(i.step) {
			continue
		}
		if i.wait != nil {
			wait = i.wait
		}
		if i.err != nil && (i.times < 0 || i.hits < i.times) {
			i.hits++
			err = i.err
			break
		}
	}
	op.failed = err != nil
	f.ops = append(f.ops, op)
	f.mu.Unlock()
	if wait != nil {
		wait()
	}
	return err
}

// count returns how many operations seen so far are step.
func (f *faults) count(step string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, op := range f.ops {
		if op.is(step) {
			n++
		}
	}
	return n
}

// saw reports whether an exec or query seen so far holds text.
func (f *faults) saw(text string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, op := range f.ops {
		if strings.Contains(op.query, text) {
			return true
		}
	}
	return false
}

// checkTransactions fails t unless every COMMIT and ROLLBACK seen ends a
// transaction of its own connection that a BEGIN started: a transaction is
// never committed twice, and a retry never sends a COMMIT alone.
func (f *faults) checkTransactions(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	open := map[int]bool{}
	for i, op := range f.ops {
		switch op.kind {
		case "begin":
			if open[op.conn] {
				t.Errorf("operation %d: BEGIN on connection %d inside a transaction", i, op.conn)
			}
			open[op.conn] = !op.failed
		case "commit", "rollback":
			if !open[op.conn] {
				t.Errorf("operation %d: %s on connection %d without its BEGIN", i, strings.ToUpper(op.kind), op.conn)
			}
			open[op.conn] = false
		}
	}
}

// faultConnector is the driver.Connector of the fault-injecting driver.
type faultConnector struct {
	inner driver.Connector
	f     *faults
}

func (c *faultConnector) Driver() driver.Driver { return c.inner.Driver() }

func (c *faultConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	full, ok := conn.(fullConn)
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("the driver's connection %T lacks methods the fault connector needs", conn)
	}
	c.f.mu.Lock()
	c.f.conns++
	n := c.f.conns
	c.f.mu.Unlock()
	return &faultConn{fullConn: full, f: c.f, n: n}, nil
}

// faultConn is a connection of the fault connector.
type faultConn struct {
	fullConn
	f    *faults
	n    int
	lost bool // cut by an injection: database/sql must not use it again
}

func (c *faultConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if c.lost {
		return nil, driver.ErrBadConn
	}
	if err := c.f.check(faultOp{kind: "begin", conn: c.n}); err != nil {
		return nil, c.fail(err)
	}
	tx, err := c.fullConn.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &faultTx{inner: tx, c: c}, nil
}

func (c *faultConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if c.lost {
		return nil, driver.ErrBadConn
	}
	if err := c.f.check(faultOp{kind: "exec", query: query, conn: c.n}); err != nil {
		return nil, c.fail(err)
	}
	return c.fullConn.ExecContext(ctx, query, args)
}

func (c *faultConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if c.lost {
		return nil, driver.ErrBadConn
	}
	if err := c.f.check(faultOp{kind: "query", query: query, conn: c.n}); err != nil {
		return nil, c.fail(err)
	}
	return c.fullConn.QueryContext(ctx, query, args)
}

// fail turns an injected error into the answer: a cut connection is closed
// (the server rolls back whatever was open) and answered as the driver
// answers one.
func (c *faultConn) fail(err error) error {
	if errors.Is(err, errLoseAfterCommit) || errors.Is(err, errLoseBeforeCommit) {
		c.lose()
		return mysql.ErrInvalidConn
	}
	return err
}

func (c *faultConn) lose() {
	c.lost = true
	c.fullConn.Close()
}

func (c *faultConn) IsValid() bool {
	if c.lost {
		return false
	}
	if v, ok := c.fullConn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *faultConn) ResetSession(ctx context.Context) error {
	if c.lost {
		return driver.ErrBadConn
	}
	return c.fullConn.ResetSession(ctx)
}

func (c *faultConn) Close() error {
	if c.lost {
		return nil
	}
	return c.fullConn.Close()
}

// faultTx is a transaction of a fault connection.
type faultTx struct {
	inner driver.Tx
	c     *faultConn
}

// Commit commits, unless an injection says otherwise: an error of the
// server's is answered after the real transaction was rolled back, as a
// server that aborts a transaction at COMMIT does; errLoseAfterCommit
// commits for real and then cuts the connection; errLoseBeforeCommit cuts
// it without committing.
func (tx *faultTx) Commit() error {
	if tx.c.lost {
		return driver.ErrBadConn
	}
	err := tx.c.f.check(faultOp{kind: "commit", conn: tx.c.n})
	switch {
	case err == nil:
		return tx.inner.Commit()
	case errors.Is(err, errLoseAfterCommit):
		if cerr := tx.inner.Commit(); cerr != nil {
			return cerr
		}
		return tx.c.fail(err)
	case errors.Is(err, errLoseBeforeCommit):
		return tx.c.fail(err)
	default:
		if rerr := tx.inner.Rollback(); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
}

func (tx *faultTx) Rollback() error {
	if tx.c.lost {
		return driver.ErrBadConn
	}
	tx.c.f.check(faultOp{kind: "rollback", conn: tx.c.n})
	return tx.inner.Rollback()
}

// openFaulty opens a MySQL store on dsn through the fault-injecting
// driver, with opts, and returns it with its faults.
func openFaulty(t *testing.T, dsn string, opts ...Option) (*db, *faults) {
	t.Helper()
	f := &faults{}
	opts = append(opts, withConnector(func(c driver.Connector) driver.Connector { return &faultConnector{inner: c, f: f} }))
	s, err := openDB("mysql", dsn, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, f
}

// mysqlErr is the error a MySQL-family server answers with.
func mysqlErr(number uint16, state, message string) *mysql.MySQLError {
	e := &mysql.MySQLError{Number: number, Message: message}
	copy(e.SQLState[:], state)
	return e
}

// withConnector wraps the connector of every address of the store in wrap:
// for tests that inject faults between the store and the real driver.
func withConnector(wrap func(driver.Connector) driver.Connector) Option {
	return func(o *options) { o.connector = wrap }
}
