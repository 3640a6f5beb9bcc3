package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mathrand "math/rand/v2"
	"os"
	"time"

	"github.com/go-sql-driver/mysql"
)

// leafd's lock row: the migration lock of a MySQL-family server that
// refuses GET_LOCK. Percona XtraDB Cluster refuses it under
// pxc_strict_mode=ENFORCING (error 1105), Vitess outside a reserved
// connection, and some proxies do not pass it on. The lock is then a row
// of leafd's own table, taken by a conditional UPDATE that only a free or
// expired row matches, kept alive while the migrations run, and freed
// after. A server that dies holding it blocks the others only until the
// row expires. The row is an ordinary write, so on Galera and PXC it holds
// across the whole cluster (two servers taking it through two nodes
// conflict, and one of them waits), which GET_LOCK does not.
const (
	createLockTableSQL = `CREATE TABLE IF NOT EXISTS leafd_lock (
  name       VARCHAR(64)  NOT NULL,
  holder     VARCHAR(128) NOT NULL DEFAULT '',
  expires_ms BIGINT       NOT NULL DEFAULT 0,
  PRIMARY KEY (name)
) ENGINE=InnoDB`
	insertLockRowSQL = `INSERT IGNORE INTO leafd_lock (name) VALUES (?)`
	// %[1]s is the database's clock in Unix milliseconds: every server
	// judges the expiry by the same clock.
	takeLockRowSQL = `UPDATE leafd_lock SET holder = ?, expires_ms = %[1]s + ?
WHERE name = ? AND (holder = '' OR expires_ms < %[1]s)`
	extendLockRowSQL  = `UPDATE leafd_lock SET expires_ms = %[1]s + ? WHERE name = ? AND holder = ?`
	releaseLockRowSQL = `UPDATE leafd_lock SET holder = '', expires_ms = 0 WHERE name = ? AND holder = ?`
	readLockRowSQL    = `SELECT holder, expires_ms - %[1]s FROM leafd_lock WHERE name = ?`
)

// lockRowTTL is how long the lock row holds without being renewed; it is
// renewed every lockRowTTL/3 while the migrations run. lockRowPoll is the
// pause between two attempts to take it (with jitter).
const (
	lockRowTTL  = 30 * time.Second
	lockRowPoll = 200 * time.Millisecond
)

// refusesNamedLock reports whether err, the answer to SELECT GET_LOCK, is
// the server refusing the statement rather than failing: an error of the
// server's that the error table leaves to the caller (1105, 1235, an
// unknown function), not a lost connection, a node that does not serve or
// a conflict.
func (s *MySQL) refusesNamedLock(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && s.class(err) == classOther
}

// migrateWithoutNamedLock migrates a database whose server refused
// GET_LOCK (refusal): with no lock at all when every migration is already
// applied, under leafd's lock row otherwise.
func (s *MySQL) migrateWithoutNamedLock(ctx context.Context, refusal error) error {
	var me *mysql.MySQLError
	errors.As(refusal, &me)
	why := fmt.Sprintf("the database refused GET_LOCK (error %d: %s)", me.Number, me.Message)
	if pending, err := s.pendingMigrations(ctx); err == nil && !pending {
		s.log.Info("store: mysql: migrations already applied; no migration lock taken", "reason", why)
		return nil
	}
	s.log.Info("store: mysql: migrating under leafd's lock row (table leafd_lock) instead of GET_LOCK", "reason", why)
	release, err := s.takeLockRow(ctx)
	if err != nil {
		return err
	}
	defer release()
	return s.migrate(ctx)
}

// takeLockRow takes leafd's lock row, waiting up to s.lockWait while
// another server holds it, and returns the function that frees it. The row
// is renewed in the background until then.
func (s *MySQL) takeLockRow(ctx context.Context) (release func(), err error) {
	if _, err := s.x.ExecContext(ctx, createLockTableSQL); err != nil {
		return nil, s.Wrap(err, "migrate: create leafd's lock table leafd_lock")
	}
	if _, err := s.x.ExecContext(ctx, insertLockRowSQL, migrateLock); err != nil {
		return nil, s.Wrap(err, "migrate: create leafd's lock row")
	}
	holder := lockHolder()
	take := fmt.Sprintf(takeLockRowSQL, s.dialect.nowMs)
	deadline := time.Now().Add(s.lockWait)
	for {
		got, err := s.execOne(ctx, take, holder, lockRowTTL.Milliseconds(), migrateLock)
		switch {
		case got:
		case err == nil, s.class(err) == classRetry, s.class(err) == classLocked:
			// Held by another server, or another server's attempt
			// conflicted with this one: try again shortly.
			if time.Now().After(deadline) {
				return nil, s.lockRowHeld(ctx)
			}
			t := time.NewTimer(lockRowPoll/2 + mathrand.N(lockRowPoll))
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, s.Wrap(ctx.Err(), "migrate: wait for leafd's lock row")
			case <-t.C:
			}
			continue
		default:
			return nil, s.Wrap(err, "migrate: take leafd's lock row")
		}
		break
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go s.renewLockRow(holder, stop, done)
	return func() {
		close(stop)
		<-done
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := s.x.ExecContext(ctx, releaseLockRowSQL, migrateLock, holder); err != nil {
			s.log.Warn("store: mysql: could not free leafd's lock row; it expires on its own", "holder", holder,
				"expires_in", lockRowTTL, "err", err)
		}
	}, nil
}

// execOne runs an UPDATE and reports whether it matched one row.
func (s *MySQL) execOne(ctx context.Context, query string, args ...any) (bool, error) {
	res, err := s.x.ExecContext(ctx, query, args...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return err == nil && n == 1, err
}

// renewLockRow keeps holder's lock row from expiring until stop closes.
func (s *MySQL) renewLockRow(holder string, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(lockRowTTL / 3)
	defer t.Stop()
	extend := fmt.Sprintf(extendLockRowSQL, s.dialect.nowMs)
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), lockRowTTL/3)
		ok, err := s.execOne(ctx, extend, lockRowTTL.Milliseconds(), migrateLock, holder)
		cancel()
		if err == nil && !ok {
			// Expired and taken by another server: the migrations run
			// again harmlessly, so this one goes on.
			s.log.Warn("store: mysql: leafd's lock row was taken over while migrating", "holder", holder)
			return
		}
	}
}

// lockRowHeld is the error of a lock row that stayed held: it names the
// holder and how long the row still holds.
func (s *MySQL) lockRowHeld(ctx context.Context) error {
	var (
		holder string
		leftMs int64
	)
	if err := s.x.QueryRowContext(ctx, fmt.Sprintf(readLockRowSQL, s.dialect.nowMs), migrateLock).Scan(&holder, &leftMs); err != nil {
		holder, leftMs = "another server", 0
	}
	return fmt.Errorf("store: mysql: migrate: leafd's lock row (table leafd_lock) was not freed within %v: %s holds it for %v more, "+
		"and may be migrating this database; if it is not running, the row expires on its own",
		s.lockWait, holder, (time.Duration(max(leftMs, 0)) * time.Millisecond).Round(time.Millisecond))
}

// lockHolder names this process in the lock row: host, pid and a random
// part, as a worker id's owner.
func lockHolder() string {
	host, _ := os.Hostname()
	var b [6]byte
	_, _ = rand.Read(b[:])
	h := fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	if len(h) > 128 {
		h = h[len(h)-128:]
	}
	return h
}
