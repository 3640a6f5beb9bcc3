package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

var segTags = []string{"a", "b", "c"}

// The dated tag of the scenarios that have one: numbers of the day in
// Shanghai, with a counter of datedDigits digits.
const (
	datedTag    = "d"
	datedZone   = "Asia/Shanghai"
	datedDigits = 8
)

// createDated creates the dated tag through the first server (started
// with LEAFD_ADMIN_TOKEN=adminToken).
func (c *cluster) createDated() {
	body := fmt.Sprintf(`{"tag":%q,"step":100,"format":"dated","period":"day","zone":%q,"digits":%d}`, datedTag, datedZone, datedDigits)
	if status, text := c.admin(c.servers[0].current(), "POST", "/api/tags", body); status != 201 {
		c.t.Fatalf("POST /api/tags %s: %d %s", body, status, text)
	}
}

// checkDated checks the numbers of the dated tag that a request sent at
// o.sent got: each is the date of a day the request saw in datedZone,
// followed by a counter of datedDigits digits from 1.
func checkDated(c *cluster, server int, o *outcome, ids []int64) {
	zone, err := time.LoadLocation(datedZone)
	if err != nil {
		c.violate("zone %s: %v", datedZone, err)
		return
	}
	day := func(t time.Time) int64 {
		y, m, d := t.In(zone).Date()
		return int64(y)*10000 + int64(m)*100 + int64(d)
	}
	scale := int64(math.Pow10(datedDigits))
	first, last := day(o.sent), day(time.Now())
	for _, id := range ids {
		if d, n := id/scale, id%scale; d < first || d > last || n < 1 {
			c.violate("server %d: GET %s sent at %s: number %d is not dated to a day the request saw (%d to %d) with a counter from 1",
				server, o.path, o.sent.Format(time.RFC3339Nano), id, first, last)
		}
	}
}

// window is a stretch of time during which a fault may fail requests.
type window struct{ from, to time.Time }

// overlaps reports whether o was in flight at some time in the window: a
// request sent just before a fault may be waiting for the load the fault
// cuts.
func (w window) overlaps(o *outcome) bool {
	return o.sent.Before(w.to) && !o.sent.Add(o.took).Before(w.from)
}

// windows is a set of windows that can grow while clients read it.
type windows struct {
	mu sync.Mutex
	ws []window
}

func (w *windows) add(from, to time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ws = append(w.ws, window{from, to})
}

// holdsSent reports whether o was sent within one of the windows.
func (w *windows) holdsSent(o *outcome) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, x := range w.ws {
		if !o.sent.Before(x.from) && o.sent.Before(x.to) {
			return true
		}
	}
	return false
}

func (w *windows) overlap(o *outcome) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, x := range w.ws {
		if x.overlaps(o) {
			return true
		}
	}
	return false
}

// Scenario 1: servers killed with SIGKILL mid-load and restarted at once,
// and one stopped with SIGTERM and restarted. Requests cut by the kill are
// expected; nothing else may fail, the graceful stop must drain what it
// accepted and exit 0, and no ID may come twice.
func TestKillAndRestart(t *testing.T) {
	enabled(t)
	c := newCluster(t, "1 kill -9 / SIGTERM restarts", clusterOptions{env: []string{
		"LEAFD_SEGMENT_SEED_TAGS=a:20 b:100 c:500", "LEAFD_SEGMENT_REFILL_MIN=1s", "LEAFD_SEGMENT_REFILL_MAX=2s",
		"LEAFD_SEGMENT_MAX_STEP=5000", "LEAFD_SNOWFLAKE_LEASE_TTL=5s", "LEAFD_ADMIN_TOKEN=" + adminToken},
		// Snowflake batches borrow future milliseconds: none may come
		// twice across the kills.
		maxBorrow: 5 * time.Millisecond})
	c.startAll()
	c.createDated()
	l := c.startLoad(loadSpec{tags: segTags, dated: []string{datedTag}, snowflake: true, ranges: true})
	bursts := c.snowflakeBursts()
	time.Sleep(prof.phase)
	for i := range prof.kills {
		s := c.servers[i%len(c.servers)]
		s.kill()
		if err := s.start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(prof.phase)
	}
	s := c.servers[len(c.servers)-1]
	if code := s.stop(); code != 0 {
		c.violate("server %d: exit %d after SIGTERM under load, want 0", s.idx, code)
	}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(prof.phase)
	l.Stop()
	bursts()
	c.note("%d kill -9 and 1 SIGTERM, each restarted at once", prof.kills)
	ranges := c.outcomesOf(func(o *outcome) bool { return o.status == 200 && strings.Contains(o.path, "/range?") })
	if len(ranges) == 0 {
		c.violate("no range lease was served: the load asks for them")
	}
	c.note("%d range leases among the requests, checked with the other IDs", len(ranges))
	c.finish()
}

// snowflakeBursts asks every server for batches of 10,000 snowflake IDs,
// more than one millisecond's sequence holds, every 20 ms until the
// returned function is called: with snowflake.max_borrow the servers
// borrow milliseconds ahead of their clocks, across the kills too. Every
// ID goes into the ledger. The function stops the bursts and checks that
// the running servers did borrow.
func (c *cluster) snowflakeBursts() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	const path = "/snowflake?count=10000"
	// borrowed is the last leafd_snowflake_borrowed_seconds_total read
	// from each process: a counter, so the last reading of a process that
	// was killed later is what it had borrowed by then at least.
	var mu sync.Mutex
	borrowed := map[*process]float64{}
	sample := func(p *process) {
		if m, err := p.metrics(); err == nil {
			mu.Lock()
			borrowed[p] = max(borrowed[p], sum(m, "leafd_snowflake_borrowed_seconds_total"))
			mu.Unlock()
		}
	}
	for _, s := range c.servers {
		wg.Go(func() {
			hc := &http.Client{Timeout: c.sfWithin + 5*time.Second}
			defer hc.CloseIdleConnections()
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				case <-tick.C:
				}
				p := s.current()
				if p == nil {
					continue
				}
				res, err := hc.Get(p.addr + path)
				if err != nil {
					continue // cut by a kill
				}
				body, err := io.ReadAll(res.Body)
				res.Body.Close()
				if err == nil && res.StatusCode == http.StatusOK {
					c.record(p, path, string(body))
				}
				if i%10 == 0 {
					sample(p)
				}
			}
		})
	}
	return func() {
		close(done)
		wg.Wait()
		for _, s := range c.servers {
			if p := s.current(); p != nil {
				sample(p)
			}
		}
		var total float64
		for _, b := range borrowed {
			total += b
		}
		// A leafd built with the race detector issues a millisecond's
		// sequence more slowly than the clock moves, and so rarely needs to
		// borrow: there the bursts test the duplicates alone.
		if total == 0 && !raceBinary() {
			c.violate("snowflake bursts of 10,000 IDs borrowed no millisecond: max_borrow is not in effect")
		}
		c.note("snowflake bursts of 10,000 IDs: the servers borrowed %.0f ms ahead of their clocks", total*1000)
	}
}

// tagLife is how long the IDs a server has buffered for a tag last at the
// rate it issues them.
type tagLife struct {
	server int
	tag    string
	rate   float64 // IDs per second
	left   int64   // IDs buffered
	life   time.Duration
}

type stateJSON struct {
	Segment struct {
		Tags []struct {
			Tag    string
			Issued int64
			// Error is the last load failure, absent once a load succeeded.
			Error   string
			Buffers []struct {
				Start, End, Next int64
				Ready            bool
			}
		}
	}
}

func (p *process) state() (stateJSON, error) {
	var st stateJSON
	return st, p.getJSON("/api/state", &st)
}

// getJSON decodes the JSON answer of GET path, which must be a 200, into v.
func (p *process) getJSON(path string, v any) error {
	code, body, err := p.get(path)
	if err != nil {
		return err
	}
	if code != 200 {
		return fmt.Errorf("%s: %d", path, code)
	}
	return json.Unmarshal([]byte(body), v)
}

// bufferLives measures, on every server, how long each tag's buffered IDs
// last: the IDs left in its ready buffers over the rate measured across
// span.
func (c *cluster) bufferLives(span time.Duration) ([]tagLife, error) {
	type snap struct {
		at time.Time
		st stateJSON
	}
	first := map[int]snap{}
	for _, s := range c.servers {
		st, err := s.current().state()
		if err != nil {
			return nil, err
		}
		first[s.idx] = snap{time.Now(), st}
	}
	time.Sleep(span)
	var out []tagLife
	for _, s := range c.servers {
		st, err := s.current().state()
		if err != nil {
			return nil, err
		}
		at := time.Now()
		before := map[string]int64{}
		for _, tg := range first[s.idx].st.Segment.Tags {
			before[tg.Tag] = tg.Issued
		}
		for _, tg := range st.Segment.Tags {
			l := tagLife{server: s.idx, tag: tg.Tag}
			l.rate = float64(tg.Issued-before[tg.Tag]) / at.Sub(first[s.idx].at).Seconds()
			for _, b := range tg.Buffers {
				if b.Ready && b.End > b.Next {
					l.left += b.End - b.Next
				}
			}
			l.life = time.Duration(math.MaxInt64)
			if l.rate > 0 {
				l.life = time.Duration(float64(l.left) / l.rate * float64(time.Second))
			}
			out = append(out, l)
		}
	}
	return out, nil
}

// Scenario 2a: the database unreachable (every connection cut, new ones
// refused) for less than a buffer's life. The buffers carry the load: no
// request may fail, and the loads that failed meanwhile recover.
func TestShortDatabaseOutage(t *testing.T) {
	enabled(t)
	// Every buffer must outlive the outage with room for the loads' retry
	// backoff. A tag's buffers last from one range (just after a switch,
	// before the next range is loaded at preload_at) to nearly two, and the
	// step is sized so that a range lasts between refill_min and
	// refill_max: with refill_min at what is needed, the shortest of the
	// cluster's buffers outlives the outage at any moment once the steps
	// have grown. Ranges that last a few outages make it likely that some
	// loads fall in it (the failed range loads are counted in the notes).
	need := 2*prof.shortOutage + time.Second
	c := newCluster(t, "2a database down < buffer life", clusterOptions{env: []string{
		"LEAFD_SEGMENT_SEED_TAGS=a:100 b:100 c:100",
		"LEAFD_SEGMENT_REFILL_MIN=" + need.String(), "LEAFD_SEGMENT_REFILL_MAX=" + (2 * need).String(),
		"LEAFD_SNOWFLAKE_LEASE_TTL=10s"}})
	c.startAll()
	l := c.startLoad(loadSpec{tags: segTags, snowflake: true})
	time.Sleep(prof.phase)
	// The step grows until a range lasts refill_min: wait for it.
	deadline := time.Now().Add(30 * time.Second)
	var shortest tagLife
	for {
		lives, err := c.bufferLives(500 * time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		shortest = tagLife{life: time.Duration(math.MaxInt64)}
		for _, l := range lives {
			if l.life < shortest.life {
				shortest = l
			}
		}
		if shortest.life >= need {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("setup: after 30s, server %d's buffers of tag %s last only %v (%d IDs at %.0f/s); need %v",
				shortest.server, shortest.tag, shortest.life.Round(time.Millisecond), shortest.left, shortest.rate, need)
		}
	}
	c.note("outage %v; shortest buffer life before it %v (server %d tag %s, %d IDs at %.0f/s)", prof.shortOutage,
		shortest.life.Round(100*time.Millisecond), shortest.server, shortest.tag, shortest.left, shortest.rate)
	c.databaseDown()
	time.Sleep(prof.shortOutage)
	c.databaseUp()
	time.Sleep(prof.phase)
	l.Stop()
	c.finish()
}

// databaseDown cuts every server's connections to the database and refuses
// new ones: a database server that stopped. (The shared MariaDB itself is
// not restarted; other tests use it.)
func (c *cluster) databaseDown() {
	for _, s := range c.servers {
		s.proxy.Down()
	}
}

// databaseStall holds every packet between the servers and the database.
func (c *cluster) databaseStall() {
	for _, s := range c.servers {
		s.proxy.Stall()
	}
}

func (c *cluster) databaseUp() {
	for _, s := range c.servers {
		s.proxy.Up()
	}
}

// Scenario 2b: the database unreachable long enough to drain every buffer
// (small steps). Segment requests then fail with segment_unavailable
// within wait_timeout plus a margin, never hang; /readyz says 503;
// snowflake, whose lease outlives the outage, never fails; once the
// database is back every server recovers and nothing fails any more.
func TestLongDatabaseOutage(t *testing.T) {
	enabled(t)
	const wait = 500 * time.Millisecond
	c := newCluster(t, "2b database down > buffer life", clusterOptions{waitTimeout: wait, env: []string{
		"LEAFD_SEGMENT_SEED_TAGS=a:20 b:20 c:20", "LEAFD_SEGMENT_REFILL_MIN=200ms", "LEAFD_SEGMENT_REFILL_MAX=400ms",
		"LEAFD_SEGMENT_MAX_STEP=200", "LEAFD_SNOWFLAKE_LEASE_TTL=30s", "LEAFD_ADMIN_TOKEN=" + adminToken}})
	var outage windows
	c.allowed = func(o *outcome) bool {
		return o.mode == modeSegment && o.code == "segment_unavailable" && outage.overlap(o)
	}
	c.startAll()
	c.createDated()
	l := c.startLoad(loadSpec{tags: segTags, dated: []string{datedTag}, snowflake: true})
	time.Sleep(prof.phase)
	down := time.Now()
	c.databaseDown()
	notReady := 0
	for time.Since(down) < prof.longOutage {
		if code, _, _ := c.servers[0].current().get("/readyz"); code == 503 {
			notReady++
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.databaseUp()
	up := time.Now()
	recovered, err := c.allReady(30*time.Second, append(segTags, datedTag), true)
	if err != nil {
		t.Fatalf("no recovery after the database came back: %v", err)
	}
	outage.add(down, recovered)
	var back windows
	back.add(up, recovered)
	c.note("outage %v; every load had succeeded again %v after it; %d requests sent after the database was back failed meanwhile",
		prof.longOutage, recovered.Sub(up).Round(10*time.Millisecond), c.failedAfterUp(&back))
	time.Sleep(prof.phase)
	l.Stop()
	if notReady == 0 {
		c.violate("/readyz of server 0 never answered 503 during a %v outage with its buffers drained", prof.longOutage)
	}
	unavailable := c.outcomesOf(func(o *outcome) bool { return o.code == "segment_unavailable" })
	if len(unavailable) == 0 {
		c.violate("premise: no request failed during a %v outage: the buffers did not drain", prof.longOutage)
	}
	c.finish()
}

// Scenario 3: the database slow (every packet to it delayed, so each query
// takes a few hundred ms) and then a sudden spike of about 100 times the
// traffic. Requests that find both buffers empty wait; they must be
// answered within wait_timeout plus a margin, and may fail only with
// segment_unavailable, and only during the spike.
func TestSlowDatabaseSpike(t *testing.T) {
	enabled(t)
	const (
		latency = 250 * time.Millisecond
		wait    = 3 * time.Second
	)
	c := newCluster(t, "3 slow database + 100x spike", clusterOptions{waitTimeout: wait, env: []string{
		"LEAFD_SEGMENT_SEED_TAGS=a:50 b:50 c:50", "LEAFD_SEGMENT_REFILL_MIN=3s", "LEAFD_SEGMENT_REFILL_MAX=6s",
		"LEAFD_SEGMENT_MAX_STEP=200000", "LEAFD_SNOWFLAKE_LEASE_TTL=10s"}})
	var spike windows
	c.allowed = func(o *outcome) bool {
		return o.mode == modeSegment && o.code == "segment_unavailable" && spike.overlap(o)
	}
	c.startAll()
	low := loadSpec{tags: segTags, snowflake: true, clients: 1, pause: 100 * time.Millisecond}
	l := c.startLoad(low)
	time.Sleep(prof.phase) // warm up: steps sized for the low rate, connections open
	for _, s := range c.servers {
		s.proxy.SetLatency(latency)
	}
	slowFrom := time.Now()
	time.Sleep(max(prof.phase, 2*time.Second))
	waitsBefore := c.totalWaits()
	spikeFrom := time.Now()
	lowRate := c.rate(slowFrom, spikeFrom)
	// Each low client pauses 100 ms between requests; each spike client
	// sends the next at once (about 1 ms when nothing waits), so the
	// offered load is over 100 times the low one. What is reached depends
	// on how long the requests wait.
	burst := c.startLoad(loadSpec{tags: segTags, snowflake: true, clients: 2 * prof.clients})
	spikeFor := max(3*prof.phase, 6*time.Second)
	time.Sleep(spikeFor)
	burst.Stop()
	spikeTo := time.Now()
	spike.add(spikeFrom, spikeTo)
	waits := c.totalWaits() - waitsBefore
	time.Sleep(prof.phase)
	l.Stop()
	for _, s := range c.servers {
		s.proxy.SetLatency(0)
	}
	first, second := c.rate(spikeFrom, spikeFrom.Add(spikeFor/2)), c.rate(spikeFrom.Add(spikeFor/2), spikeTo)
	c.note("latency %v per packet to the database; %.0f req/s before the spike; during its %v, %.0f req/s (×%.0f) in the first half, "+
		"%.0f (×%.0f) in the second; %d requests waited during the spike",
		latency, lowRate, spikeFor, first, first/lowRate, second, second/lowRate, waits)
	if waits == 0 {
		c.violate("premise: no request waited during the spike: the fault did not bite")
	}
	c.finish()
}

// failedAfterUp counts the segment requests sent while the database was
// back (in one of the windows from its return to the cluster's recovery)
// that still failed: loads waiting out their retry backoff.
func (c *cluster) failedAfterUp(back *windows) int {
	return len(c.outcomesOf(func(o *outcome) bool {
		return o.code == "segment_unavailable" && back.holdsSent(o)
	}))
}

// rate returns the requests per second sent between from and to.
func (c *cluster) rate(from, to time.Time) float64 {
	n := len(c.outcomesOf(func(o *outcome) bool { return !o.sent.Before(from) && o.sent.Before(to) }))
	return float64(n) / to.Sub(from).Seconds()
}

// Scenario 4: the database restarted under load, several times. The shared
// MariaDB cannot be restarted (other tests use it), so a restart is
// simulated at the proxies: every connection cut and new ones refused for
// a while, then allowed. Every other restart is preceded by a network
// stall (packets held, so calls hang rather than fail) and cuts what the
// stall held, as a database that restarts behind a partition would.
// Segment requests may fail with segment_unavailable during a restart
// only; snowflake (lease longer than the outage) never; every server
// recovers after each.
func TestDatabaseRestart(t *testing.T) {
	enabled(t)
	const wait = 500 * time.Millisecond
	c := newCluster(t, "4 database restarts", clusterOptions{waitTimeout: wait, env: []string{
		"LEAFD_SEGMENT_SEED_TAGS=a:20 b:100 c:1000", "LEAFD_SEGMENT_REFILL_MIN=500ms", "LEAFD_SEGMENT_REFILL_MAX=1s",
		"LEAFD_SEGMENT_MAX_STEP=2000", "LEAFD_SNOWFLAKE_LEASE_TTL=10s"}})
	var restarts windows
	c.allowed = func(o *outcome) bool {
		return o.mode == modeSegment && o.code == "segment_unavailable" && restarts.overlap(o)
	}
	c.startAll()
	l := c.startLoad(loadSpec{tags: segTags, snowflake: true})
	time.Sleep(prof.phase)
	var slowest time.Duration
	var back windows // from the database's return to the recovery
	for i := range prof.dbRestarts {
		from := time.Now()
		if i%2 == 1 {
			c.databaseStall()
			time.Sleep(time.Second)
		}
		c.databaseDown()
		downAt := time.Now()
		var relaunched *process
		if i == 0 {
			relaunched = c.restartWithoutDatabase(c.servers[0])
		}
		time.Sleep(2*time.Second - time.Since(downAt))
		c.databaseUp()
		up := time.Now()
		if relaunched != nil {
			if err := relaunched.waitReady(30 * time.Second); err != nil {
				t.Fatalf("a server started while the database was down: %v", err)
			}
			s := c.servers[0]
			s.mu.Lock()
			s.cur = relaunched
			s.mu.Unlock()
		}
		recovered, err := c.allReady(30*time.Second, segTags, true)
		if err != nil {
			t.Fatalf("restart %d: no recovery: %v", i+1, err)
		}
		restarts.add(from, recovered)
		back.add(up, recovered)
		slowest = max(slowest, recovered.Sub(up))
		time.Sleep(prof.phase)
	}
	l.Stop()
	c.note("%d restarts (down 2s; every other one after a 1s stall); during the first, server 0 stopped (SIGTERM) and started again; "+
		"every load had succeeded again at most %v after the database was back; %d requests sent after it was back failed meanwhile",
		prof.dbRestarts, slowest.Round(10*time.Millisecond), c.failedAfterUp(&back))
	c.finish()
}

// restartWithoutDatabase stops s with SIGTERM while the database is down
// (it must still exit 0: its lease simply expires) and starts it again: it
// must start and answer /healthz 200 and /readyz 503 until the database is
// back. The process is returned before it is ready and is not in
// rotation.
func (c *cluster) restartWithoutDatabase(s *server) *process {
	c.t.Helper()
	began := time.Now()
	if code := s.stop(); code != 0 {
		c.violate("server %d: exit %d after SIGTERM with the database down, want 0", s.idx, code)
	}
	took := time.Since(began)
	p, err := s.launch()
	if err != nil {
		c.t.Fatalf("server %d did not start with the database down: %v", s.idx, err)
	}
	if code, body, err := p.get("/healthz"); code != 200 {
		c.violate("server %d started with the database down: /healthz = %d %s %v, want 200", s.idx, code, body, err)
	}
	if code, body, err := p.get("/readyz"); code != 503 {
		c.violate("server %d started with the database down: /readyz = %d %s %v, want 503", s.idx, code, body, err)
	}
	c.note("server %d stopped in %v with the database down, started again and answered /readyz 503 until it was back",
		s.idx, took.Round(10*time.Millisecond))
	return p
}
