package mysql

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

	"github.com/leafd/leafd/store/internal/engine"
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
func refusesNamedLock(m engine.Migrator, err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && m.Class(err) == engine.ClassOther
}

// migrateWithoutNamedLock migrates a database whose server refused
// GET_LOCK (refusal): with no lock at all when every migration is already
// applied, under leafd's lock row otherwise.
func migrateWithoutNamedLock(ctx context.Context, m engine.Migrator, refusal error) error {
	me, _ := errors.AsType[*mysql.MySQLError](refusal)
	why := fmt.Sprintf("the database refused GET_LOCK (error %d: %s)", me.Number, me.Message)
	if pending, err := m.Pending(ctx); err == nil && !pending {
		m.Log().Info("store: mysql: migrations already applied; no migration lock taken", "reason", why)
		return nil
	}
	m.Log().Info("store: mysql: migrating under leafd's lock row (table leafd_lock) instead of GET_LOCK", "reason", why)
	release, err := takeLockRow(ctx, m)
	if err != nil {
		return err
	}
	defer release()
	return up(ctx, m)
}

// lockRowWait bounds the wait for leafd's lock row.
var lockRowWait = migrateLockSeconds * time.Second

// takeLockRow takes leafd's lock row, waiting up to lockRowWait while
// another server holds it, and returns the function that frees it. The row
// is renewed in the background until then.
func takeLockRow(ctx context.Context, m engine.Migrator) (release func(), err error) {
	if _, err := m.DB().ExecContext(ctx, createLockTableSQL); err != nil {
		return nil, m.Wrap(err, "migrate: create leafd's lock table leafd_lock")
	}
	if _, err := m.DB().ExecContext(ctx, insertLockRowSQL, migrateLock); err != nil {
		return nil, m.Wrap(err, "migrate: create leafd's lock row")
	}
	holder := lockHolder()
	take := fmt.Sprintf(takeLockRowSQL, nowMs)
	deadline := time.Now().Add(lockRowWait)
	for {
		got, err := execOne(ctx, m, take, holder, lockRowTTL.Milliseconds(), migrateLock)
		switch {
		case got:
		case err == nil, m.Class(err) == engine.ClassRetry, m.Class(err) == engine.ClassLocked:
			// Held by another server, or another server's attempt
			// conflicted with this one: try again shortly.
			if time.Now().After(deadline) {
				return nil, lockRowHeld(ctx, m)
			}
			if err := engine.Sleep(ctx, lockRowPoll/2+mathrand.N(lockRowPoll)); err != nil {
				return nil, m.Wrap(err, "migrate: wait for leafd's lock row")
			}
			continue
		default:
			return nil, m.Wrap(err, "migrate: take leafd's lock row")
		}
		break
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go renewLockRow(m, holder, stop, done)
	return func() {
		close(stop)
		<-done
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := m.DB().ExecContext(ctx, releaseLockRowSQL, migrateLock, holder); err != nil {
			m.Log().Warn("store: mysql: could not free leafd's lock row; it expires on its own", "holder", holder,
				"expires_in", lockRowTTL, "err", err)
		}
	}, nil
}

// execOne runs an UPDATE and reports whether it matched one row.
func execOne(ctx context.Context, m engine.Migrator, query string, args ...any) (bool, error) {
	res, err := m.DB().ExecContext(ctx, query, args...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return err == nil && n == 1, err
}

// renewLockRow keeps holder's lock row from expiring until stop closes.
func renewLockRow(m engine.Migrator, holder string, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(lockRowTTL / 3)
	defer t.Stop()
	extend := fmt.Sprintf(extendLockRowSQL, nowMs)
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), lockRowTTL/3)
		ok, err := execOne(ctx, m, extend, lockRowTTL.Milliseconds(), migrateLock, holder)
		cancel()
		if err == nil && !ok {
			// Expired and taken by another server: the migrations run
			// again harmlessly, so this one goes on.
			m.Log().Warn("store: mysql: leafd's lock row was taken over while migrating", "holder", holder)
			return
		}
	}
}

// lockRowHeld is the error of a lock row that stayed held: it names the
// holder and how long the row still holds.
func lockRowHeld(ctx context.Context, m engine.Migrator) error {
	var (
		holder string
		leftMs int64
	)
	if err := m.DB().QueryRowContext(ctx, fmt.Sprintf(readLockRowSQL, nowMs), migrateLock).Scan(&holder, &leftMs); err != nil {
		holder, leftMs = "another server", 0
	}
	return fmt.Errorf("store: mysql: migrate: leafd's lock row (table leafd_lock) was not freed within %v: %s holds it for %v more, "+
		"and may be migrating this database; if it is not running, the row expires on its own",
		lockRowWait, holder, (time.Duration(max(leftMs, 0)) * time.Millisecond).Round(time.Millisecond))
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
