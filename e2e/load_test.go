package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Snowflake layout of every scenario: the defaults.
const (
	sfEpoch        = 1288834974657
	sfWorkerShift  = 12
	sfTimeShift    = 22
	sfWorkerMask   = 1023
	modeSegment    = "segment"
	modeSnowflake  = "snowflake"
	defaultBatches = 50
)

func sfWorker(id int64) int64 { return id >> sfWorkerShift & sfWorkerMask }
func sfUnixMs(id int64) int64 { return id>>sfTimeShift + sfEpoch }

// outcome is one request of the load and what came of it.
type outcome struct {
	sent time.Time
	took time.Duration
	proc int // process index
	mode string
	tag  string // segment only
	path string
	// status is 0 when no answer came: err says why.
	status int
	code   string // the error code of a failed answer
	err    string
	// refused: the connection was refused, so the request never reached
	// leafd.
	refused bool
	ids     int
}

// loadSpec shapes the load of a phase.
type loadSpec struct {
	// clients per server; 0 means the profile's.
	clients int
	// tags are the segment tags asked for; snowflake mixes in snowflake
	// requests (a quarter of them, or all when there are no tags).
	tags      []string
	snowflake bool
	// maxCount bounds the batches (count=N) that a third of the requests
	// ask for; 0 means 50.
	maxCount int
	// pause between two requests of a client.
	pause time.Duration
	// servers to load; nil means all.
	servers []*server
	// ranges mixes in range leases (GET /segment/{tag}/range?size=N, N up
	// to maxRange) for a tenth of the segment requests.
	ranges bool
	// dated are dated tags of datedDigits digits in datedZone, created
	// by the scenario (createDated): asked for like the tags, never as
	// range leases, and every number must carry a date its request saw.
	dated []string
	// anyOrder drops the order checks (a batch ascending, a connection's
	// IDs of a tag increasing): an opaque tag's IDs come in no order, and
	// a tag deleted and created again in another format may continue
	// below IDs it gave before. The ledger's duplicate check stays.
	anyOrder bool
}

// maxRange is the largest range the load asks for: with max_step 5000,
// ranges over 1250 are taken from the database directly.
const maxRange = 3000

// load is clients sending requests until stopped.
type load struct {
	c    *cluster
	spec loadSpec
	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

// startLoad starts the clients of spec. Each client sends one request at a
// time over its own keep-alive connection to one server, so what it gets
// from one process for one tag must be strictly increasing.
func (c *cluster) startLoad(spec loadSpec) *load {
	if spec.clients == 0 {
		spec.clients = prof.clients
	}
	if spec.maxCount == 0 {
		spec.maxCount = defaultBatches
	}
	if spec.servers == nil {
		spec.servers = c.servers
	}
	l := &load{c: c, spec: spec, stop: make(chan struct{})}
	// A scenario that ends early (t.Fatal) still stops its clients before
	// its servers, and before the test is over: a client that reported a
	// violation after that would panic the whole suite.
	c.t.Cleanup(l.Stop)
	for _, s := range spec.servers {
		for i := range spec.clients {
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				l.client(s, rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(s.idx<<16|i))))
			}()
		}
	}
	return l
}

// Stop stops the clients and waits for their last requests. Calling it
// again does nothing more.
func (l *load) Stop() {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
}

func (l *load) stopped() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

// seqKey names one strictly increasing sequence of a client.
type seqKey struct {
	proc int
	mode string
	tag  string
}

func (l *load) client(s *server, rng *rand.Rand) {
	c := l.c
	hc := &http.Client{
		// A request that takes this long hung: leafd's own bounds are far
		// shorter.
		Timeout:   max(c.segWithin, c.sfWithin) + 5*time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true},
	}
	defer hc.CloseIdleConnections()
	last := map[seqKey]int64{}
	for !l.stopped() {
		p := s.current()
		if p == nil {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		o := outcome{proc: p.seq}
		n := 1
		if rng.IntN(3) == 0 {
			n = 1 + rng.IntN(l.spec.maxCount)
		}
		var query []string
		if n > 1 || rng.IntN(4) == 0 {
			query = append(query, "count="+strconv.Itoa(n))
		}
		asJSON := rng.IntN(10) == 0
		if asJSON {
			query = append(query, "format=json")
		}
		leaf := rng.IntN(10) == 0
		if leaf {
			n, query = 1, nil
		}
		if l.spec.snowflake && (len(l.spec.tags) == 0 || rng.IntN(4) == 0) {
			o.mode, o.path = modeSnowflake, "/snowflake"
			if leaf {
				o.path = "/api/snowflake/get/e2e"
			}
		} else {
			tags := append(l.spec.tags[:len(l.spec.tags):len(l.spec.tags)], l.spec.dated...)
			o.mode, o.tag = modeSegment, tags[rng.IntN(len(tags))]
			o.path = "/segment/" + o.tag
			if leaf {
				o.path = "/api/segment/get/" + o.tag
			}
		}
		dated := o.mode == modeSegment && slices.Contains(l.spec.dated, o.tag)
		isRange := o.mode == modeSegment && !leaf && !dated && l.spec.ranges && rng.IntN(10) == 0
		if isRange {
			n = 1 + rng.IntN(maxRange)
			query = []string{"size=" + strconv.Itoa(n)}
			o.path += "/range"
		}
		if len(query) > 0 {
			o.path += "?" + strings.Join(query, "&")
		}
		body, err := o.send(hc, p)
		var ids []int64
		switch {
		case err != nil:
		case o.status == 200 && isRange:
			ids, err = parseRange(body, o.tag)
			if err == nil && len(ids) != n {
				err = fmt.Errorf("%d IDs for size=%d", len(ids), n)
			}
			if err != nil {
				c.violate("server %d: GET %s: 200 with a bad body: %v: %.200q", s.idx, o.path, err, body)
			}
		case o.status == 200:
			if l.spec.anyOrder {
				ids, err = readIDs(body, asJSON, leaf)
			} else {
				ids, err = parseIDs(body, asJSON, leaf)
			}
			if err == nil && len(ids) != n {
				err = fmt.Errorf("%d IDs for count=%d", len(ids), n)
			}
			if err != nil {
				c.violate("server %d: GET %s: 200 with a bad body: %v: %.200q", s.idx, o.path, err, body)
			}
		case leaf:
			o.code, _, _ = strings.Cut(string(body), ":")
		default:
			var e struct{ Error struct{ Code string } }
			if json.Unmarshal(body, &e) != nil || e.Error.Code == "" {
				c.violate("server %d: GET %s: %d with a body that is not a JSON error: %.200q", s.idx, o.path, o.status, body)
			}
			o.code = e.Error.Code
		}
		o.ids = len(ids)
		if dated {
			checkDated(c, s.idx, &o, ids)
		}
		if isRange || l.spec.anyOrder {
			// A range may come from the database directly, above the IDs
			// the server buffers: ranges are not in order with the rest.
			c.ledger.add(o.mode, o.tag, p.seq, ids)
		} else {
			key := seqKey{p.seq, o.mode, o.tag}
			prev := last[key]
			for _, id := range ids {
				if id <= prev {
					c.violate("server %d (process %d) %s %s: ID %d after %d on one connection: not strictly increasing",
						s.idx, p.seq, o.mode, o.tag, id, prev)
				}
				prev = id
			}
			if len(ids) > 0 {
				last[key] = prev
				c.ledger.add(o.mode, o.tag, p.seq, ids)
			}
		}
		c.mu.Lock()
		c.outcomes = append(c.outcomes, o)
		c.mu.Unlock()
		if l.spec.pause > 0 {
			time.Sleep(l.spec.pause)
		}
	}
}

// parseIDs reads the IDs of a 200 answer: decimal lines, JSON strings, or
// Leaf's bare ID. Each must be positive; a batch must be ascending.
func parseIDs(body []byte, asJSON, leaf bool) ([]int64, error) {
	ids, err := readIDs(body, asJSON, leaf)
	for i := 1; err == nil && i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			err = fmt.Errorf("batch not ascending: %d after %d", ids[i], ids[i-1])
		}
	}
	return ids, err
}

// readIDs reads the IDs of a 200 answer, each positive, in any order.
func readIDs(body []byte, asJSON, leaf bool) ([]int64, error) {
	var raw []string
	switch {
	case leaf:
		if strings.ContainsAny(string(body), "\n ") {
			return nil, errors.New("a Leaf answer is the bare ID")
		}
		raw = []string{string(body)}
	case asJSON:
		var v struct{ IDs []string }
		if err := json.Unmarshal(body, &v); err != nil {
			return nil, err
		}
		raw = v.IDs
	default:
		if len(body) == 0 || body[len(body)-1] != '\n' {
			return nil, errors.New("the text body does not end in a newline")
		}
		raw = strings.Split(string(body[:len(body)-1]), "\n")
	}
	ids := make([]int64, len(raw))
	for i, r := range raw {
		id, err := strconv.ParseInt(r, 10, 64)
		if err != nil || id < 1 {
			return nil, fmt.Errorf("ID %q is not a positive 63-bit integer", r)
		}
		ids[i] = id
	}
	return ids, nil
}

// parseRange reads the answer of a range lease and returns its IDs.
func parseRange(body []byte, tag string) ([]int64, error) {
	var v struct{ Tag, Start, End string }
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, err
	}
	start, err1 := strconv.ParseInt(v.Start, 10, 64)
	end, err2 := strconv.ParseInt(v.End, 10, 64)
	if err1 != nil || err2 != nil || start < 1 || end <= start || end-start > maxRange || v.Tag != tag {
		return nil, fmt.Errorf("not a range of tag %s", tag)
	}
	ids := make([]int64, 0, end-start)
	for id := start; id < end; id++ {
		ids = append(ids, id)
	}
	return ids, nil
}

// record adds the IDs of a probe's 200 answer to path to the ledger.
func (c *cluster) record(p *process, path, body string) {
	mode, tag := modeSnowflake, ""
	if t, ok := strings.CutPrefix(path, "/segment/"); ok {
		mode = modeSegment
		tag, _, _ = strings.Cut(t, "?")
	}
	ids, err := parseIDs([]byte(body), false, false)
	if err != nil {
		c.violate("server %d: GET %s: 200 with a bad body: %v", p.srv.idx, path, err)
		return
	}
	c.ledger.add(mode, tag, p.seq, ids)
	c.mu.Lock()
	c.outcomes = append(c.outcomes, outcome{sent: time.Now(), proc: p.seq, mode: mode, tag: tag, path: path, status: 200, ids: len(ids)})
	c.mu.Unlock()
}

// outcomesOf returns the outcomes that keep says to keep.
func (c *cluster) outcomesOf(keep func(o *outcome) bool) []outcome {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []outcome
	for i := range c.outcomes {
		if keep(&c.outcomes[i]) {
			out = append(out, c.outcomes[i])
		}
	}
	return out
}

// checkIDs checks every ID received: no segment ID twice per tag, none
// outside [1, final max_id) of its tag; no snowflake ID twice, each with a
// worker id its process leased and a time within the process's life.
func (c *cluster) checkIDs(maxIDs map[string]int64) {
	c.ledger.mu.Lock()
	defer c.ledger.mu.Unlock()
	c.mu.Lock()
	procs := append([]*process(nil), c.procs...)
	c.mu.Unlock()
	where := func(s stamp) string {
		p := procs[s.proc]
		return fmt.Sprintf("server %d (process %d)", p.srv.idx, p.seq)
	}
	for _, tag := range sortedKeys(c.ledger.seg) {
		ids := c.ledger.seg[tag].byID()
		max, ok := maxIDs[tag]
		if !ok {
			c.violate("tag %s: IDs issued but no row in leaf_alloc", tag)
		}
		dups := 0
		for i, s := range ids {
			if s.id < 1 || s.id >= max {
				c.violate("tag %s: ID %d from %s is outside [1, %d), the IDs the database handed out", tag, s.id, where(s), max)
			}
			if i > 0 && ids[i-1].id == s.id {
				if dups++; dups <= 5 {
					c.violate("tag %s: ID %d issued twice, by %s and %s", tag, s.id, where(ids[i-1]), where(s))
				}
			}
		}
		if dups > 0 {
			c.violate("tag %s: %d duplicate IDs", tag, dups)
		}
	}
	ids := c.ledger.sf.byID()
	dups := 0
	for i, s := range ids {
		if i > 0 && ids[i-1].id == s.id {
			if dups++; dups <= 5 {
				c.violate("snowflake ID %d issued twice, by %s and %s", s.id, where(ids[i-1]), where(s))
			}
		}
		p := procs[s.proc]
		if !slices.Contains(p.leased(), sfWorker(s.id)) {
			c.violate("snowflake ID %d from %s has worker id %d; its process leased %v", s.id, where(s), sfWorker(s.id), p.leased())
		}
		from, to := p.Started().UnixMilli(), time.Now().UnixMilli()
		if ended := p.Ended(); !ended.IsZero() {
			to = ended.UnixMilli()
		}
		// A borrowed millisecond is up to max_borrow past the clock.
		if ms := sfUnixMs(s.id) + p.srv.epochShift; ms < from || ms > to+c.maxBorrow.Milliseconds() {
			c.violate("snowflake ID %d from %s has time %s, outside its process's life %s..%s", s.id, where(s),
				msTime(ms), msTime(from), msTime(to))
		}
	}
	if dups > 0 {
		c.violate("snowflake: %d duplicate IDs", dups)
	}
}

func msTime(ms int64) string { return time.UnixMilli(ms).UTC().Format("15:04:05.000") }

// checkOutcomes judges every request: none hung (no answer within
// answerWithin); an answer that is not 200 must be one the scenario
// allows; a request cut by a kill -9 is expected; a request sent to a
// process stopped with SIGTERM may only have been refused at the door,
// never dropped once accepted.
func (c *cluster) checkOutcomes() {
	c.mu.Lock()
	procs := append([]*process(nil), c.procs...)
	c.mu.Unlock()
	failed := map[string]int{}
	for _, o := range c.outcomesOf(func(*outcome) bool { return true }) {
		p := procs[o.proc]
		p.mu.Lock()
		killed, stopped := p.killed, p.stopped
		p.mu.Unlock()
		within := c.segWithin
		if o.mode == modeSnowflake {
			within = c.sfWithin
		}
		if o.status != 0 && o.took > within && !p.late.overlap(&o) {
			c.violate("server %d: GET %s answered %d after %v, more than %v: a hang", p.srv.idx, o.path, o.status,
				o.took.Round(time.Millisecond), within)
		}
		if o.status == 200 {
			continue
		}
		var kind string
		switch {
		case o.status == 0 && killed:
			kind = "cut by kill -9"
		case o.status == 0 && stopped && o.refused:
			kind = "refused by a stopping server"
		case o.status == 0:
			kind = "no answer"
			c.violate("server %d (process %d): GET %s: no answer after %v: %s", p.srv.idx, p.seq, o.path,
				o.took.Round(time.Millisecond), o.err)
		default:
			kind = fmt.Sprintf("%d %s", o.status, o.code)
			if !c.allowed(&o) {
				c.violate("server %d (process %d): GET %s sent at %s: %d %s, not expected here", p.srv.idx, p.seq, o.path,
					o.sent.Format("15:04:05.000"), o.status, o.code)
			}
		}
		failed[kind]++
	}
	if len(failed) > 0 {
		var parts []string
		for _, k := range sortedKeys(failed) {
			parts = append(parts, fmt.Sprintf("%s ×%d", k, failed[k]))
		}
		c.note("failed: %s", strings.Join(parts, ", "))
	}
}

// send makes o's GET of o.path from p and records when it was sent, how
// long it took, and its status or transport error; it returns the body.
func (o *outcome) send(hc *http.Client, p *process) ([]byte, error) {
	o.sent = time.Now()
	res, err := hc.Get(p.addr + o.path)
	var body []byte
	if err == nil {
		body, err = io.ReadAll(res.Body)
		res.Body.Close()
	}
	o.took = time.Since(o.sent)
	if err != nil {
		o.err = err.Error()
		o.refused = errors.Is(err, syscall.ECONNREFUSED)
	} else {
		o.status = res.StatusCode
	}
	return body, err
}
