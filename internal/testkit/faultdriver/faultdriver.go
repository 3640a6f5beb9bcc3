// Package faultdriver is a fault-injecting database/sql driver for the
// tests of leafd's stores: a driver.Connector that wraps an engine's own
// (against the real database of the tests) and, at a chosen step of a
// transaction, answers with a chosen error instead of the server: the
// errors of engines that cannot run here (TiDB, Percona XtraDB Cluster,
// Vitess) and failures that a real server gives only by accident. A store
// uses it through testhook.WithConnector(f.Wrap).
//
// Whatever is not injected goes to the real server, so the database's
// rows are the truth the tests compare what the store returned with. The
// package knows no engine: the errors injected are the test's.
package faultdriver

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
)

// An Op is one operation the store asked of a connection.
type Op struct {
	Kind  string // "begin", "exec", "query", "commit", "rollback"
	Query string // the statement of an exec or a query
	Conn  int    // which connection (numbered in the order opened)
	// Failed: answered with an injected error (a BEGIN so answered began
	// nothing).
	Failed bool
}

// A Step is a step of leafd's transactions, as injections and counts name
// it: Is reports whether an operation is that step.
type Step struct {
	Name string
	Is   func(op Op) bool
}

func (s Step) String() string { return s.Name }

// query returns the step of the execs (exec true) or queries whose
// statement, trimmed, starts with prefix.
func query(name string, exec bool, prefix string) Step {
	kind := "query"
	if exec {
		kind = "exec"
	}
	return Step{name, func(op Op) bool {
		return op.Kind == kind && strings.HasPrefix(strings.TrimSpace(op.Query), prefix)
	}}
}

// The steps of leafd's transactions that every engine runs alike. (An
// engine's own statements, such as its clock or its migration lock, are
// steps its tests write.)
var (
	Begin  = Step{"BEGIN", func(op Op) bool { return op.Kind == "begin" }}
	Commit = Step{"COMMIT", func(op Op) bool { return op.Kind == "commit" }}
	// An allocation: its UPDATE of leaf_alloc, the SELECT that reads it
	// back, the high-water mark's first statement.
	Update = query("UPDATE leaf_alloc", true, "UPDATE leaf_alloc\nSET max_id")
	Select = query("SELECT max_id", false, "SELECT max_id, step FROM leaf_alloc")
	Mark   = query("high-water mark", true, "INSERT INTO leafd_tag_highwater")
	// A worker id's claim: the locking read of the rows, the read (or
	// first write) of the recorded snowflake layout, the INSERT or UPDATE
	// that claims one.
	Rows = Step{"SELECT … FOR UPDATE", func(op Op) bool {
		q := strings.TrimSpace(op.Query)
		return op.Kind == "query" && strings.HasPrefix(q, "SELECT worker_id") && strings.HasSuffix(q, "FOR UPDATE")
	}}
	Layout = Step{"layout", func(op Op) bool { return strings.Contains(op.Query, "leafd_snowflake_layout") }}
	Claim  = Step{"claim write", func(op Op) bool {
		q := strings.TrimSpace(op.Query)
		return op.Kind == "exec" && (strings.HasPrefix(q, "INSERT INTO leaf_worker") || strings.HasPrefix(q, "UPDATE leaf_worker SET owner"))
	}}
	// A lease renewal: one UPDATE, in autocommit.
	Renew = query("renew", true, "UPDATE leaf_worker SET lease_until_ms")
	// Migrations: goose's version table as leafd reads it.
	Applied = query("applied versions", false, "SELECT version_id FROM goose_db_version")
)

// Errors that an injection returns to make the connection fail rather
// than answer: the connection is cut after the real COMMIT succeeded (its
// outcome lost on the way back), or before the COMMIT reached the server
// (which then rolls the transaction back). The store is then answered
// ErrConnLost.
var (
	ErrLoseAfterCommit  = errors.New("cut the connection after a successful COMMIT")
	ErrLoseBeforeCommit = errors.New("cut the connection before the COMMIT")
)

// ErrConnLost is the answer of a connection an injection cut: a connection
// that ended under a statement, as the store reads it whatever the engine.
var ErrConnLost = fmt.Errorf("faultdriver: the connection was cut: %w", io.ErrUnexpectedEOF)

// An Injection answers Err at a step, the first Times times it is reached
// (every time when Times is negative). Wait, when set, runs first, at every
// time the step is reached (and may block); set it before the store runs.
type Injection struct {
	step  Step
	err   error
	times int
	hits  int
	Wait  func()
}

// Faults is the state a fault connector shares with its connections: the
// injections and every operation seen.
type Faults struct {
	mu    sync.Mutex
	inj   []*Injection
	ops   []Op
	conns int
}

// Inject adds an injection of err at step, the first times times (every
// time when negative); a nil err injects nothing, for a Wait alone.
func (f *Faults) Inject(step Step, err error, times int) *Injection {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := &Injection{step: step, err: err, times: times}
	f.inj = append(f.inj, i)
	return i
}

// Reset drops the injections and the operations seen.
func (f *Faults) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inj, f.ops = nil, nil
}

// check records op and returns the error to answer instead of the server,
// or nil.
func (f *Faults) check(op Op) error {
	f.mu.Lock()
	var wait func()
	var err error
	for _, i := range f.inj {
		if !i.step.Is(op) {
			continue
		}
		if i.Wait != nil {
			wait = i.Wait
		}
		if i.err != nil && (i.times < 0 || i.hits < i.times) {
			i.hits++
			err = i.err
			break
		}
	}
	op.Failed = err != nil
	f.ops = append(f.ops, op)
	f.mu.Unlock()
	if wait != nil {
		wait()
	}
	return err
}

// Count returns how many operations seen so far are step.
func (f *Faults) Count(step Step) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, op := range f.ops {
		if step.Is(op) {
			n++
		}
	}
	return n
}

// Saw reports whether an exec or query seen so far holds text.
func (f *Faults) Saw(text string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, op := range f.ops {
		if strings.Contains(op.Query, text) {
			return true
		}
	}
	return false
}

// CheckTransactions fails t unless every COMMIT and ROLLBACK seen ends a
// transaction of its own connection that a BEGIN started: a transaction is
// never committed twice, and a retry never sends a COMMIT alone.
func (f *Faults) CheckTransactions(t testing.TB) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	open := map[int]bool{}
	for i, op := range f.ops {
		switch op.Kind {
		case "begin":
			if open[op.Conn] {
				t.Errorf("operation %d: BEGIN on connection %d inside a transaction", i, op.Conn)
			}
			open[op.Conn] = !op.Failed
		case "commit", "rollback":
			if !open[op.Conn] {
				t.Errorf("operation %d: %s on connection %d without its BEGIN", i, strings.ToUpper(op.Kind), op.Conn)
			}
			open[op.Conn] = false
		}
	}
}

// Wrap returns the fault connector over inner: what
// testhook.WithConnector takes.
func (f *Faults) Wrap(inner driver.Connector) driver.Connector {
	return &connector{inner: inner, f: f}
}

// fullConn is every method of the drivers' connections that database/sql
// and the store's failover use.
type fullConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.NamedValueChecker
}

// connector is the driver.Connector of the fault-injecting driver.
type connector struct {
	inner driver.Connector
	f     *Faults
}

func (c *connector) Driver() driver.Driver { return c.inner.Driver() }

func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	raw, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	full, ok := raw.(fullConn)
	if !ok {
		raw.Close()
		return nil, fmt.Errorf("the driver's connection %T lacks methods the fault connector needs", raw)
	}
	c.f.mu.Lock()
	c.f.conns++
	n := c.f.conns
	c.f.mu.Unlock()
	return &conn{fullConn: full, f: c.f, n: n}, nil
}

// conn is a connection of the fault connector.
type conn struct {
	fullConn
	f    *Faults
	n    int
	lost bool // cut by an injection: database/sql must not use it again
}

func (c *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if c.lost {
		return nil, driver.ErrBadConn
	}
	if err := c.f.check(Op{Kind: "begin", Conn: c.n}); err != nil {
		return nil, c.fail(err)
	}
	inner, err := c.fullConn.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &tx{inner: inner, c: c}, nil
}

func (c *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if c.lost {
		return nil, driver.ErrBadConn
	}
	if err := c.f.check(Op{Kind: "exec", Query: query, Conn: c.n}); err != nil {
		return nil, c.fail(err)
	}
	return c.fullConn.ExecContext(ctx, query, args)
}

func (c *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if c.lost {
		return nil, driver.ErrBadConn
	}
	if err := c.f.check(Op{Kind: "query", Query: query, Conn: c.n}); err != nil {
		return nil, c.fail(err)
	}
	return c.fullConn.QueryContext(ctx, query, args)
}

// fail turns an injected error into the answer: a cut connection is closed
// (the server rolls back whatever was open) and answered ErrConnLost.
func (c *conn) fail(err error) error {
	if errors.Is(err, ErrLoseAfterCommit) || errors.Is(err, ErrLoseBeforeCommit) {
		c.lost = true
		c.fullConn.Close()
		return ErrConnLost
	}
	return err
}

func (c *conn) IsValid() bool {
	if c.lost {
		return false
	}
	if v, ok := c.fullConn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

func (c *conn) ResetSession(ctx context.Context) error {
	if c.lost {
		return driver.ErrBadConn
	}
	return c.fullConn.ResetSession(ctx)
}

func (c *conn) Close() error {
	if c.lost {
		return nil
	}
	return c.fullConn.Close()
}

// tx is a transaction of a fault connection.
type tx struct {
	inner driver.Tx
	c     *conn
}

// Commit commits, unless an injection says otherwise: an error of the
// server's is answered after the real transaction was rolled back, as a
// server that aborts a transaction at COMMIT does; ErrLoseAfterCommit
// commits for real and then cuts the connection; ErrLoseBeforeCommit cuts
// it without committing.
func (t *tx) Commit() error {
	if t.c.lost {
		return driver.ErrBadConn
	}
	err := t.c.f.check(Op{Kind: "commit", Conn: t.c.n})
	switch {
	case err == nil:
		return t.inner.Commit()
	case errors.Is(err, ErrLoseAfterCommit):
		if cerr := t.inner.Commit(); cerr != nil {
			return cerr
		}
		return t.c.fail(err)
	case errors.Is(err, ErrLoseBeforeCommit):
		return t.c.fail(err)
	default:
		if rerr := t.inner.Rollback(); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
}

func (t *tx) Rollback() error {
	if t.c.lost {
		return driver.ErrBadConn
	}
	t.c.f.check(Op{Kind: "rollback", Conn: t.c.n})
	return t.inner.Rollback()
}
