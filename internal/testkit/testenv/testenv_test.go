package testenv_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/testenv"
)

// fakeEnv names the variable that makes the test binary a fake server; its
// value is the behaviour.
const fakeEnv = "TESTENV_FAKE_SERVER"

// TestMain lets the test binary stand in for a server: with fakeEnv set it
// runs fake instead of the tests.
func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeEnv); mode != "" {
		os.Exit(fake(mode))
	}
	os.Exit(m.Run())
}

// fake is a server as leafd looks from outside: it writes lines of log,
// reports its address in a JSON record, answers /readyz 503 and then 200,
// and exits 0 on SIGTERM. Its mode changes one of these.
func fake(mode string) int {
	switch mode {
	case "exit":
		fmt.Fprintln(os.Stderr, "cannot start: bad configuration")
		return 3
	case "stdin":
		fmt.Fprintln(os.Stdout, `{"msg":"leafd serving","addr":"127.0.0.1:1"}`)
		_, _ = io.Copy(io.Discard, os.Stdin)
		return 4
	}
	term := make(chan os.Signal, 1)
	if mode == "ignore-term" {
		// Before the address is written: a SIGTERM sent as soon as it is
		// read must find the signal ignored already.
		signal.Ignore(syscall.SIGTERM)
	} else {
		signal.Notify(term, syscall.SIGTERM)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for i := range 500 {
		fmt.Fprintf(os.Stderr, "line %d\n", i)
	}
	fmt.Fprintln(os.Stdout, strings.Repeat("x", 3<<20-10)) // longer than a line is kept whole
	readyAt := time.Now().Add(300 * time.Millisecond)
	go func() {
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if time.Now().Before(readyAt) {
				http.Error(w, "not yet", http.StatusServiceUnavailable)
			}
		}))
	}()
	fmt.Fprintf(os.Stderr, `{"msg":"leafd serving","addr":%q}`+"\n", ln.Addr())
	switch mode {
	case "serve-then-exit":
		return 5
	case "ignore-term":
		select {}
	}
	<-term
	fmt.Fprintln(os.Stderr, "stopped")
	return 0
}

func fakeConfig(t *testing.T, mode string) testenv.Config {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return testenv.Config{Path: exe, Name: "fake", Dir: t.TempDir(), Env: []string{fakeEnv + "=" + mode}}
}

func TestServeReadyStop(t *testing.T) {
	c := fakeConfig(t, "serve")
	c.Head, c.Tail = 3, 2
	var lines int
	c.Line = func(string) { lines++ }
	var log strings.Builder
	c.Log = &log
	p := testenv.MustStart(t, c, 30*time.Second)
	if !strings.HasPrefix(p.URL(), "http://127.0.0.1:") {
		t.Fatalf("URL %q", p.URL())
	}
	if err := p.WaitReady(t.Context(), nil, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	code, err := p.Stop(30 * time.Second)
	if code != 0 || err != nil {
		t.Fatalf("Stop = %d, %v; want 0", code, err)
	}
	// 500 lines, 3 MiB cut into 3 lines, "leafd serving", "stopped".
	const want = 500 + 3 + 2
	if lines != want {
		t.Errorf("Line saw %d lines, want %d", lines, want)
	}
	if !strings.HasPrefix(log.String(), "line 0\n") || !strings.HasSuffix(log.String(), "stopped\n") {
		t.Errorf("Log does not hold the whole output")
	}
	out := p.Output()
	wantOut := fmt.Sprintf("line 0\nline 1\nline 2\n… (%d lines left out)\n", want-5)
	if !strings.HasPrefix(out, wantOut) || !strings.HasSuffix(out, "\nstopped") || strings.Count(out, "\n") != 5 {
		t.Errorf("Output:\n%.300s\nwant the first 3 lines, a count of the others, and the last 2", out)
	}
	if p.Ended().Before(p.Started()) || p.State() == nil {
		t.Errorf("started %v, ended %v, state %v", p.Started(), p.Ended(), p.State())
	}
	if code, err := p.Stop(time.Second); code != 0 || err != nil {
		t.Errorf("a second Stop = %d, %v", code, err)
	}
}

func TestExitAtStart(t *testing.T) {
	p, err := testenv.Start(fakeConfig(t, "exit"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.WaitServing(t.Context(), 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "fake exited at start (exit status 3)") {
		t.Fatalf("WaitServing = %v, want the exit named", err)
	}
	if p.Wait() != 3 || p.Output() != "cannot start: bad configuration" {
		t.Fatalf("exit %d, output %q", p.Wait(), p.Output())
	}
}

func TestExitBeforeReady(t *testing.T) {
	p := testenv.MustStart(t, fakeConfig(t, "serve-then-exit"), 30*time.Second)
	err := p.WaitReady(t.Context(), nil, 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready (exit status 5)") {
		t.Fatalf("WaitReady = %v, want the exit named", err)
	}
}

func TestStopKillsAfterGrace(t *testing.T) {
	p := testenv.MustStart(t, fakeConfig(t, "ignore-term"), 30*time.Second)
	code, err := p.Stop(300 * time.Millisecond)
	if code != -1 || err == nil || !strings.Contains(err.Error(), "did not exit within 300ms of SIGTERM") {
		t.Fatalf("Stop = %d, %v; want -1 and an error", code, err)
	}
	if !p.Exited() {
		t.Fatal("still running after Stop")
	}
}

func TestHoldStdin(t *testing.T) {
	held := fakeConfig(t, "stdin")
	held.HoldStdin = true
	p := testenv.MustStart(t, held, 30*time.Second)
	time.Sleep(200 * time.Millisecond) // it would have exited by now without the held input
	if p.Exited() {
		t.Fatalf("exited with its input held: %v", p.State())
	}
	p.Kill()

	free := testenv.MustStart(t, fakeConfig(t, "stdin"), 30*time.Second)
	if code := free.Wait(); code != 4 {
		t.Fatalf("without a held input: exit %d, want 4 (its input ended)", code)
	}
}

func TestEventually(t *testing.T) {
	calls := 0
	err := testenv.Eventually(t.Context(), 10*time.Second, time.Millisecond, func() error {
		if calls++; calls < 5 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 5 {
		t.Fatalf("Eventually = %v after %d calls", err, calls)
	}

	errLast := errors.New("still not")
	err = testenv.Eventually(t.Context(), 50*time.Millisecond, 10*time.Millisecond, func() error { return errLast })
	if !errors.Is(err, errLast) || !strings.Contains(err.Error(), "not within 50ms") {
		t.Fatalf("Eventually past its deadline = %v", err)
	}

	errGone := errors.New("gone")
	calls = 0
	err = testenv.Eventually(t.Context(), 10*time.Second, time.Millisecond, func() error {
		calls++
		return testenv.Final(errGone)
	})
	if err != errGone || calls != 1 {
		t.Fatalf("Eventually with a final error = %v after %d calls", err, calls)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err = testenv.Eventually(ctx, 10*time.Second, time.Millisecond, func() error { return errLast })
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errLast) {
		t.Fatalf("Eventually with its context ended = %v", err)
	}
}

func TestEnv(t *testing.T) {
	t.Setenv("LEAFD_STORE_DSN", "file:/nowhere")
	env := testenv.Env("/home/x", "LEAFD_SEGMENT_ENABLED=false")
	got := strings.Join(env, " ")
	if strings.Contains(got, "/nowhere") || !strings.Contains(got, "HOME=/home/x") ||
		!strings.HasSuffix(got, "LEAFD_HTTP_ADDR=127.0.0.1:0 LEAFD_LOG_FORMAT=json LEAFD_SEGMENT_ENABLED=false") {
		t.Fatalf("Env = %v", env)
	}
}

func TestServingAddr(t *testing.T) {
	for line, want := range map[string]string{
		`{"time":"x","level":"INFO","msg":"leafd serving","addr":"127.0.0.1:4"}`: "127.0.0.1:4",
		`{"msg":"leafd serving"}`:                       "",
		`{"msg":"leafd stopping","addr":"127.0.0.1:4"}`: "",
		`leafd serving 127.0.0.1:4`:                     "",
	} {
		if got, ok := testenv.ServingAddr(line); got != want || ok != (want != "") {
			t.Errorf("ServingAddr(%s) = %q, %v; want %q", line, got, ok, want)
		}
	}
}

func TestRemovedBinary(t *testing.T) {
	var b testenv.Binary
	b.Remove()
	if path, err := b.Path(); err == nil {
		t.Fatalf("Path after Remove = %q, nil; want an error", path)
	}
}

// Run returns a program's output, and an error naming its exit otherwise;
// a LogFile keeps the output of every run.
func TestRunLogFile(t *testing.T) {
	c := fakeConfig(t, "exit")
	c.LogFile = filepath.Join(t.TempDir(), "fake.log")
	for range 2 {
		out, err := testenv.Run(t.Context(), c)
		if err == nil || !strings.Contains(err.Error(), "fake: exit status 3") || out != "cannot start: bad configuration" {
			t.Fatalf("Run = %q, %v; want the output and exit status 3", out, err)
		}
	}
	if got := testenv.LogTail(c.LogFile, 5); got != "cannot start: bad configuration\ncannot start: bad configuration" {
		t.Fatalf("LogTail = %q, want the output of both runs", got)
	}
}

// A process in a group of its own is stopped with its StopSignal.
func TestGroupStopSignal(t *testing.T) {
	c := fakeConfig(t, "ignore-term")
	c.Group, c.StopSignal = true, syscall.SIGINT
	p := testenv.MustStart(t, c, 30*time.Second)
	code, err := p.Stop(5 * time.Second)
	if code != -1 || err != nil || p.State().String() != "signal: interrupt" {
		t.Fatalf("Stop = %d, %v, %v; want the process ended by SIGINT", code, err, p.State())
	}
}

func TestFreePorts(t *testing.T) {
	ports, err := testenv.FreePorts(8)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] || p < 1024 {
			t.Fatalf("FreePorts = %v: a port twice, or a privileged one", ports)
		}
		seen[p] = true
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d of FreePorts: %v", p, err)
		}
		ln.Close()
	}
}
