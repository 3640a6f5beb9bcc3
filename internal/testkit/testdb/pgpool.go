package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgreSQL test databases are reused rather than created and dropped for
// each test: on PostgreSQL 15 every DROP DATABASE waits for a checkpoint of
// the whole server, and the suite asks for hundreds of databases. A
// database goes back to the pool when its test ends and is reset there:
// its sessions ended, every schema, table, sequence, view, routine and
// type dropped, its settings reset, and renamed, so that nothing left of
// the test reaches it by its old name. It is used again only when its
// catalog then reads exactly as it did when it was created (fingerprint,
// kept as the database's comment); otherwise it is dropped.
//
// The pool outlives the test process: a database is named
// leafd_test_<token>_<n>, and a process holds a session named
// leafd_testdb_<token> while it runs. A database whose token has no such
// session belongs to a process that has ended; the next process that
// needs one takes it over (renames it to its own token) and resets it. So
// the server keeps as many empty leafd_test_* databases as tests once
// used at the same time, and never more.

// pgPoolApp is the application_name prefix of the session that shows a
// process's databases are in use.
const pgPoolApp = "leafd_testdb_"

// pgPoolName matches the names of pooled databases and captures the token.
var pgPoolName = regexp.MustCompile(`^leafd_test_([0-9a-f]{8})_[0-9]+$`)

// pgFingerprint returns a database's catalog as far as a test can change
// it and a fresh database shows it: its schemas with their owners and
// privileges, its extensions, its settings, privileges and limits, and,
// for every catalog of the database, how many of its objects were made
// after the server was set up (an oid from 16384, FirstNormalObjectId, on:
// what a test made, of whatever kind). Temporary schemas are left out:
// they stay in the catalog, empty, after their sessions end.
func pgFingerprint(ctx context.Context, c *pgx.Conn) (string, error) {
	rows, err := c.Query(ctx, `SELECT c.relname FROM pg_class c
		JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'oid'
		WHERE c.relnamespace = 'pg_catalog'::regnamespace AND c.relkind = 'r' AND NOT c.relisshared
		  AND c.relname <> 'pg_user_mapping' -- only a superuser may read it; a server's count shows in pg_foreign_server
		ORDER BY c.relname`)
	if err != nil {
		return "", err
	}
	catalogs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", err
	}
	q := `SELECT concat_ws(' | ',
		(SELECT string_agg(nspname || ':' || nspowner::regrole || ':' || coalesce(nspacl::text, '-'), ',' ORDER BY nspname)
		   FROM pg_namespace WHERE nspname !~ '^pg_(toast_)?temp_'),
		(SELECT string_agg(extname || ' ' || extversion, ',' ORDER BY extname) FROM pg_extension),
		(SELECT count(*) FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase WHERE d.datname = current_database()),
		(SELECT datdba::regrole || ':' || coalesce(datacl::text, '-') || ':' || datconnlimit || ':' || datallowconn
		   FROM pg_database WHERE datname = current_database())`
	for _, name := range catalogs {
		cond := "oid >= 16384"
		if name == "pg_namespace" {
			cond += ` AND nspname !~ '^pg_(toast_)?temp_'`
		}
		q += fmt.Sprintf(",\n\t\t(SELECT '%s=' || count(*) FROM pg_catalog.%s WHERE %s HAVING count(*) > 0)", name, name, cond)
	}
	var fp string
	err = c.QueryRow(ctx, q+")").Scan(&fp)
	return fp, err
}

// pgDropAll drops what a test made in a database: its large objects, every
// schema but public and the system's, and everything in public. Each list of names is read
// whole before the first drop, since a drop may cascade to later entries
// (IF EXISTS then passes over them).
const pgDropAll = `DO $$
DECLARE q text;
BEGIN
	PERFORM lo_unlink(oid) FROM pg_largeobject_metadata;
	FOREACH q IN ARRAY coalesce((SELECT array_agg(format('DROP SCHEMA IF EXISTS %I CASCADE', nspname)) FROM pg_namespace
	          WHERE nspname NOT IN ('public', 'information_schema') AND nspname !~ '^pg_'), '{}') LOOP
		EXECUTE q;
	END LOOP;
	FOREACH q IN ARRAY coalesce((SELECT array_agg(format('DROP %s IF EXISTS public.%I CASCADE', CASE c.relkind
			WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW' WHEN 'f' THEN 'FOREIGN TABLE' ELSE 'TABLE' END, c.relname))
		  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	     WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'f')), '{}') LOOP
		EXECUTE q;
	END LOOP;
	-- After the tables: those of identity and serial columns go with them.
	FOREACH q IN ARRAY coalesce((SELECT array_agg(format('DROP SEQUENCE IF EXISTS public.%I CASCADE', c.relname))
		  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'S'), '{}') LOOP
		EXECUTE q;
	END LOOP;
	FOREACH q IN ARRAY coalesce((SELECT array_agg(format('DROP ROUTINE IF EXISTS public.%I(%s) CASCADE', p.proname, pg_get_function_identity_arguments(p.oid)))
		  FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'), '{}') LOOP
		EXECUTE q;
	END LOOP;
	FOREACH q IN ARRAY coalesce((SELECT array_agg(format('DROP TYPE IF EXISTS public.%I CASCADE', t.typname))
		  FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE n.nspname = 'public' AND t.typelem = 0), '{}') LOOP
		EXECUTE q;
	END LOOP;
END $$`

// pgPool is this process's part of the pool, guarded by pgServer.mu.
type pgPool struct {
	token string    // this process's token
	lease *sql.Conn // the session named pgPoolApp+token, held while the process runs
	free  []string  // databases reset and ready
	made  int       // databases named so far, for the next name
	// resetting counts the databases being reset; ready is signalled
	// when one is done.
	resetting int
	ready     *sync.Cond
}

// startPool opens the session that marks this process's databases as in
// use.
func startPool(ctx context.Context, db *sql.DB) (pgPool, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	c, err := db.Conn(ctx)
	if err != nil {
		return pgPool{}, err
	}
	if _, err := c.ExecContext(ctx, "SET application_name = '"+pgPoolApp+token+"'"); err != nil {
		c.Close()
		return pgPool{}, err
	}
	// Idle between tests, it must not be timed out (PostgreSQL 14 and
	// later; older servers have no such limit and refuse the name).
	_, _ = c.ExecContext(ctx, "SET idle_session_timeout = 0")
	return pgPool{token: token, lease: c, ready: sync.NewCond(&pgServer.mu)}, nil
}

// pgAcquire returns the name of an empty database for a test: one of this
// process's, else one an ended process left (taken over), else a new one.
func pgAcquire(ctx context.Context) (string, error) {
	p := &pgServer.pool
	// The lease must hold: without it, another process would take this
	// one's databases for its own.
	if err := p.lease.PingContext(ctx); err != nil {
		return "", fmt.Errorf("the session that marks this process's test databases as in use ended: %w", err)
	}
	pgServer.mu.Lock()
	// A database being reset is worth waiting for: no sooner made anew.
	for len(p.free) == 0 && p.resetting > 0 {
		p.ready.Wait()
	}
	if n := len(p.free); n > 0 {
		name := p.free[n-1]
		p.free = p.free[:n-1]
		pgServer.mu.Unlock()
		return name, nil
	}
	pgServer.mu.Unlock()
	if name := adoptOrphan(ctx); name != "" {
		return name, nil
	}
	name := pgNewName()
	if _, err := pgServer.db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create the test database %s: %w", name, err)
	}
	err := withDatabase(ctx, name, func(c *pgx.Conn) error {
		fp, err := pgFingerprint(ctx, c)
		if err != nil {
			return err
		}
		if _, err := c.Exec(ctx, "COMMENT ON DATABASE "+name+" IS "+sqlString(fp)); err != nil {
			return err
		}
		_, err = c.Exec(ctx, pgNoFlush(name))
		return err
	})
	if err != nil {
		return "", fmt.Errorf("record the catalog of the new test database %s: %w", name, err)
	}
	return name, nil
}

// pgNewName is a name for a database of this process not used before.
func pgNewName() string {
	pgServer.mu.Lock()
	defer pgServer.mu.Unlock()
	p := &pgServer.pool
	p.made++
	return "leafd_test_" + p.token + "_" + strconv.Itoa(p.made-1)
}

// adoptOrphan takes over a database that an ended process left and resets
// it; it returns its new name, or "" when there is none to take.
func adoptOrphan(ctx context.Context) string {
	rows, err := pgServer.db.QueryContext(ctx, `SELECT datname FROM pg_database d
		WHERE datname LIKE 'leafd\_test\_%'
		  AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.application_name = $1 || substr(d.datname, 12, 8))
		ORDER BY datname`, pgPoolApp)
	if err != nil {
		pgLog(fmt.Errorf("look for the test databases of ended processes: %w", err))
		return ""
	}
	var orphans []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err == nil && pgPoolName.MatchString(n) {
			orphans = append(orphans, n)
		}
	}
	rows.Close()
	for _, o := range orphans {
		// Another process may take it first, or the ended process's
		// sessions may not have closed yet: then the rename fails and
		// the next is tried.
		name := pgNewName()
		if _, err := pgServer.db.ExecContext(ctx, "ALTER DATABASE "+o+" RENAME TO "+name); err != nil {
			continue
		}
		name, err := pgReset(ctx, name)
		if err != nil {
			pgLog(err)
		}
		if name != "" {
			return name
		}
	}
	return ""
}

// pgLog tells of a test database that could be neither reset nor dropped:
// nothing a test did, so no test fails of it; the next run takes it over
// again.
func pgLog(err error) { fmt.Fprintf(os.Stderr, "testdb: %v\n", err) }

// pgRelease gives a test's database back: it is reset in the background,
// so that the test ends without waiting, and joins the pool, or is dropped
// when it cannot be made as it was.
func pgRelease(name string) {
	p := &pgServer.pool
	pgServer.mu.Lock()
	p.resetting++
	pgServer.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		name, err := pgReset(ctx, name)
		if err != nil {
			pgLog(err)
		}
		pgServer.mu.Lock()
		defer pgServer.mu.Unlock()
		p.resetting--
		if name != "" {
			p.free = append(p.free, name)
		}
		p.ready.Broadcast()
	}()
}

// pgReset ends the sessions of database name, drops what tests made in it,
// checks its catalog against the one it had when it was created and
// renames it, so that whatever still holds its old DSN reaches nothing
// (the rename fails while a session is connected: it also shows that none
// is). It returns the new name. When any of that fails, or the catalog
// differs, it drops the database and returns "", with an error only when
// even that fails.
func pgReset(ctx context.Context, name string) (string, error) {
	// A test's stores are closed by now; these are sessions it left open.
	_, err := pgServer.db.ExecContext(ctx,
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", name)
	if err == nil {
		err = withDatabase(ctx, name, func(c *pgx.Conn) error {
			if _, err := c.Exec(ctx, "ALTER DATABASE "+name+" RESET ALL"); err != nil {
				return err
			}
			if _, err := c.Exec(ctx, pgDropAll); err != nil {
				return err
			}
			fp, err := pgFingerprint(ctx, c)
			if err != nil {
				return err
			}
			var want sql.NullString
			if err := c.QueryRow(ctx, "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = current_database()").Scan(&want); err != nil {
				return err
			}
			if !want.Valid || fp != want.String {
				return errors.New("its catalog differs from a fresh database's")
			}
			_, err = c.Exec(ctx, pgNoFlush(name))
			return err
		})
	}
	fresh := pgNewName()
	if err == nil {
		_, err = pgServer.db.ExecContext(ctx, "ALTER DATABASE "+name+" RENAME TO "+fresh)
	}
	if err == nil {
		return fresh, nil
	}
	// Its own time: the reset's may be what ran out.
	dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pgServer.db.ExecContext(dctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		return "", fmt.Errorf("drop the test database %s, which could not be reset: %w", name, err)
	}
	return "", nil
}

// pgNoFlush makes the commits of a test database's sessions return before
// the server has flushed them to disk: tests never crash the server they
// share, and waiting for the disk was most of their time on PostgreSQL.
func pgNoFlush(name string) string {
	return "ALTER DATABASE " + name + " SET synchronous_commit = off"
}

// withDatabase runs f on a new session of database name.
func withDatabase(ctx context.Context, name string, f func(c *pgx.Conn) error) error {
	cfg := pgServer.cfg.Copy()
	cfg.Database = name
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	return f(c)
}
