// Package pgserver starts a PostgreSQL server of a test's own on loopback,
// in a temporary data directory, so that a test can crash and restart a
// real PostgreSQL without touching the one the system runs (127.0.0.1:5432)
// or the other tests that use it. It runs the postgres and initdb programs
// of Debian's postgresql package (or those in PATH), as the postgres user
// when the test runs as root, with trust authentication for the superuser
// root over 127.0.0.1.
//
// Crash ends the server as a power cut would end it, with an immediate
// shutdown (SIGQUIT: no checkpoint, every session cut), and Start brings it
// back, replaying its write-ahead log.
//
// Environment:
//
//	LEAFD_TEST_REQUIRE_POSTGRES=1   fail, rather than skip, when PostgreSQL's
//	                                programs are not installed
package pgserver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// startTimeout bounds a start: initdb's or the server's until it accepts
// connections, crash recovery included.
const startTimeout = 60 * time.Second

// Server is one PostgreSQL server of a test. Its methods are safe for
// concurrent use.
type Server struct {
	bin, dir, data string
	port           int
	cred           *syscall.Credential // the postgres user's, when run as root

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// bindir returns the directory of PostgreSQL's server programs: the newest
// of Debian's /usr/lib/postgresql/<version>/bin, or the one that holds
// postgres in PATH.
func bindir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return va - vb
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i], nil
		}
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		if _, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
	}
	return "", errors.New("pgserver: PostgreSQL's server programs (postgres, initdb) are not installed: apt-get install postgresql")
}

// Start initialises a data directory and starts a server in it on a free
// loopback port; it is stopped and removed when the test ends. Without
// PostgreSQL's programs it skips the test, or fails it under
// LEAFD_TEST_REQUIRE_POSTGRES=1.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := bindir()
	if err != nil {
		if os.Getenv("LEAFD_TEST_REQUIRE_POSTGRES") == "1" {
			tb.Fatalf("%v (LEAFD_TEST_REQUIRE_POSTGRES=1)", err)
		}
		tb.Skip(err)
	}
	dir, err := os.MkdirTemp("", "leafd-pgserver-")
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{bin: bin, dir: dir, data: filepath.Join(dir, "data")}
	tb.Cleanup(func() {
		s.stop()
		os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root.
		u, err := user.Lookup("postgres")
		if err != nil {
			tb.Fatalf("pgserver: running as root, and there is no postgres user to run the server as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
		if err := os.Chown(dir, uid, gid); err != nil {
			tb.Fatal(err)
		}
	}
	if s.port, err = freePort(); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", s.data, "-U", "root", "-A", "trust", "-E", "UTF8", "--no-sync")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		tb.Fatalf("pgserver: initdb: %v\n%s", err, out)
	}
	if err := s.Start(); err != nil {
		tb.Fatal(err)
	}
	return s
}

// freePort returns a TCP port on 127.0.0.1 that nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Addr returns the server's address, 127.0.0.1:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// DSN returns the URL of database db on the server, as the superuser root.
func (s *Server) DSN(db string) string {
	u := url.URL{Scheme: "postgres", User: url.User("root"), Host: s.Addr(), Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// CreateDatabase creates an empty database named name.
func (s *Server) CreateDatabase(name string) error {
	db, err := s.open("postgres")
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec("CREATE DATABASE " + pgx.Identifier{name}.Sanitize())
	return err
}

func (s *Server) open(db string) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(s.DSN(db))
	if err != nil {
		return nil, err
	}
	cfg.ConnectTimeout = 2 * time.Second
	return stdlib.OpenDB(*cfg), nil
}

// Start starts the server (again) and returns once it accepts
// connections.
func (s *Server) Start() error {
	s.mu.Lock()
	if s.cmd != nil {
		s.mu.Unlock()
		return errors.New("pgserver: the server is running")
	}
	log, err := os.OpenFile(filepath.Join(s.dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", s.data, "-p", strconv.Itoa(s.port), "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200", "-c", "shared_buffers=32MB")
	cmd.Stdout, cmd.Stderr = log, log
	// A test process that dies takes its server along (SIGQUIT: an
	// immediate shutdown, which also ends the server's own children).
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true, Pdeathsig: syscall.SIGQUIT}
	if err := cmd.Start(); err != nil {
		log.Close()
		s.mu.Unlock()
		return fmt.Errorf("pgserver: start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); log.Close(); close(done) }()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()

	deadline := time.Now().Add(startTimeout)
	for {
		db, err := s.open("postgres")
		if err == nil {
			err = db.Ping()
			db.Close()
		}
		if err == nil {
			return nil
		}
		select {
		case <-done:
			out, _ := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
			return fmt.Errorf("pgserver: postgres exited at start-up: %s", tail(out))
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgserver: postgres did not accept connections within %v: %v", startTimeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Crash ends the server with an immediate shutdown, as a crash would: every
// session is cut, nothing is checkpointed, and the next Start replays the
// write-ahead log. It returns once the server has exited.
func (s *Server) Crash() error {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd, s.done = nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return errors.New("pgserver: the server is not running")
	}
	if err := cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		return errors.New("pgserver: postgres did not exit within 30s of SIGQUIT; killed")
	}
}

func (s *Server) stop() {
	if err := s.Crash(); err != nil {
		return // not running
	}
}

// tail returns the last lines of a log, for an error.
func tail(b []byte) string {
	const max = 2000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}
