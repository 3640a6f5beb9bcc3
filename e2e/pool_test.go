package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/testenv"
)

// poolWorkers is snowflake.workers in scenario 5c.
const poolWorkers = 3

// Scenario 5c: three servers with snowflake.workers 3 and max_borrow 5ms,
// under snowflake load alone: single IDs and batches of 1,000 and 10,000
// from several clients per server. Each server in turn is killed with
// SIGKILL right after a burst of concurrent batches of 10,000 that made it
// borrow milliseconds, and restarted at once. No ID twice; every batch
// ascending; every ID's time between the request's sending and its answer
// plus max_borrow (and within its process's life plus max_borrow); each
// server holds 3 worker ids, the 9 distinct, and issued under all 3.
func TestSnowflakePool(t *testing.T) {
	enabled(t)
	const maxBorrow = 5 * time.Millisecond
	c := newCluster(t, "5c snowflake 3 worker ids per server, borrowing, kill -9 after bursts", clusterOptions{servers: 3, env: []string{
		"LEAFD_SEGMENT_ENABLED=false", "LEAFD_SNOWFLAKE_LEASE_TTL=5s", "LEAFD_SNOWFLAKE_WORKERS=" + strconv.Itoa(poolWorkers)},
		maxBorrow: maxBorrow})
	c.startAll()
	held := []string{c.checkPoolWorkers()}
	pl := c.startPoolLoad()
	// Each server in turn, as many rounds as cover the profile's kills.
	kills := (max(prof.kills, len(c.servers)) + len(c.servers) - 1) / len(c.servers) * len(c.servers)
	var burstNotes []string
	for i := range kills {
		pl.phase(prof.phase, prof.poolRequests*int64(i+1)/int64(kills+1))
		s := c.servers[i%len(c.servers)]
		burstNotes = append(burstNotes, pl.burstThenKill(s))
		if err := s.start(); err != nil {
			t.Fatal(err)
		}
		held = append(held, c.checkPoolWorkers())
	}
	pl.phase(prof.phase, prof.poolRequests)
	pl.Stop()
	for _, s := range c.servers {
		pl.sample(s.current())
	}

	// Every process issued under all its worker ids, and no worker id was
	// used by two processes at overlapping times.
	ws := c.workers()
	var by []string
	for _, proc := range sortedProcs(ws) {
		by = append(by, fmt.Sprintf("%d:%v", proc, ws[proc]))
	}
	c.mu.Lock()
	procs := len(c.procs)
	c.mu.Unlock()
	for proc := range procs {
		if len(ws[proc]) < poolWorkers {
			c.violate("process %d issued under worker ids %v, fewer than the %d it holds", proc, ws[proc], poolWorkers)
		}
	}
	c.checkDistinctWorkers()

	pl.mu.Lock()
	var maxLead, borrowed int64
	for _, v := range pl.maxLead {
		maxLead = max(maxLead, v)
	}
	for _, v := range pl.borrowed {
		borrowed += v
	}
	seen, batches := pl.seenLead, pl.batches
	pl.mu.Unlock()
	if maxLead > maxBorrow.Milliseconds() {
		c.violate("a server reported max_lead_ms %d, more than max_borrow %v", maxLead, maxBorrow)
	}
	if borrowed == 0 && !raceBinary() {
		c.violate("premise: no server borrowed a millisecond: max_borrow is not in effect")
	}
	c.note("%d snowflake requests (%d batches of 1000, %d of 10000), %d kill -9 each right after a burst, restarted at once: %s",
		pl.requests.Load(), batches[1000], batches[10000], kills, strings.Join(burstNotes, ", "))
	c.note("worker ids held, at start and after each restart: %s; by process: %s", strings.Join(held, " "), strings.Join(by, " "))
	c.note("borrowed %d ms in all; largest lead reported (max_lead_ms) %d ms; largest ID time past its answer %d ms (max_borrow %v)",
		borrowed, maxLead, seen, maxBorrow)
	c.finish()
	// finish checked every ID (sorted in the ledger): say so in figures.
	c.ledger.mu.Lock()
	ids, dups := c.ledger.sf.byID(), 0
	for i := 1; i < len(ids); i++ {
		if ids[i].id == ids[i-1].id {
			dups++
		}
	}
	c.ledger.mu.Unlock()
	c.note("%d snowflake IDs checked, %d duplicates", len(ids), dups)
}

// poolStateJSON is the part of /api/state scenario 5c reads.
type poolStateJSON struct {
	Snowflake *struct {
		WorkerIDs  []int64 `json:"worker_ids"`
		MaxLeadMs  int64   `json:"max_lead_ms"`
		BorrowedMs int64   `json:"borrowed_ms"`
	}
}

func (p *process) poolState() (poolStateJSON, error) {
	var st poolStateJSON
	if err := p.getJSON("/api/state", &st); err != nil {
		return st, err
	}
	if st.Snowflake == nil {
		return st, errors.New("/api/state: snowflake is null")
	}
	return st, nil
}

// checkPoolWorkers checks that every serving process holds poolWorkers
// worker ids (/api/state and leafd_snowflake_workers; a process may still
// be claiming some just after it turned ready), and that, read one server
// after the other once all do, no worker id is held twice. It returns the
// worker ids by server.
func (c *cluster) checkPoolWorkers() string {
	c.t.Helper()
	for _, s := range c.servers {
		p := s.current()
		if err := testenv.Eventually(c.t.Context(), 10*time.Second, 20*time.Millisecond, func() error {
			st, err := p.poolState()
			if err != nil {
				return err
			}
			if n := len(st.Snowflake.WorkerIDs); n != poolWorkers {
				return fmt.Errorf("worker_ids %v, want %d", st.Snowflake.WorkerIDs, poolWorkers)
			}
			m, err := p.metrics()
			if err != nil {
				return err
			}
			if n := sum(m, "leafd_snowflake_workers"); n != poolWorkers {
				return fmt.Errorf("leafd_snowflake_workers %v, want %d", n, poolWorkers)
			}
			return nil
		}); err != nil {
			c.violate("server %d (process %d) once ready: %v", s.idx, p.seq, err)
		}
	}
	holder := map[int64]int{}
	var out []string
	for _, s := range c.servers {
		p := s.current()
		st, err := p.poolState()
		if err != nil {
			c.violate("server %d: %v", s.idx, err)
			continue
		}
		for _, w := range st.Snowflake.WorkerIDs {
			if other, ok := holder[w]; ok {
				c.violate("worker id %d held by server %d and server %d at once", w, other, s.idx)
			}
			holder[w] = s.idx
		}
		out = append(out, fmt.Sprintf("%d:%v", p.seq, st.Snowflake.WorkerIDs))
	}
	if want := poolWorkers * len(c.servers); len(holder) != want {
		c.violate("the %d servers hold %d distinct worker ids, want %d", len(c.servers), len(holder), want)
	}
	return strings.Join(out, ",")
}

// poolLoad is scenario 5c's clients: snowflake requests only, judged one
// by one as they come.
type poolLoad struct {
	c        *cluster
	stop     chan struct{}
	wg       sync.WaitGroup
	requests atomic.Int64

	mu       sync.Mutex
	batches  map[int]int64
	seenLead int64         // the most an ID's time was past its answer's, ms
	maxLead  map[int]int64 // max_lead_ms last read from each process
	borrowed map[int]int64 // leafd_snowflake_borrowed_seconds_total in ms, last read from each process
}

// startPoolLoad starts the profile's clients on every server: single
// IDs, and one request in a hundred a batch of 1,000, one in a thousand
// of 10,000.
func (c *cluster) startPoolLoad() *poolLoad {
	pl := &poolLoad{c: c, stop: make(chan struct{}), batches: map[int]int64{},
		maxLead: map[int]int64{}, borrowed: map[int]int64{}}
	for _, s := range c.servers {
		for i := range prof.clients {
			pl.wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(s.idx<<16|i)))
				hc := pl.client(1)
				defer hc.CloseIdleConnections()
				for {
					select {
					case <-pl.stop:
						return
					default:
					}
					p := s.current()
					if p == nil {
						time.Sleep(5 * time.Millisecond)
						continue
					}
					n := 1
					switch r := rng.IntN(1000); {
					case r == 0:
						n = 10000
					case r <= 10:
						n = 1000
					}
					pl.get(hc, p, n)
				}
			})
		}
	}
	return pl
}

// client keeps up to conns keep-alive connections to a server.
func (pl *poolLoad) client(conns int) *http.Client {
	return &http.Client{
		Timeout:   pl.c.sfWithin + 5*time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: conns, DisableCompression: true},
	}
}

// Stop stops the clients and waits for their last requests.
func (pl *poolLoad) Stop() {
	close(pl.stop)
	pl.wg.Wait()
}

// phase lets the load run for d, and on until it has sent requests in all.
func (pl *poolLoad) phase(d time.Duration, requests int64) {
	c := pl.c
	c.t.Helper()
	time.Sleep(d)
	const within = 15 * time.Minute
	deadline := time.Now().Add(within)
	for pl.requests.Load() < requests {
		if time.Now().After(deadline) {
			c.t.Fatalf("setup: %d requests sent, %d wanted: the load is too slow (waited %v)", pl.requests.Load(), requests, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// get asks p for n snowflake IDs and judges the answer: n positive IDs,
// ascending, each timed between the request's sending and its answer plus
// max_borrow (the clock that issued it read in between, same host). Its
// IDs go into the ledger and its outcome to the cluster's.
func (pl *poolLoad) get(hc *http.Client, p *process, n int) []int64 {
	c := pl.c
	o := outcome{proc: p.seq, mode: modeSnowflake, path: "/snowflake"}
	if n > 1 {
		o.path += "?count=" + strconv.Itoa(n)
	}
	pl.requests.Add(1)
	body, err := o.send(hc, p)
	answered := o.sent.Add(o.took)
	var ids []int64
	switch {
	case err != nil:
	case o.status == 200:
		ids, err = parseIDs(body, false, false)
		if err == nil && len(ids) != n {
			err = fmt.Errorf("%d IDs for count=%d", len(ids), n)
		}
		if err != nil {
			c.violate("server %d (process %d): GET %s: 200 with a bad body: %v: %.200q", p.srv.idx, p.seq, o.path, err, body)
			ids = nil
			break
		}
		from, to := o.sent.UnixMilli(), answered.UnixMilli()
		first, last := sfUnixMs(ids[0]), sfUnixMs(ids[len(ids)-1])
		if first < from || last > to+c.maxBorrow.Milliseconds() {
			c.violate("server %d (process %d): GET %s sent at %s, answered at %s: IDs timed %s..%s, outside that plus max_borrow %v",
				p.srv.idx, p.seq, o.path, msTime(from), msTime(to), msTime(first), msTime(last), c.maxBorrow)
		}
		pl.mu.Lock()
		pl.seenLead = max(pl.seenLead, last-to)
		pl.batches[n]++
		pl.mu.Unlock()
		c.ledger.add(modeSnowflake, "", p.seq, ids)
	default:
		var e struct{ Error struct{ Code string } }
		if json.Unmarshal(body, &e) != nil || e.Error.Code == "" {
			c.violate("server %d: GET %s: %d with a body that is not a JSON error: %.200q", p.srv.idx, o.path, o.status, body)
		}
		o.code = e.Error.Code
	}
	o.ids = len(ids)
	c.mu.Lock()
	c.outcomes = append(c.outcomes, o)
	c.mu.Unlock()
	return ids
}

// sample reads p's borrowing figures and returns its
// leafd_snowflake_borrowed_seconds_total.
func (pl *poolLoad) sample(p *process) float64 {
	m, err := p.metrics()
	if err != nil {
		return -1
	}
	b := sum(m, "leafd_snowflake_borrowed_seconds_total")
	st, err := p.poolState()
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.borrowed[p.seq] = max(pl.borrowed[p.seq], int64(b*1000+0.5))
	if err == nil {
		pl.maxLead[p.seq] = max(pl.maxLead[p.seq], st.Snowflake.MaxLeadMs)
	}
	return b
}

// burstThenKill sends s four concurrent batches of 10,000 (40,000 IDs,
// more than three worker ids issue in three milliseconds) until its
// leafd_snowflake_borrowed_seconds_total has risen across one (at most 10
// bursts, or 5 with the race detector, under which leafd may be too slow
// to need to borrow), then kills it with SIGKILL at once. It says what it
// did.
func (pl *poolLoad) burstThenKill(s *server) string {
	c := pl.c
	p := s.current()
	hc := pl.client(4)
	defer hc.CloseIdleConnections()
	before := pl.sample(p)
	var after float64
	bursts, most := 0, 10
	if raceBinary() {
		most = 5 // it may never borrow: keep the scenario short
	}
	for bursts < most {
		bursts++
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() { pl.get(hc, p, 10000) })
		}
		wg.Wait()
		after = pl.sample(p)
		if after > before {
			break
		}
	}
	s.kill()
	rose := after > before
	if !rose && !raceBinary() {
		c.violate("server %d (process %d): %d bursts of 4 × 10,000 IDs borrowed no millisecond", s.idx, p.seq, bursts)
	}
	verdict := "borrowed"
	if !rose {
		verdict = "did not borrow"
	}
	return fmt.Sprintf("server %d after %d burst(s) that %s (%.0f → %.0f ms)", s.idx, bursts, verdict, before*1000, after*1000)
}
