package testenv

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Config describes a server process for Start.
type Config struct {
	// Path is the program (a leafd binary, say); Args its arguments.
	Path string
	Args []string
	// Name names the process in errors; empty means Path's base name.
	Name string
	// Dir is its working directory, where leafd looks for config.yaml.
	// Empty means the caller's.
	Dir string
	// Env is its whole environment (see Env). Nil means the caller's.
	Env []string

	// Serving recognises the line in which the process reports the
	// address it listens on, host:port. Nil means ServingAddr, leafd's.
	Serving func(line string) (addr string, ok bool)
	// Line, when set, is called with every line of output, in order, from
	// one goroutine.
	Line func(line string)
	// Log, when set, receives the output as it comes (a file that keeps
	// the whole log, say). Its errors are ignored.
	Log io.Writer
	// Head and Tail bound the lines that Output returns: the first Head
	// and the last Tail. Both zero keeps every line.
	Head, Tail int

	// LogFile, when set, is a file the output is appended to, created if
	// need be, and closed when the process ends: a log that outlives
	// restarts (see LogTail). It is written after Log.
	LogFile string

	// HoldStdin gives the process a standard input that stays open until
	// it exits, or until this process dies: a server that exits when its
	// input closes (leafbench's baseline) then never outlives its parent.
	HoldStdin bool
	// DeathSignal, when not zero, is what the kernel (Linux only) sends
	// the process if this process dies without stopping it (kill -9), so
	// that no server is left running.
	DeathSignal syscall.Signal
	// Group starts the process in a process group of its own, and Signal,
	// Stop and Kill then reach the whole group (Unix only): a server's
	// children, such as the rsync of a Galera state transfer, go with it.
	Group bool
	// StopSignal is what Stop sends first; zero means SIGTERM.
	StopSignal syscall.Signal
	// User, when this process runs as root, is the user the process runs
	// as (Linux only; see UserIDs): servers such as PostgreSQL refuse to
	// run as root. Empty, or not root, runs it as this process's user.
	User string
}

// maxLine is the longest line of output kept whole; longer ones are cut
// into lines of this length.
const maxLine = 1 << 20

// Process is a running server started by Start. Its methods are safe for
// concurrent use.
type Process struct {
	name      string
	cmd       *exec.Cmd
	cfg       Config
	started   time.Time
	done      chan struct{} // closed once it has exited and its output is read
	listening chan struct{} // closed once it has reported its address

	mu      sync.Mutex
	addr    string
	ended   time.Time
	head    []string
	tail    []string // a ring once full, oldest at tailAt
	tailAt  int
	dropped int // lines neither in head nor in tail
}

// ServingAddr recognises leafd's JSON log record "leafd serving" and
// returns the address in it. It needs log.format json (see Env).
func ServingAddr(line string) (string, bool) {
	var rec struct{ Msg, Addr string }
	if json.Unmarshal([]byte(line), &rec) != nil || rec.Msg != "leafd serving" || rec.Addr == "" {
		return "", false
	}
	return rec.Addr, true
}

// Start starts the process that c describes and returns at once; use
// WaitServing to wait until it listens. Its standard output and standard
// error are read together, line by line.
//
// Errors: the program cannot be started, or no pipe for its output.
func Start(c Config) (*Process, error) {
	p := &Process{name: c.Name, cmd: exec.Command(c.Path, c.Args...), cfg: c,
		done: make(chan struct{}), listening: make(chan struct{})}
	if p.name == "" {
		p.name = filepath.Base(c.Path)
	}
	if p.cfg.Serving == nil {
		p.cfg.Serving = ServingAddr
	}
	p.cmd.Dir, p.cmd.Env = c.Dir, c.Env
	if err := setProcAttr(p.cmd, c); err != nil {
		return nil, fmt.Errorf("starting %s: %w", p.name, err)
	}
	var logFile *os.File
	if c.LogFile != "" {
		f, err := os.OpenFile(c.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("starting %s: %w", p.name, err)
		}
		logFile = f
		p.cfg.Log = f
		if c.Log != nil {
			p.cfg.Log = io.MultiWriter(c.Log, f)
		}
	}
	// A pipe of our own rather than StderrPipe, whose read end Wait closes
	// before every line has been read.
	pr, pw, err := os.Pipe()
	if err != nil {
		closeFile(logFile)
		return nil, err
	}
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	var stdin *os.File // the write end of the held input
	if c.HoldStdin {
		var r *os.File
		if r, stdin, err = os.Pipe(); err != nil {
			pr.Close()
			pw.Close()
			closeFile(logFile)
			return nil, err
		}
		p.cmd.Stdin = r
		defer r.Close()
	}
	p.started = time.Now()
	err = p.cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		closeFile(stdin)
		closeFile(logFile)
		return nil, fmt.Errorf("starting %s: %w", p.name, err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer closeFile(logFile)
		defer pr.Close()
		p.read(pr)
	}()
	go func() {
		_ = p.cmd.Wait()
		p.mu.Lock()
		p.ended = time.Now()
		p.mu.Unlock()
		closeFile(stdin)
		<-read
		close(p.done)
	}()
	return p, nil
}

// Run runs the program that c describes to its end and returns its output
// (as Output keeps it): a server's set-up command, such as initdb. When ctx
// ends first, the program is killed.
//
// Errors: the program could not start, did not exit with 0, or ctx ended;
// the error holds its output.
func Run(ctx context.Context, c Config) (string, error) {
	p, err := Start(c)
	if err != nil {
		return "", err
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		p.Kill()
		return p.Output(), fmt.Errorf("%s: %w\n%s", p.name, ctx.Err(), p.Output())
	}
	if p.cmd.ProcessState.ExitCode() != 0 {
		return p.Output(), fmt.Errorf("%s: %v\n%s", p.name, p.cmd.ProcessState, p.Output())
	}
	return p.Output(), nil
}

// closeFile closes f unless it is nil.
func closeFile(f *os.File) {
	if f != nil {
		f.Close()
	}
}

// read splits the output into lines until it ends.
func (p *Process) read(r io.Reader) {
	if p.cfg.Log != nil {
		r = io.TeeReader(r, ignoreErrors{p.cfg.Log})
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(line) >= maxLine {
				p.line(string(line))
				line = line[:0]
			}
			continue
		}
		if len(line) > 0 {
			p.line(strings.TrimSuffix(string(line), "\n"))
			line = line[:0]
		}
		if err != nil {
			_, _ = io.Copy(io.Discard, br) // a broken pipe: let the writer finish
			return
		}
	}
}

// line keeps one line of output, passes it on and looks in it for the
// address.
func (p *Process) line(l string) {
	p.mu.Lock()
	switch all := p.cfg.Head == 0 && p.cfg.Tail == 0; {
	case all || len(p.head) < p.cfg.Head:
		p.head = append(p.head, l)
	case p.cfg.Tail == 0:
		p.dropped++
	case len(p.tail) < p.cfg.Tail:
		p.tail = append(p.tail, l)
	default:
		p.tail[p.tailAt] = l
		p.tailAt = (p.tailAt + 1) % len(p.tail)
		p.dropped++
	}
	p.mu.Unlock()
	if p.cfg.Line != nil {
		p.cfg.Line(l)
	}
	if addr, ok := p.cfg.Serving(l); ok {
		p.mu.Lock()
		if p.addr == "" {
			p.addr = addr
			close(p.listening)
		}
		p.mu.Unlock()
	}
}

// ignoreErrors is a writer that never fails, so that a full disk does not
// stop the reading of a process's output.
type ignoreErrors struct{ w io.Writer }

func (w ignoreErrors) Write(b []byte) (int, error) {
	_, _ = w.w.Write(b)
	return len(b), nil
}

// WaitServing waits until the process reports its address, for at most
// within, and returns its URL, http://host:port.
//
// Errors: the process exited first, within passed, or ctx ended.
func (p *Process) WaitServing(ctx context.Context, within time.Duration) (string, error) {
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case <-p.listening:
		return p.URL(), nil
	case <-p.done:
		select {
		case <-p.listening: // it said where, and then exited
			return p.URL(), nil
		default:
		}
		return "", fmt.Errorf("%s exited at start (%v)", p.name, p.cmd.ProcessState)
	case <-timer.C:
		return "", fmt.Errorf("%s did not report a listening address within %v", p.name, within)
	case <-ctx.Done():
		return "", fmt.Errorf("waiting for %s to listen: %w", p.name, ctx.Err())
	}
}

// WaitReady waits until the process's /readyz answers 200, for at most
// within, polling with client (see the function WaitReady).
//
// Errors: the process has not reported its address, it exited first,
// within passed, or ctx ended.
func (p *Process) WaitReady(ctx context.Context, client *http.Client, within time.Duration) error {
	url := p.URL()
	if url == "" {
		return fmt.Errorf("%s has not reported its address", p.name)
	}
	err := WaitReady(ctx, client, url, within, p.done)
	if err != nil && p.Exited() {
		return fmt.Errorf("%w (%v)", err, p.cmd.ProcessState)
	}
	return err
}

// URL returns http:// and the address the process reported, or "" before
// it has.
func (p *Process) URL() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.addr == "" {
		return ""
	}
	return "http://" + p.addr
}

// Name returns the name the process has in errors.
func (p *Process) Name() string { return p.name }

// Pid returns the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Started returns when it was started.
func (p *Process) Started() time.Time { return p.started }

// Ended returns when it exited; zero while it runs.
func (p *Process) Ended() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ended
}

// Done returns a channel closed once the process has exited and all its
// output has been read.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether Done is closed.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits until the process has exited and returns its exit code: -1
// when a signal ended it.
func (p *Process) Wait() int {
	<-p.done
	return p.cmd.ProcessState.ExitCode()
}

// State returns how the process ended; nil while it runs.
func (p *Process) State() *os.ProcessState {
	if !p.Exited() {
		return nil
	}
	return p.cmd.ProcessState
}

// Signal sends sig to the process, or to its process group (see
// Config.Group). It is not an error to signal a process that has exited:
// nothing is sent.
func (p *Process) Signal(sig os.Signal) error {
	if err := signal(p.cmd, p.cfg.Group, sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

// Kill sends SIGKILL, unless the process has exited, and waits for it to
// end, as kill -9 would.
func (p *Process) Kill() {
	_ = p.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM (or Config.StopSignal) and waits for the process to
// exit, for at most grace; then it kills it with SIGKILL and waits for
// that. It returns the exit code (-1 when a signal ended the process). Stop
// on a process that has exited returns its exit code.
//
// Errors: the process did not exit within grace of the signal, and was
// killed.
func (p *Process) Stop(grace time.Duration) (int, error) {
	sig := p.cfg.StopSignal
	if sig == 0 {
		sig = syscall.SIGTERM
	}
	_ = p.Signal(sig)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode(), nil
	case <-timer.C:
	}
	p.Kill()
	return p.cmd.ProcessState.ExitCode(), fmt.Errorf("%s did not exit within %v of %s; killed", p.name, grace, signalName(sig))
}

// signalName names the signals Stop sends as kill(1) does.
func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	case syscall.SIGINT:
		return "SIGINT"
	}
	return sig.String()
}

// Output returns the lines of output kept (see Config.Head and Tail), one
// per line; a line saying how many were left out separates the head from
// the tail. Once Done is closed it is the output in full.
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	lines := append([]string(nil), p.head...)
	if p.dropped > 0 {
		lines = append(lines, fmt.Sprintf("… (%d lines left out)", p.dropped))
	}
	lines = append(lines, p.tail[p.tailAt:]...)
	lines = append(lines, p.tail[:p.tailAt]...)
	return strings.Join(lines, "\n")
}
