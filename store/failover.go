package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leafd/leafd/store/internal/engine"
)

// retryFirstEvery is how often a store that has moved off the first address
// of its cluster checks whether that address serves again (docs/contract.md section 3:
// "tries the first one again every minute").
const retryFirstEvery = time.Minute

// probeTimeout bounds the check that a freshly opened connection's node
// accepts writes, so that a node that answers the handshake and then hangs
// does not hold up the walk to the next address.
const probeTimeout = 3 * time.Second

// openCluster parses the first DSN and the fallbacks of o with the
// dialect's Connect and returns the connector a store opens its pool with:
// the first address's own when there are no fallbacks (cluster nil), or a
// failover over all of them that asks the dialect's Probe of every new
// connection. addr is the first address's name.
func openCluster(d *engine.Dialect, dsn string, o options) (c driver.Connector, cluster *failover, addr string, err error) {
	parse := d.Connect
	if o.connector != nil {
		parse = func(dsn string) (engine.Address, error) {
			a, err := d.Connect(dsn)
			if err == nil {
				a.Connector = o.connector(a.Connector)
			}
			return a, err
		}
	}
	first, err := parse(dsn)
	if err != nil {
		return nil, nil, "", err
	}
	if len(o.fallbacks) == 0 {
		return first.Connector, nil, first.Name, nil
	}
	addrs := []engine.Address{first}
	for i, dsn := range o.fallbacks {
		a, err := parse(dsn)
		if err != nil {
			return nil, nil, "", fmt.Errorf("fallback address %d: %w", i, err)
		}
		addrs = append(addrs, a)
	}
	cluster = newFailover(addrs, d.Probe, o.log)
	return cluster, cluster, first.Name, nil
}

// failover is a driver.Connector over the addresses of one cluster
// (store.dsn then store.fallback_dsns). Every new connection goes to the
// address in use; when that one cannot be reached or refuses writes, the
// others are tried in order and the first that works becomes the address
// in use. While that is not the first address, a goroutine checks the first
// every retryFirst and moves back as soon as it serves again.
//
// A move bumps a generation: connections opened before it are closed when
// they are next returned to the pool or taken from it, so that the pool
// does not keep talking to a node it has left.
type failover struct {
	addrs []engine.Address
	// probe returns nil when the node of a new connection accepts writes:
	// the engine's own question (its dialect's Probe).
	probe      func(context.Context, driver.QueryerContext) error
	log        *slog.Logger
	retryFirst time.Duration

	gen atomic.Uint64 // bumped by every move and every refusal

	mu         sync.Mutex
	cur        int
	switches   int64
	lastSwitch time.Time
	lastErr    string // why the last move happened

	// ctx ends at Close: it stops retryFirstLoop, which closes done, and
	// a check of the first address in flight does not hold up shutdown.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

var _ driver.Connector = (*failover)(nil)

func newFailover(addrs []engine.Address, probe func(context.Context, driver.QueryerContext) error, log *slog.Logger) *failover {
	f := &failover{
		addrs:      addrs,
		probe:      probe,
		log:        log,
		retryFirst: retryFirstEvery,
		done:       make(chan struct{}),
	}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	go f.retryFirstLoop()
	return f
}

// Driver returns the driver of the first address: all of them are of one
// engine.
func (f *failover) Driver() driver.Driver { return f.addrs[0].Connector.Driver() }

// Connect opens a connection to the address in use, or, when that fails,
// to the next address that works, in list order after it.
func (f *failover) Connect(ctx context.Context) (driver.Conn, error) {
	f.mu.Lock()
	start := f.cur
	f.mu.Unlock()
	var errs []error
	for k := range f.addrs {
		i := (start + k) % len(f.addrs)
		conn, err := f.open(ctx, i)
		if err == nil {
			return f.adopt(conn, start, i, errors.Join(errs...)), nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", f.addrs[i].Name, err))
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 1 {
		return nil, errs[0]
	}
	return nil, fmt.Errorf("no address of the cluster serves: %w", errors.Join(errs...))
}

// open connects to address i and checks that it accepts writes.
func (f *failover) open(ctx context.Context, i int) (fullConn, error) {
	c, err := f.addrs[i].Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	conn, ok := c.(fullConn)
	if !ok { // the drivers' connections have every method fullConn asks
		c.Close()
		return nil, fmt.Errorf("the driver's connection %T lacks methods leafd needs", c)
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if err := f.probe(pctx, conn); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// adopt wraps a connection opened to address at, which the walk reached
// starting from address from, and moves to at if that is a move and no
// other connection moved meanwhile. A connection to an address that is not
// the one in use (another connection moved elsewhere meanwhile) serves its
// caller and is then closed.
func (f *failover) adopt(conn fullConn, from, at int, why error) *failoverConn {
	f.mu.Lock()
	defer f.mu.Unlock()
	if at != from {
		f.moveLocked(from, at, why)
	}
	return &failoverConn{fullConn: conn, f: f, gen: f.gen.Load(), stray: f.cur != at}
}

// moveLocked makes address to the one in use, unless another connection has
// already moved away from from. The caller holds f.mu.
func (f *failover) moveLocked(from, to int, why error) {
	if f.cur != from {
		return
	}
	f.cur = to
	f.switches++
	f.lastSwitch = time.Now()
	f.lastErr = ""
	if why != nil {
		f.lastErr = why.Error()
	}
	f.gen.Add(1)
	if to == 0 {
		f.log.Info("store: back on the first database address", "address", f.addrs[to].Name, "left", f.addrs[from].Name)
		return
	}
	f.log.Warn("store: switched database address", "from", f.addrs[from].Name, "to", f.addrs[to].Name,
		"address_index", to, "reason", f.lastErr)
}

// refused is told that a node answered with an error that means it does not
// serve writes now (not synced, read-only, shutting down). Connections
// opened so far are dropped as they come back, so that the next one is
// opened afresh and probed, which moves on if the node still refuses.
func (f *failover) refused() { f.gen.Add(1) }

// retryFirstLoop moves back to the first address once it serves again,
// checking every retryFirst while another address is in use.
//
// The checks fall on whole multiples of retryFirst of the wall clock (the
// top of each minute), so that the servers of a fleet that moved away
// together move back within moments of one another, not anywhere within a
// minute: fewer of their writes to the same rows then go through
// different nodes and conflict.
func (f *failover) retryFirstLoop() {
	defer close(f.done)
	t := time.NewTimer(untilNextMultiple(time.Now(), f.retryFirst))
	defer t.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(untilNextMultiple(time.Now(), f.retryFirst))
		f.mu.Lock()
		cur := f.cur
		f.mu.Unlock()
		if cur == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(f.ctx, engine.DialTimeout+probeTimeout)
		conn, err := f.open(ctx, 0)
		cancel()
		if err != nil {
			f.log.Debug("store: the first database address still does not serve", "address", f.addrs[0].Name, "err", err)
			continue
		}
		conn.Close()
		f.mu.Lock()
		f.moveLocked(cur, 0, nil)
		f.mu.Unlock()
	}
}

// untilNextMultiple returns the time from now to the next whole multiple of
// d since the Unix epoch.
func untilNextMultiple(now time.Time, d time.Duration) time.Duration {
	return now.Truncate(d).Add(d).Sub(now)
}

// Close stops the goroutine that checks the first address. database/sql
// calls it from DB.Close.
func (f *failover) Close() error {
	f.cancel()
	<-f.done
	return nil
}

// state reports the address in use and the moves so far.
func (f *failover) state() Address {
	f.mu.Lock()
	defer f.mu.Unlock()
	return Address{
		Name: f.addrs[f.cur].Name, Index: f.cur, Count: len(f.addrs),
		Switches: f.switches, LastSwitch: f.lastSwitch, LastSwitchReason: f.lastErr,
	}
}

// fullConn is every method of the drivers' connections that database/sql
// uses and both drivers have (pgx's connections are no driver.Validator;
// IsValid asks when they are).
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

// failoverConn is a connection of a failover connector. It stops being
// valid when the connector moves or a node refuses, so that database/sql
// closes it rather than pool it.
type failoverConn struct {
	fullConn
	f     *failover
	gen   uint64
	stray bool // opened to an address that is not the one in use
}

func (c *failoverConn) stale() bool { return c.stray || c.gen != c.f.gen.Load() }

// ResetSession runs when the pool hands the connection out again.
func (c *failoverConn) ResetSession(ctx context.Context) error {
	if c.stale() {
		return driver.ErrBadConn
	}
	return c.fullConn.ResetSession(ctx)
}

// IsValid runs when the connection goes back to the pool.
func (c *failoverConn) IsValid() bool {
	if c.stale() {
		return false
	}
	if v, ok := c.fullConn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}
