package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/leafd/leafd/internal/testkit/testenv"
)

// Bounds of start-up and shutdown. A server that does not listen, or does
// not answer /readyz 200, within these is reported with its log.
const (
	startTimeout = 60 * time.Second
	readyTimeout = 30 * time.Second
	// stopGrace is how long a server may take to exit after SIGTERM before
	// it is killed.
	stopGrace = 5 * time.Second
	// tailLines is how many lines of a server's output are kept, to show
	// when it fails.
	tailLines = 40
)

// process is a server leafbench started: leafd or a baseline.
type process struct {
	*testenv.Process
	url string // http://127.0.0.1:port
	// grpcAddr is leafd's gRPC address, host:port, when it serves gRPC.
	grpcAddr string
}

// start runs the named server that c describes, keeping the last
// tailLines lines of its output, and waits until it has reported its
// address (c.Serving), exited or taken startTimeout, then, unless client is
// nil, until /readyz answers 200. The server gets SIGTERM if leafbench dies
// without stopping it.
func start(ctx context.Context, name string, c testenv.Config, client *http.Client) (*process, error) {
	c.Name, c.Tail, c.DeathSignal = name, tailLines, syscall.SIGTERM
	tp, err := testenv.Start(c)
	if err != nil {
		return nil, err
	}
	p := &process{Process: tp}
	if p.url, err = tp.WaitServing(ctx, startTimeout); err != nil {
		p.Stop()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w; its last output:\n%s", err, p.lastOutput())
	}
	if client == nil {
		return p, nil
	}
	if err := testenv.WaitReady(ctx, client, p.url, readyTimeout, p.Done()); err != nil {
		p.Stop()
		return nil, fmt.Errorf("%s: %w; its last output:\n%s", name, err, p.lastOutput())
	}
	return p, nil
}

// Stop sends SIGTERM and waits for the process to exit; it is killed after
// stopGrace. Stop may be called more than once.
func (p *process) Stop() {
	_, _ = p.Process.Stop(stopGrace)
}

// lastOutput returns the last lines of the process's output, indented.
func (p *process) lastOutput() string {
	out := p.Output()
	if out == "" {
		return "  (nothing)"
	}
	return "  " + strings.ReplaceAll(out, "\n", "\n  ")
}

// snowflakeSettings are the snowflake settings of the leafd that leafbench
// starts (-snowflake-workers, -snowflake-borrow).
type snowflakeSettings struct {
	workers int           // snowflake.workers
	borrow  time.Duration // snowflake.max_borrow, 0 for off
}

// String describes s for the report.
func (s snowflakeSettings) String() string {
	return fmt.Sprintf("snowflake.worker_id auto, snowflake.workers %d, snowflake.max_borrow %v", s.workers, s.borrow)
}

// leafdSettings are the LEAFD_* variables of the leafd that leafbench
// starts: no store.driver or store.dsn, so that it opens the default
// engine's default database (a SQLite file under data/) in its working
// directory, fresh; the benchmark tag with a large step so that
// range loads are rare and in the background, snowflake on with worker ids
// leased from that database (worker_id auto, which its fresh lease table
// grants at once), sf.workers of them and max_borrow sf.borrow, JSON logs
// to learn the port from; with grpc, the gRPC API on a free loopback port
// too.
func leafdSettings(tag string, grpc bool, sf snowflakeSettings) []string {
	s := []string{
		"LEAFD_HTTP_ADDR=127.0.0.1:0",
		"LEAFD_HTTP_SHUTDOWN_TIMEOUT=2s",
		"LEAFD_SEGMENT_ENABLED=true",
		"LEAFD_SEGMENT_SEED_TAGS=" + tag + ":" + strconv.Itoa(seedStep),
		"LEAFD_SEGMENT_MAX_STEP=" + strconv.Itoa(maxStep),
		"LEAFD_SNOWFLAKE_ENABLED=true",
		"LEAFD_SNOWFLAKE_WORKER_ID=auto",
		"LEAFD_SNOWFLAKE_WORKERS=" + strconv.Itoa(sf.workers),
		"LEAFD_SNOWFLAKE_MAX_BORROW=" + sf.borrow.String(),
		"LEAFD_LOG_FORMAT=json",
		"LEAFD_LOG_LEVEL=info",
	}
	if grpc {
		// localhost:0 rather than 127.0.0.1:0, which the configuration
		// refuses as equal to http.addr (although the kernel gives each
		// its own port).
		s = append(s, "LEAFD_GRPC_ADDR=localhost:0")
	}
	return s
}

// Steps of the benchmark tag: a range of a million IDs at first, growing to
// a hundred million as the step policy sees the rate, so that even the
// batch scenario loads a range only every few seconds.
const (
	seedStep = 1_000_000
	maxStep  = 100_000_000
)

// startLeafd starts the leafd binary bin with a database in dir and waits
// until it is ready. The environment is leafbench's without any LEAFD_*
// variable, plus leafdSettings; its working directory is dir, so that no
// config.yaml is read and the default database is a new one in dir. With grpc it also serves gRPC, and reports the
// address ("leafd gRPC serving", said before "leafd serving") in grpcAddr.
func startLeafd(ctx context.Context, bin, dir, tag string, grpc bool, sf snowflakeSettings, client *http.Client) (*process, error) {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "LEAFD_") })
	env = append(env, leafdSettings(tag, grpc, sf)...)
	var grpcAddr atomic.Pointer[string]
	p, err := start(ctx, "leafd", testenv.Config{Path: bin, Args: []string{"serve"}, Dir: dir, Env: env,
		Line: func(line string) {
			if addr, ok := grpcServingAddr(line); ok {
				grpcAddr.Store(&addr)
			}
		}}, client)
	if err != nil || !grpc {
		return p, err
	}
	if a := grpcAddr.Load(); a != nil {
		p.grpcAddr = *a
		return p, nil
	}
	p.Stop()
	return nil, fmt.Errorf("leafd did not report a gRPC address (a log record \"leafd gRPC serving\" with the addr of grpc.addr): "+
		"does this leafd serve gRPC? Its last output:\n%s", p.lastOutput())
}

// startBaseline starts leafbench itself again as the baseline server of
// kind (serveBaseline), a process of its own as leafd is, and waits until
// it is ready. The child exits when its standard input closes, so that it
// does not outlive leafbench even when leafbench is killed.
func startBaseline(ctx context.Context, kind serverKind, client *http.Client) (*process, error) {
	name := string(kind) + " baseline"
	switch kind {
	case bareServer:
		name = "baseline"
	case grpcServer:
		name, client = "gRPC baseline", nil // it listens before it says so: no readiness to wait for
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding leafbench's own binary to start the %s: %w", name, err)
	}
	return start(ctx, name, testenv.Config{
		Path: exe, Args: []string{baselineCommand, "-addr", "127.0.0.1:0", "-kind", string(kind)},
		// The write end stays open in leafbench until the baseline exits,
		// or until leafbench dies and the kernel closes it.
		HoldStdin: true,
		Serving: func(line string) (string, bool) {
			addr, ok := strings.CutPrefix(line, listeningPrefix)
			return strings.TrimSpace(addr), ok
		},
	}, client)
}

// findLeafd returns the leafd binary to benchmark: path when given; else,
// run inside the leafd repository, one built from it into dir, so that the
// numbers are those of the tree at hand and never of an older leafd that
// happens to be installed; else leafd from PATH. built says whether it was
// built.
func findLeafd(ctx context.Context, path, dir string, stderr io.Writer) (bin string, built bool, err error) {
	if path == "" {
		root, rootErr := repoRoot()
		if rootErr == nil {
			if _, err := exec.LookPath("go"); err != nil {
				return "", false, errors.New("no go to build leafd with: install Go, or pass -leafd PATH")
			}
			bin = filepath.Join(dir, "leafd")
			fmt.Fprintf(stderr, "leafbench: building %s/cmd/leafd into %s\n", root, dir)
			if err := testenv.Build(ctx, bin, testenv.BuildOptions{Dir: root, Output: stderr}); err != nil {
				return "", false, fmt.Errorf("go build ./cmd/leafd in %s: %w", root, err)
			}
			return bin, true, nil
		}
		if path, _ = exec.LookPath("leafd"); path == "" {
			return "", false, fmt.Errorf("no leafd in PATH and %w: pass -leafd PATH, or -target URL for a running leafd", rootErr)
		}
	}
	// Absolute: leafd runs in another directory, where a relative path
	// would name another file.
	abs, err := filepath.Abs(path)
	if err == nil {
		_, err = os.Stat(abs)
	}
	if err != nil {
		return "", false, fmt.Errorf("-leafd %s: %w", path, err)
	}
	return abs, false, nil
}

// modulePath is the module whose cmd/leafd findLeafd builds.
const modulePath = "github.com/leafd/leafd"

// repoRoot returns the directory of the leafd module around the working
// directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for range 64 { // bounded: a path has fewer levels than this
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			if first, _, _ := strings.Cut(string(data), "\n"); strings.TrimSpace(first) == "module "+modulePath {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", fmt.Errorf("the working directory is not inside the %s repository", modulePath)
}

// leafdVersion returns what `bin version` prints, or "" when that fails.
func leafdVersion(ctx context.Context, bin string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "version")
	cmd.Dir = os.TempDir() // no config.yaml
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// checkTarget parses a -target URL and refuses one that is not plain HTTP
// on a loopback address, unless allowRemote.
func checkTarget(raw string, allowRemote bool) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return "", fmt.Errorf("-target %q: use http://host:port, e.g. http://127.0.0.1:8080", raw)
	}
	if !allowRemote {
		if err := checkLoopbackHost(u.Hostname()); err != nil {
			return "", fmt.Errorf("-target %s: %w", raw, err)
		}
	}
	return "http://" + u.Host, nil
}

// errNotLoopback explains the rule that checkLoopbackHost and the dialer
// enforce.
var errNotLoopback = errors.New("not a loopback address: leafbench sends load only to 127.0.0.0/8 and ::1 unless -allow-remote is given (use it only for a machine you may load)")

// checkLoopbackHost accepts a loopback IP or "localhost".
func checkLoopbackHost(host string) error {
	if host == "localhost" {
		return nil // the dialer still checks the address it resolves to
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%s is %w", host, errNotLoopback)
}

// loopbackOnly is a net.Dialer Control function that refuses to connect to
// anything but a loopback address: the last line of defence of the rule.
func loopbackOnly(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("connecting to %s: %w", address, errNotLoopback)
	}
	return nil
}
