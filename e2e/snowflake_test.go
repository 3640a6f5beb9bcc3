package e2e

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/testenv"
)

// Clock moves are not injected here: Go reads the clock through the vDSO,
// so libfaketime cannot move a whole leafd process's clock, and the binary
// has (deliberately) no test-only clock offset. Small and large backward
// steps, and a restart with the clock behind, are covered in-process
// through the generator's injected clock (snowflake/generator_test.go).

// workers returns, for each process, the worker ids of the snowflake IDs
// it issued.
func (c *cluster) workers() map[int][]int64 {
	c.ledger.mu.Lock()
	defer c.ledger.mu.Unlock()
	seen := map[int]map[int64]bool{}
	for s := range c.ledger.sf.from(0) {
		p := int(s.proc)
		if seen[p] == nil {
			seen[p] = map[int64]bool{}
		}
		seen[p][sfWorker(s.id)] = true
	}
	out := map[int][]int64{}
	for p, ws := range seen {
		for w := range ws {
			out[p] = append(out[p], w)
		}
		slices.Sort(out[p])
	}
	return out
}

// sfIDsOf returns the snowflake IDs process proc issued, ascending.
func (c *cluster) sfIDsOf(proc int) []int64 {
	c.ledger.mu.Lock()
	defer c.ledger.mu.Unlock()
	var ids []int64
	for s := range c.ledger.sf.from(0) {
		if int(s.proc) == proc {
			ids = append(ids, s.id)
		}
	}
	slices.Sort(ids)
	return ids
}

// workerOf returns the one worker id process proc issued under.
func (c *cluster) workerOf(proc int) (int64, error) {
	ws := c.workers()[proc]
	if len(ws) != 1 {
		return 0, fmt.Errorf("process %d issued under worker ids %v, want exactly one", proc, ws)
	}
	return ws[0], nil
}

// checkDistinctWorkers checks that no two processes issued under one
// worker id at overlapping times: for each worker id, the span of the IDs
// each process issued under it (first to last millisecond) is disjoint
// from every other process's. A worker id may change hands (a released or
// expired lease), but only to issue after the previous holder's last ID.
func (c *cluster) checkDistinctWorkers() {
	type span struct {
		proc     int
		from, to int64
	}
	c.ledger.mu.Lock()
	spans := map[int64]map[int]*span{}
	for s := range c.ledger.sf.from(0) {
		w, ms := sfWorker(s.id), sfUnixMs(s.id)
		if spans[w] == nil {
			spans[w] = map[int]*span{}
		}
		if sp := spans[w][int(s.proc)]; sp == nil {
			spans[w][int(s.proc)] = &span{int(s.proc), ms, ms}
		} else {
			sp.from, sp.to = min(sp.from, ms), max(sp.to, ms)
		}
	}
	c.ledger.mu.Unlock()
	for w, byProc := range spans {
		var list []*span
		for _, sp := range byProc {
			list = append(list, sp)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].from < list[j].from })
		for i := 1; i < len(list); i++ {
			if prev := list[i-1]; list[i].from <= prev.to {
				c.violate("worker id %d: process %d issued under it from %s to %s, process %d from %s: overlapping",
					w, prev.proc, msTime(prev.from), msTime(prev.to), list[i].proc, msTime(list[i].from))
			}
		}
	}
}

// Scenario 5a: several servers started at once race for worker ids on one
// database; each gets its own (decoded from the IDs: bits 12..21). One
// killed with SIGKILL and restarted at once gets another worker id, since
// the old lease is still live; one stopped with SIGTERM releases its
// lease. No snowflake ID is issued twice.
func TestSnowflakeWorkers(t *testing.T) {
	enabled(t)
	c := newCluster(t, "5a snowflake worker race, kill -9, restart", clusterOptions{servers: prof.servers + 1, env: []string{
		"LEAFD_SEGMENT_ENABLED=false", "LEAFD_SNOWFLAKE_LEASE_TTL=5s"}})
	c.startAll()
	l := c.startLoad(loadSpec{snowflake: true})
	time.Sleep(prof.phase)
	var first []string
	for _, s := range c.servers {
		w, err := c.workerOf(s.current().seq)
		if err != nil {
			t.Fatal(err)
		}
		first = append(first, fmt.Sprint(w))
	}
	for i := range prof.workerCycles {
		s := c.servers[i%len(c.servers)]
		killed := s.current().seq
		s.kill()
		if err := s.start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(prof.phase / 2)
		was, err := c.workerOf(killed)
		if err != nil {
			t.Fatal(err)
		}
		now, err := c.workerOf(s.current().seq)
		if err != nil {
			t.Fatal(err)
		}
		if now == was {
			c.violate("server %d restarted at once after kill -9 got worker id %d again, still leased to the killed process", s.idx, was)
		}
	}
	s := c.servers[len(c.servers)-1]
	if code := s.stop(); code != 0 {
		c.violate("server %d: exit %d after SIGTERM under load, want 0", s.idx, code)
	}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(prof.phase / 2)
	l.Stop()
	c.checkDistinctWorkers()
	ws := c.workers()
	var after []string
	for _, p := range sortedProcs(ws) {
		after = append(after, fmt.Sprintf("%d:%v", p, ws[p]))
	}
	c.note("%d servers started at once leased worker ids %s; by process: %s", len(c.servers), strings.Join(first, ","),
		strings.Join(after, " "))
	c.finish()
}

func sortedProcs(m map[int][]int64) []int {
	var ps []int
	for p := range m {
		ps = append(ps, p)
	}
	sort.Ints(ps)
	return ps
}

// Scenario 5b: one server loses its lease while the database is
// unreachable from it (a partition: its proxy alone refuses, or holds
// every packet), for longer than the lease (3s). It must stop issuing, and
// answer snowflake_unavailable, before its lease ends by the database's
// clock; another server started meanwhile takes the worker id it lost,
// and issues nothing the first issued; once the partition heals, the first
// notices the loss, leases another worker id and serves again.
func TestSnowflakeLeaseLost(t *testing.T) {
	enabled(t)
	for _, fault := range []string{"refused", "dropped"} {
		t.Run(fault, func(t *testing.T) { leaseLost(t, fault) })
	}
}

func leaseLost(t *testing.T, fault string) {
	const ttl = 3 * time.Second
	c := newCluster(t, "5b snowflake lease lost, packets "+fault, clusterOptions{servers: 3, env: []string{
		"LEAFD_SEGMENT_ENABLED=false", "LEAFD_SNOWFLAKE_LEASE_TTL=" + ttl.String()}})
	a, b, late := c.servers[0], c.servers[1], c.servers[2]
	var cut, healed time.Time
	// The lease is renewed every third of the TTL and lasts until a tenth
	// before its end: a server cut off keeps issuing for at least
	// ttl - ttl/3 - ttl/10 (1.7s), and must have stopped by ttl.
	keepsIssuing := ttl - ttl/3 - ttl/10 - 200*time.Millisecond
	c.allowed = func(o *outcome) bool {
		return o.proc == 0 && o.code == "snowflake_unavailable" && !o.sent.Before(cut.Add(keepsIssuing)) && o.sent.Before(healed)
	}
	for _, s := range []*server{a, b} { // in turn: a leases worker id 0, b 1
		if err := s.start(); err != nil {
			t.Fatal(err)
		}
	}
	pa := a.current().seq
	l := c.startLoad(loadSpec{snowflake: true, servers: []*server{a, b}})
	time.Sleep(prof.phase)
	lost, err := c.workerOf(pa)
	if err != nil {
		t.Fatal(err)
	}
	cut = time.Now()
	if fault == "refused" {
		a.proxy.Down()
	} else {
		a.proxy.Stall()
	}
	// Past the lease by the database's clock (its last renewal was before
	// the cut), and past the watermark the lease recorded.
	time.Sleep(ttl + 1200*time.Millisecond)
	if err := late.start(); err != nil {
		t.Fatal(err)
	}
	l2 := c.startLoad(loadSpec{snowflake: true, servers: []*server{late}})
	time.Sleep(time.Second)
	healed = time.Now()
	a.proxy.Up()
	// The load keeps asking a: it must serve again, under another worker id.
	var recovered time.Time
	if err := testenv.Eventually(t.Context(), 15*time.Second, 50*time.Millisecond, func() error {
		ok := c.outcomesOf(func(o *outcome) bool { return o.proc == pa && o.status == 200 && o.sent.After(healed) })
		if len(ok) == 0 {
			return errors.New("no 200 from server 0 since the partition healed")
		}
		recovered = ok[0].sent
		return nil
	}); err != nil {
		t.Fatalf("server 0 did not serve again within 15s of the partition healing: %v", err)
	}
	time.Sleep(prof.phase)
	l.Stop()
	l2.Stop()

	// a stopped issuing before its lease ended, and said so.
	leaseEnd := cut.Add(ttl).UnixMilli()
	var lastOld int64
	for _, id := range c.sfIDsOf(pa) {
		if sfWorker(id) != lost {
			continue
		}
		lastOld = max(lastOld, sfUnixMs(id))
		if sfUnixMs(id) >= leaseEnd {
			c.violate("server 0 issued ID %d at %s under worker id %d, after its lease ended (cut at %s + %v)",
				id, msTime(sfUnixMs(id)), lost, msTime(cut.UnixMilli()), ttl)
		}
	}
	refused := c.outcomesOf(func(o *outcome) bool {
		return o.proc == pa && o.code == "snowflake_unavailable" && o.sent.After(cut) && o.sent.Before(healed)
	})
	if len(refused) == 0 {
		c.violate("server 0 never answered snowflake_unavailable while cut off for %v", healed.Sub(cut).Round(time.Millisecond))
	}
	// Nothing can be leased while cut off: no 200 may come from it between
	// the end of its lease and the healing (a request sent meanwhile and
	// answered after the healing may succeed, under a new lease).
	for _, o := range c.outcomesOf(func(o *outcome) bool {
		done := o.sent.Add(o.took)
		return o.proc == pa && o.status == 200 && !done.Before(cut.Add(ttl)) && done.Before(healed)
	}) {
		c.violate("server 0 answered 200 %v after it was cut off, past its lease", o.sent.Add(o.took).Sub(cut).Round(time.Millisecond))
	}
	// The late server took the lost worker id, strictly after a's last ID
	// under it.
	pl := late.current().seq
	took, err := c.workerOf(pl)
	if err != nil {
		t.Fatal(err)
	}
	if took != lost {
		c.violate("premise: the server started during the partition leased worker id %d, not %d, which server 0 lost", took, lost)
	}
	if ids := c.sfIDsOf(pl); len(ids) > 0 && sfUnixMs(ids[0]) <= lastOld {
		c.violate("worker id %d: the new holder's first ID is at %s, not after server 0's last under it at %s",
			lost, msTime(sfUnixMs(ids[0])), msTime(lastOld))
	}
	// a serves again under a worker id of its own.
	var again []int64
	for _, w := range c.workers()[pa] {
		if w != lost {
			again = append(again, w)
		}
	}
	wb, _ := c.workerOf(b.current().seq)
	if len(again) != 1 || again[0] == took || again[0] == wb {
		c.violate("server 0 after the partition issued under worker ids %v (b has %d, the late server %d)", c.workers()[pa], wb, took)
	}
	c.checkDistinctWorkers()
	served := cut
	if ok := c.outcomesOf(func(o *outcome) bool {
		return o.proc == pa && o.status == 200 && o.sent.After(cut) && o.sent.Add(o.took).Before(healed)
	}); len(ok) > 0 {
		served = ok[len(ok)-1].sent.Add(ok[len(ok)-1].took)
	}
	c.note("lease %v; server 0 cut off at %s, last ID under worker %d at +%v, last 200 answered at +%v; the late server leased worker %d; "+
		"server 0 served again %v after the partition healed, as worker %v",
		ttl, msTime(cut.UnixMilli()), lost, time.Duration(lastOld-cut.UnixMilli())*time.Millisecond, served.Sub(cut).Round(time.Millisecond),
		took, recovered.Sub(healed).Round(time.Millisecond), again)
	c.finish()
}
