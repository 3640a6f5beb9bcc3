package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/testenv"
)

// Tags of scenario 10: steady serves throughout; updated is rewound by an
// UPDATE of its max_id, recreated by deleting its row and inserting it
// again by SQL with max_id 1, as a Leaf user would.
const (
	rwUpdated   = "u"
	rwRecreated = "d"
)

var rwTags = []string{"a", "b", rwUpdated, rwRecreated}

// Scenario 10: three servers under load on several tags; one tag rewound by
// `UPDATE leaf_alloc SET max_id = 1`, another deleted and inserted again by
// SQL. Every server answers those two 503 tag_rewound
// (after the IDs it had buffered), never an ID issued before, while the
// other tags keep serving; a server killed with kill -9 and restarted while
// they are rewound refuses them too (the mark is in the database). Both are
// repaired with POST /api/tags/{tag}/repair and serve again on every server,
// from their high-water marks. No ID is issued twice over the whole run,
// and each connection's IDs of a tag only grow.
func TestRewoundTagsRepaired(t *testing.T) {
	enabled(t)
	c := newCluster(t, "10 rewound tags: refused under load, kill -9, repaired", clusterOptions{env: []string{
		"LEAFD_SEGMENT_SEED_TAGS=a:20 b:100 u:20 d:20", "LEAFD_SEGMENT_MAX_STEP=200",
		"LEAFD_ADMIN_TOKEN=" + adminToken}})
	raw, err := sql.Open("mysql", c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := raw.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	mark := func(tag string) int64 {
		t.Helper()
		var m int64
		if err := raw.QueryRow("SELECT max_id FROM leafd_tag_highwater WHERE biz_tag = ?", tag).Scan(&m); err != nil {
			t.Fatalf("the high-water mark of %s: %v", tag, err)
		}
		return m
	}

	// Rewound answers of u and d are expected from the rewind until every
	// server serves them again; unknown_tag of d while its row is gone.
	// (allowed runs at the end, in finish.)
	var rewindAt, served time.Time
	c.allowed = func(o *outcome) bool {
		w := window{rewindAt, served}
		if served.IsZero() {
			w.to = time.Now()
		}
		switch {
		case rewindAt.IsZero() || !w.overlaps(o):
			return false
		case o.tag == rwUpdated:
			return o.code == "tag_rewound"
		case o.tag == rwRecreated:
			return o.code == "tag_rewound" || o.code == "unknown_tag"
		}
		return false
	}

	c.startAll()
	l := c.startLoad(loadSpec{tags: rwTags})
	time.Sleep(prof.phase)

	// The rewinds, mid-load.
	rewindAt = time.Now()
	exec("UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag = ?", rwUpdated)
	exec("DELETE FROM leaf_alloc WHERE biz_tag = ?", rwRecreated)
	// Past segment.tag_refresh (1s): the servers see d gone, then it comes
	// back by SQL with max_id 1. (Through POST /api/tags it would come back
	// above its mark, and not be rewound.)
	time.Sleep(1200 * time.Millisecond)
	exec("INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES (?, 1, 20)", rwRecreated)
	for _, s := range c.servers {
		c.waitRewound(s.current(), rwUpdated, rwRecreated)
	}
	refusing := time.Now()

	// A server killed while the tags are rewound knows nothing of them in
	// memory after its restart: the marks in the database refuse them.
	for i := range prof.kills {
		s := c.servers[(1+i)%len(c.servers)]
		s.kill()
		if err := s.start(); err != nil {
			t.Fatal(err)
		}
		c.waitRewound(s.current(), rwUpdated, rwRecreated)
	}
	time.Sleep(prof.phase / 2)
	repairing := time.Now()

	// The repair, through the admin API of one server: max_id raised to
	// the mark, reported with what it was.
	for _, tag := range []string{rwUpdated, rwRecreated} {
		m := mark(tag)
		code, body := c.admin(c.servers[2].current(), "POST", "/api/tags/"+tag+"/repair", "")
		var r struct {
			Tag           string `json:"tag"`
			MaxID         string `json:"max_id"`
			RaisedFrom    string `json:"raised_from"`
			HighWaterMark string `json:"high_water_mark"`
			Repaired      bool   `json:"repaired"`
		}
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			c.violate("POST /api/tags/%s/repair = %d %s: %v", tag, code, body, err)
		}
		want := fmt.Sprint(m)
		if code != 200 || !r.Repaired || r.Tag != tag || r.RaisedFrom != "1" || r.MaxID != want || r.HighWaterMark != want {
			c.violate("POST /api/tags/%s/repair = %d %s, want 200 raised from 1 to the mark %d", tag, code, body, m)
		}
		// Again: nothing left to do.
		if code, body := c.admin(c.servers[0].current(), "POST", "/api/tags/"+tag+"/repair", ""); code != 200 || !strings.Contains(body, `"repaired":false`) {
			c.violate("a second POST /api/tags/%s/repair = %d %s, want 200 unchanged", tag, code, body)
		}
	}
	// Every server serves both again, each from above the mark (checked
	// with every other ID at the end).
	if _, err := c.allReady(15*time.Second, rwTags, false); err != nil {
		c.violate("after the repair: %v", err)
	}
	served = time.Now()
	c.note("rewound: %v refusing on every server; repaired %v later; serving everywhere %v after the repair",
		refusing.Sub(rewindAt).Round(time.Millisecond), repairing.Sub(refusing).Round(time.Millisecond),
		served.Sub(repairing).Round(time.Millisecond))
	time.Sleep(prof.phase)
	l.Stop()

	// The load saw the refusals, and the other tags served on every server
	// while u and d were refused.
	c.mu.Lock()
	procs := append([]*process(nil), c.procs...)
	c.mu.Unlock()
	refused := map[string]int{}
	steady := map[int]int{}
	for _, o := range c.outcomesOf(func(*outcome) bool { return true }) {
		switch {
		case o.code == "tag_rewound":
			refused[o.tag]++
		case o.status == 200 && (o.tag == "a" || o.tag == "b") && !o.sent.Before(refusing) && o.sent.Before(repairing):
			steady[procs[o.proc].srv.idx]++
		}
	}
	for _, tag := range []string{rwUpdated, rwRecreated} {
		if refused[tag] == 0 {
			c.violate("tag %s: the load never got tag_rewound", tag)
		}
	}
	for _, s := range c.servers {
		if steady[s.idx] == 0 {
			c.violate("server %d served no ID of the other tags while u and d were rewound", s.idx)
		}
	}
	c.note("tag_rewound answers to the load: %d for u, %d for d; the other tags served throughout", refused[rwUpdated], refused[rwRecreated])
	c.finish()
}

// waitRewound asks p for each tag until it answers 503 tag_rewound, the
// message naming the repair action; IDs it hands out meanwhile (buffered
// before the rewind) go into the ledger.
func (c *cluster) waitRewound(p *process, tags ...string) {
	c.t.Helper()
	for _, tag := range tags {
		path := "/segment/" + tag
		err := testenv.Eventually(context.Background(), 15*time.Second, 5*time.Millisecond, func() error {
			code, body, err := p.get(path)
			switch {
			case err != nil:
				return err
			case code == 200:
				c.record(p, path, body)
				return fmt.Errorf("GET %s = 200", path)
			case code != 503 || !strings.Contains(body, `"tag_rewound"`):
				return fmt.Errorf("GET %s = %d %.200s", path, code, body)
			case !strings.Contains(body, "POST /api/tags/"+tag+"/repair"):
				c.violate("server %d: tag_rewound of %s does not name the repair action: %.300s", p.srv.idx, tag, body)
			}
			return nil
		})
		if err != nil {
			c.violate("server %d (process %d): tag %s never answered tag_rewound after its rewind: %v", p.srv.idx, p.seq, tag, err)
		}
	}
}

// admin sends an admin request with the token to p and returns the status
// and body; a transport error is a violation.
func (c *cluster) admin(p *process, method, path, body string) (int, string) {
	c.t.Helper()
	if p == nil {
		c.t.Fatalf("%s %s: the server is down", method, path)
	}
	req, err := http.NewRequest(method, p.addr+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := probe.Do(req)
	if err != nil {
		c.violate("%s %s: %v", method, path, err)
		return 0, ""
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}
