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
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/leafd/leafd/internal/testkit/testenv"
)

// startTimeout bounds a start: initdb's or the server's until it accepts
// connections, crash recovery included.
const startTimeout = 60 * time.Second

// user is who the server runs as when the test runs as root, which
// PostgreSQL refuses to run as.
const user = "postgres"

// Server is one PostgreSQL server of a test. Its methods are safe for
// concurrent use.
type Server struct {
	bin, dir, data string
	port           int

	mu   sync.Mutex
	proc *testenv.Process // nil while down
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
		_ = s.Crash()
		os.RemoveAll(dir)
	})
	uid, gid, err := testenv.UserIDs(user)
	if err != nil {
		tb.Fatalf("pgserver: %v", err)
	}
	if uid >= 0 {
		if err := os.Chown(dir, uid, gid); err != nil {
			tb.Fatal(err)
		}
	}
	ports, err := testenv.FreePorts(1)
	if err != nil {
		tb.Fatalf("pgserver: %v", err)
	}
	s.port = ports[0]
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if _, err := testenv.Run(ctx, testenv.Config{Path: filepath.Join(bin, "initdb"), User: user,
		Args: []string{"-D", s.data, "-U", "root", "-A", "trust", "-E", "UTF8", "--no-sync"}}); err != nil {
		tb.Fatalf("pgserver: %v", err)
	}
	if err := s.Start(); err != nil {
		tb.Fatal(err)
	}
	return s
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
	defer s.mu.Unlock()
	if s.proc != nil {
		return errors.New("pgserver: the server is running")
	}
	p, err := testenv.Start(testenv.Config{
		Path: filepath.Join(s.bin, "postgres"), Name: "postgres", User: user,
		Args: []string{"-D", s.data, "-p", strconv.Itoa(s.port), "-k", s.dir,
			"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200", "-c", "shared_buffers=32MB"},
		Serving: func(line string) (string, bool) {
			return s.Addr(), strings.Contains(line, "database system is ready to accept connections")
		},
		LogFile: filepath.Join(s.dir, "postgres.log"), Tail: 40,
		// A test process that dies takes its server along (SIGQUIT: an
		// immediate shutdown, which also ends the server's own children).
		Group: true, DeathSignal: syscall.SIGQUIT, StopSignal: syscall.SIGQUIT,
	})
	if err != nil {
		return fmt.Errorf("pgserver: %w", err)
	}
	if _, err := p.WaitServing(context.Background(), startTimeout); err != nil {
		p.Kill()
		return fmt.Errorf("pgserver: %w; its output:\n%s", err, p.Output())
	}
	s.proc = p
	return nil
}

// Crash ends the server with an immediate shutdown, as a crash would: every
// session is cut, nothing is checkpointed, and the next Start replays the
// write-ahead log. It returns once the server has exited.
//
// Errors: the server is not running, or it did not exit within 30 seconds
// of SIGQUIT and was killed.
func (s *Server) Crash() error {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p == nil {
		return errors.New("pgserver: the server is not running")
	}
	if _, err := p.Stop(30 * time.Second); err != nil {
		return fmt.Errorf("pgserver: %w", err)
	}
	return nil
}
