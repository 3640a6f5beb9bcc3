package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Bounds of the load loops. Every loop also ends at its deadline; these
// bound them in count as well, far above what a machine reaches.
const (
	// maxPerWorker bounds the requests one worker sends in one phase.
	maxPerWorker = 1 << 32
	// requestGrace is how long a request may outlive its phase before it
	// is cancelled and counted as a transport error.
	requestGrace = 10 * time.Second
	// maxBody is the largest response body read; leafd's largest answer to
	// the scenarios is 1000 IDs, under 20 KiB.
	maxBody = 1 << 20
)

// newClient returns the one HTTP client of a run: keep-alive connections,
// one idle connection kept per worker for each server, no compression, no
// proxy, HTTP/1.1 as most ID clients speak it, and a dialer that connects
// only to loopback addresses unless allowRemote.
func newClient(conns int, allowRemote bool) *http.Client {
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer(allowRemote).DialContext,
		MaxIdleConns:          0, // no limit across hosts
		MaxIdleConnsPerHost:   conns,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: requestGrace,
		DisableCompression:    true,
		ReadBufferSize:        32 << 10, // a 1000-ID answer in one or two reads
	}
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// dialer returns the dialer of every connection of a run, which connects
// only to loopback addresses unless allowRemote.
func dialer(allowRemote bool) *net.Dialer {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	if !allowRemote {
		d.Control = loopbackOnly
	}
	return d
}

// errKind classifies a failed request.
type errKind int

const (
	errTransport errKind = iota // no answer: connection refused, reset, timeout
	errStatus                   // an answer other than 200
	errBody                     // a 200 whose body is not what the route promises
	numErrKinds
)

// String returns the name used in reports.
func (k errKind) String() string {
	return [...]string{"transport", "status", "body"}[k]
}

// phase is the measurement of one scenario for one period: closed loop
// (as fast as the workers can) or open loop (a fixed rate).
type phase struct {
	Elapsed time.Duration
	// Requests counts the requests sent inside the period and answered,
	// good or not; InTime the good answers read before the period ended,
	// which is what throughput counts.
	Requests, InTime uint64
	Errors           [numErrKinds]uint64
	// FirstError describes the first failure of each kind, "" if none.
	FirstError [numErrKinds]string
	// Latency is the time from sending a request (open loop: from when it
	// was due, if its worker was still busy then) to reading its whole
	// answer, for good answers only.
	Latency Histogram
	// Service (open loop only) is the time from actually sending a request
	// to reading its answer.
	Service Histogram
	// Lag (open loop only) is how late the worker sent a request that was
	// due while it was idle: the delay the client itself added.
	Lag Histogram
	// ServerCPU and ClientCPU are the CPU time the server process and
	// leafbench used during the phase, 0 when not known (see cpuTime).
	ServerCPU, ClientCPU time.Duration
	// Leases (client_range only) counts the requests the client sent to
	// leafd during the phase: its range leases.
	Leases uint64
}

// merge adds o's counts to p.
func (p *phase) merge(o *phase) {
	p.Requests += o.Requests
	p.InTime += o.InTime
	for k := range p.Errors {
		p.Errors[k] += o.Errors[k]
		if p.FirstError[k] == "" {
			p.FirstError[k] = o.FirstError[k]
		}
	}
	p.Latency.Merge(&o.Latency)
	p.Service.Merge(&o.Service)
	p.Lag.Merge(&o.Lag)
}

// worker sends one scenario's requests (on its own connection, for HTTP)
// and counts them in its own phase, so that workers share nothing while
// they run.
type worker struct {
	do  call
	res phase
}

// httpCall returns a call that sends GETs of url and checks that each
// answer holds want IDs.
func httpCall(ctx context.Context, client *http.Client, url string, want int) (call, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil) // reused: safe once the previous body is closed
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 0, 32<<10)
	return func() (bool, errKind, string) {
		resp, err := client.Do(req)
		if err != nil {
			return false, errTransport, err.Error()
		}
		buf, err = readBody(resp.Body, buf[:0])
		resp.Body.Close()
		if err != nil {
			return false, errTransport, "reading the answer: " + err.Error()
		}
		if resp.StatusCode != http.StatusOK {
			return false, errStatus, fmt.Sprintf("%s: %.200s", resp.Status, strings.TrimSpace(string(buf)))
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
			return false, errBody, fmt.Sprintf("Content-Type %q, want text/plain", ct)
		}
		if err := checkIDs(buf, want); err != nil {
			return false, errBody, fmt.Sprintf("%v in %.100q", err, buf)
		}
		return true, 0, ""
	}, nil
}

// count records one answered request; inTime says whether it was answered
// before the period ended.
func (w *worker) count(ok bool, kind errKind, msg string, inTime bool) {
	w.res.Requests++
	if ok && inTime {
		w.res.InTime++
	}
	if !ok {
		w.res.Errors[kind]++
		if w.res.FirstError[kind] == "" {
			w.res.FirstError[kind] = msg
		}
	}
}

// readBody reads r into buf (reusing its memory), up to maxBody bytes.
func readBody(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			if len(buf) >= maxBody {
				return buf, fmt.Errorf("answer longer than %d bytes", maxBody)
			}
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// closedLoop runs conns workers, each sending its next request as soon as
// the previous answer is read, for d. Every request sent within d is
// checked and its latency recorded; throughput counts the answers read
// within d. For a target whose perSample is k, a worker reads the clock
// around one call of every k, and the k-1 calls after it count as answered
// when that one was.
func closedLoop(ctx context.Context, t target, conns int, d time.Duration) (*phase, error) {
	untimed := 0
	if s, ok := t.(interface{ perSample() int }); ok {
		untimed = s.perSample() - 1
	}
	return runWorkers(ctx, t, conns, d, func(ctx context.Context, w *worker, _ int, start, end time.Time) {
		for range maxPerWorker {
			t0 := time.Now()
			if !t0.Before(end) {
				return
			}
			ok, kind, msg := w.do()
			t1 := time.Now()
			if ctx.Err() != nil {
				return // interrupted: the failure is leafbench's
			}
			inTime := !t1.After(end)
			w.count(ok, kind, msg, inTime)
			if ok {
				w.res.Latency.Record(t1.Sub(t0))
			}
			for range untimed {
				ok, kind, msg := w.do()
				w.count(ok, kind, msg, inTime)
			}
		}
	})
}

// openLoop sends rate requests per second for d, whatever the answers
// take: request k of the run is due at start + k/rate, and worker i of
// conns sends requests i, i+conns, i+2·conns…, sleeping until each is due.
//
// Latency is measured so that neither the server's stalls nor the client's
// timers distort it. A request due while its worker was still waiting for
// an earlier answer is late because of the server: its latency counts from
// when it was due (no coordinated omission). A request due while its worker
// was idle counts from when it was actually sent: a late timer wake-up is
// the client's delay, recorded apart as Lag.
func openLoop(ctx context.Context, t target, conns int, d time.Duration, rate float64) (*phase, error) {
	if rate <= 0 {
		return nil, fmt.Errorf("open loop at %.0f requests/s: the rate must be positive", rate)
	}
	interval := time.Duration(float64(time.Second) * float64(conns) / rate) // per worker
	return runWorkers(ctx, t, conns, d, func(ctx context.Context, w *worker, i int, start, end time.Time) {
		timer := time.NewTimer(time.Hour)
		defer timer.Stop()
		due := start.Add(time.Duration(float64(time.Second) * float64(i) / rate))
		busyUntil := start
		for range maxPerWorker {
			if !due.Before(end) {
				return
			}
			if wait := time.Until(due); wait > 0 {
				timer.Reset(wait)
				select {
				case <-timer.C:
				case <-ctx.Done():
					return
				}
			}
			sent := time.Now()
			ok, kind, msg := w.do()
			done := time.Now()
			if ctx.Err() != nil {
				return
			}
			w.count(ok, kind, msg, !done.After(end))
			if ok {
				from := sent
				if busyUntil.After(due) {
					from = due // the server kept this worker busy past the due time
				} else {
					w.res.Lag.Record(sent.Sub(due))
				}
				w.res.Latency.Record(done.Sub(from))
				w.res.Service.Record(done.Sub(sent))
			}
			busyUntil = done
			due = due.Add(interval)
		}
	})
}

// runWorkers runs loop on conns workers for d and merges what they counted.
// Workers and their histograms are made before the clock starts. loop is
// given ctx, which ends only when the run is interrupted; the requests carry
// a context that also ends requestGrace after the period, so that a request
// the server never answers fails as a transport error.
func runWorkers(ctx context.Context, t target, conns int, d time.Duration,
	loop func(ctx context.Context, w *worker, i int, start, end time.Time)) (*phase, error) {
	reqCtx, cancel := context.WithTimeout(ctx, d+requestGrace)
	defer cancel()
	workers := make([]*worker, conns)
	for i := range workers {
		do, err := t.newCall(reqCtx, i)
		if err != nil {
			return nil, err
		}
		workers[i] = &worker{do: do}
	}
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Go(func() { loop(ctx, w, i, start, end) })
	}
	wg.Wait()
	res := &phase{Elapsed: d}
	for _, w := range workers {
		res.merge(&w.res)
	}
	return res, ctx.Err() // interrupted, or nil
}

// userHZ is the unit of the CPU times in /proc/PID/stat: 100 per second on
// every mainstream Linux (USER_HZ).
const userHZ = 100

// cpuTime returns the CPU time (user and system, all threads) that process
// pid has used so far, read from /proc. ok is false where there is no /proc
// or the process is gone. Its resolution is 10 ms: over a phase of seconds
// at thousands of requests per second that is well under 1%.
//
// CPU per request is a figure a busy machine disturbs far less than
// throughput: other processes take CPU away, but do not make a request cost
// more of it (caches aside).
func cpuTime(pid int) (d time.Duration, ok bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// fields are counted after its closing one: state is field 3, utime 14,
	// stime 15.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * time.Second / userHZ, true
}

// cpuMeter measures the CPU that the server process and leafbench itself
// use during a phase.
type cpuMeter struct {
	pids  [2]int // the server's (0 when leafbench did not start it), leafbench's
	start [2]time.Duration
	ok    [2]bool
}

// startCPU takes the first reading; server is the server's pid or 0.
func startCPU(server int) *cpuMeter {
	m := &cpuMeter{pids: [2]int{server, os.Getpid()}}
	for i, pid := range m.pids {
		if pid != 0 {
			m.start[i], m.ok[i] = cpuTime(pid)
		}
	}
	return m
}

// stop takes the second reading and stores the CPU used in between in p.
func (m *cpuMeter) stop(p *phase) {
	for i, used := range []*time.Duration{&p.ServerCPU, &p.ClientCPU} {
		if d, ok := cpuTime(m.pids[i]); ok && m.ok[i] {
			*used = d - m.start[i]
		}
	}
}
