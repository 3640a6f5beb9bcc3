package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/faultproxy"
	"github.com/leafd/leafd/internal/testkit/pgserver"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
	shardstore "github.com/leafd/leafd/store/sharded"
)

// Scenario 11: a seeded random sequence of operator actions and faults on
// each kind of store (randomWorlds), under load. Whatever the sequence, no
// ID may come twice over every server, mode and format, and every answer
// that is not a 2xx must be a code of errors.go with the contract's status,
// never 500 internal. A server with another configuration may be refused at
// start-up (exit 1 or 2); it may never hand out an ID another server gave.
//
// LEAFD_E2E_SEED replays a run's sequences (the timing is the machine's);
// LEAFD_E2E_ACTIONS=name,… or -name,… keeps or leaves out actions.
func TestRandomOperations(t *testing.T) {
	enabled(t)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("LEAFD_E2E_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("LEAFD_E2E_SEED=%q: want a decimal number", s)
		}
	}
	actions, err := chosenActions(os.Getenv("LEAFD_E2E_ACTIONS"))
	if err != nil {
		t.Fatal(err)
	}
	// Every engine of the registry has a world of its own.
	for _, driver := range store.Drivers() {
		if !slices.ContainsFunc(randomWorlds, func(k worldKind) bool { return k.driver == driver }) {
			t.Errorf("no world of randomWorlds runs on engine %s", driver)
		}
	}
	rp := randomProfiles[prof.name]
	t.Logf("seed %d: replay with LEAFD_E2E_SEED=%d LEAFD_E2E=%s go test -count=1 -run TestRandomOperations ./e2e/", seed, seed, prof.name)
	var sequences, steps, ids int64
	for round := range rp.rounds {
		for k, kind := range randomWorlds {
			t.Run(fmt.Sprintf("%s-%d", kind.name, round), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, uint64(round*len(randomWorlds)+k)))
				w := newWorld(t, kind, rng, seed, round)
				w.run(actions, rp)
				sequences++
				steps += int64(w.step)
				ids += w.ids
			})
		}
	}
	t.Logf("seed %d: %d sequences, %d actions, %d IDs", seed, sequences, steps, ids)
	verdict := "PASS"
	if t.Failed() {
		verdict = "**FAIL**"
	}
	addRow(row{scenario: "11 random operations (all sequences)", ids: ids, verdict: verdict,
		notes: fmt.Sprintf("seed %d (LEAFD_E2E_SEED replays it): %d sequences, %d actions", seed, sequences, steps)})
}

type randomProfile struct {
	rounds, steps int
	settle        time.Duration
}

// randomProfiles sizes scenario 11: rounds of one sequence per world, steps
// per sequence, and the load's run after each step.
var randomProfiles = map[string]randomProfile{
	"short": {rounds: 1, steps: 6, settle: 500 * time.Millisecond},
	"long":  {rounds: 2, steps: 20, settle: 1500 * time.Millisecond},
}

// Settings of every world: short leases and refills so that faults bite
// within a step.
const (
	rndLease   = 3 * time.Second
	rndSlots   = 12
	rndMaxStep = 2000
)

var rndEnv = []string{"LEAFD_SEGMENT_REFILL_MIN=500ms", "LEAFD_SEGMENT_REFILL_MAX=1s",
	"LEAFD_SEGMENT_MAX_STEP=" + strconv.Itoa(rndMaxStep), "LEAFD_SNOWFLAKE_LEASE_TTL=" + rndLease.String(),
	"LEAFD_SEGMENT_OPAQUE_KEY=00112233445566778899aabbccddeeff", "LEAFD_ADMIN_TOKEN=" + adminToken,
	"LEAFD_SEGMENT_SEED_TAGS=a:50 b:500"}

// rndTags are the tags of a world: a and b are seeded, c and d created by
// the sequence; any of them may be deleted and created again in any format.
var rndTags = []string{"a", "b", "c", "d"}

// worldKind is one kind of store the sequences run on.
type worldKind struct {
	name string
	// driver is store.driver of the world's servers, the engine of its
	// databases.
	driver string
	// open makes the databases and returns the cluster's options; it sets
	// w's database fields and faults.
	open func(w *world) clusterOptions
}

var randomWorlds = []worldKind{
	{"sqlite", "sqlite", openSQLiteWorld},
	{"mariadb", "mysql", openMariaDBWorld},
	{"postgres", "postgres", openPostgresWorld},
	{"shards", "mysql", openShardsWorld},
}

// world is one sequence's store, servers and load, and what the sequence
// has done to it.
type world struct {
	t      *testing.T
	kind   string
	rng    *rand.Rand
	c      *cluster
	sqlDrv string   // database/sql driver of dbs
	dbs    []string // the databases, directly: one, or the shards
	// dbKill and dbStop are the database faults, nil where there are none
	// (SQLite): the database killed (or cut off) and back, and hung (every
	// packet held) and back.
	dbKill, dbStop func(d time.Duration)
	pg             *pgserver.Server
	sqlitePath     string
	shardProxies   []*faultproxy.Proxy // a sharded world's, one per database
	// format is each tag's format as the sequence last asked for it;
	// "" while deleted or never created. It alone chooses the steps, so
	// that a seed replays them whatever leafd answered. exists is what
	// leafd's answers say: created (201, or 409 tag_exists) and not
	// deleted since.
	format map[string]string
	exists map[string]bool
	mu     sync.Mutex // guards exists while two POSTs are in flight
	load   *load

	step   int
	action string
	// seen holds every ID checked so far, per tag ("" for snowflake), with
	// the step that brought it; checked counts the ledger entries seen.
	seen     map[string]map[int64]int
	checked  map[string]int
	outcomes int
	// found counts, per action, the duplicates that appeared in its steps;
	// first is the step in which the first appeared, its likely cause
	// (a tag that hands out old IDs goes on doing so in the steps after).
	found map[string]int
	first string
	ids   int64
	log   []string
}

func newWorld(t *testing.T, kind worldKind, rng *rand.Rand, seed uint64, round int) *world {
	w := &world{t: t, kind: kind.name, sqlDrv: testdb.SQLDriver(kind.driver), rng: rng, format: map[string]string{"a": "sequential", "b": "sequential"},
		exists: map[string]bool{"a": true, "b": true},
		seen:   map[string]map[int64]int{}, checked: map[string]int{}, found: map[string]int{}}
	o := kind.open(w)
	o.env = append(o.env, rndEnv...)
	w.c = newCluster(t, fmt.Sprintf("11 random operations: %s, seed %d round %d", kind.name, seed, round), o)
	w.c.allowed = documented
	return w
}

func openSQLiteWorld(w *world) clusterOptions {
	w.sqlitePath = filepath.Join(w.t.TempDir(), "leafd.db")
	w.dbs = []string{"file:" + w.sqlitePath + "?_pragma=busy_timeout(10000)"}
	return clusterOptions{servers: 2, driver: "sqlite", database: w.sqlitePath,
		store: func(int) (string, []string) { return "file:" + w.sqlitePath, nil }}
}

func openMariaDBWorld(w *world) clusterOptions {
	dsn := testdb.MySQL(w.t)
	w.dbs = []string{dsn}
	w.dbKill = func(d time.Duration) { w.c.databaseDown(); time.Sleep(d); w.c.databaseUp() }
	w.dbStop = func(d time.Duration) { w.c.databaseStall(); time.Sleep(d); w.c.databaseUp() }
	return clusterOptions{database: dsn}
}

func openPostgresWorld(w *world) clusterOptions {
	w.pg = pgserver.Start(w.t)
	if err := w.pg.CreateDatabase("leafd"); err != nil {
		w.t.Fatal(err)
	}
	dsn := w.pg.DSN("leafd")
	w.dbs = []string{dsn}
	// Each server reaches the database through a proxy of its own, to
	// hang it; a kill is the server's own crash.
	var proxies []*faultproxy.Proxy
	w.dbKill = func(d time.Duration) {
		if err := w.pg.Crash(); err != nil {
			w.t.Fatal(err)
		}
		time.Sleep(d)
		if err := w.pg.Start(); err != nil {
			w.t.Fatalf("PostgreSQL did not start again: %v", err)
		}
	}
	w.dbStop = func(d time.Duration) {
		for _, p := range proxies {
			p.Stall()
		}
		time.Sleep(d)
		for _, p := range proxies {
			p.Up()
		}
	}
	return clusterOptions{driver: "postgres", database: dsn, store: func(int) (string, []string) {
		p := faultproxy.New(w.t, w.pg.Addr())
		proxies = append(proxies, p)
		u, _ := url.Parse(dsn)
		u.Host = p.Addr()
		return u.String() + "&connect_timeout=2", nil
	}}
}

// openShardsWorld: store.shards over three databases of the MariaDB server,
// each behind one proxy that every server goes through, so that one
// database can be cut off or hung alone.
func openShardsWorld(w *world) clusterOptions {
	var direct, proxied []string
	var proxies []*faultproxy.Proxy
	for range 3 {
		dsn := testdb.MySQL(w.t)
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			w.t.Fatal(err)
		}
		p := faultproxy.New(w.t, cfg.Addr)
		cfg.Addr, cfg.Timeout = p.Addr(), 2*time.Second
		direct, proxied, proxies = append(direct, dsn), append(proxied, cfg.FormatDSN()), append(proxies, p)
	}
	w.dbs = direct
	fault := func(down bool) func(time.Duration) {
		return func(d time.Duration) {
			p := proxies[w.rng.IntN(len(proxies))]
			if down {
				p.Down()
			} else {
				p.Stall()
			}
			time.Sleep(d)
			p.Up()
		}
	}
	w.dbKill, w.dbStop = fault(true), fault(false)
	w.shardProxies = proxies
	return clusterOptions{database: direct[0], shards: direct, store: func(int) (string, []string) {
		return proxied[0], []string{"LEAFD_STORE_SHARDS=" + strings.Join(proxied, " "),
			"LEAFD_STORE_SHARD_SLOTS=" + strconv.Itoa(rndSlots)}
	}}
}

// documented says whether a failed answer is one the contract allows in
// some state of the world: a code of errors.go with its status (every
// error of the Leaf-compatible routes is 500 with the code in the body),
// never internal.
func documented(o *outcome) bool {
	status, ok := leafd.HTTPStatus(o.code)
	if !ok || o.code == leafd.EInternal {
		return false
	}
	leaf := strings.HasPrefix(o.path, "/api/segment/get/") || strings.HasPrefix(o.path, "/api/snowflake/get/")
	return o.status == status || leaf && o.status == 500
}

// action is one entry of the vocabulary: a precondition on the world and
// what it does, returning what happened for the step's log line.
type action struct {
	name string
	can  func(w *world) bool
	do   func(w *world) string
}

var vocabulary = []action{
	{"create", hasTag(false), (*world).create},
	{"retry-post", always, (*world).retryPost},
	{"delete-sql", hasTag(true), (*world).deleteSQL},
	{"set-step", hasTag(true), (*world).setStep},
	{"lower-max-id", both(unsharded, hasTag(true)), (*world).lowerMaxID},
	{"repair", both(unsharded, hasTag(true)), (*world).repair},
	{"restart", always, (*world).restart},
	{"kill-9", always, (*world).kill9},
	{"sigstop", always, (*world).sigstop},
	{"db-kill", func(w *world) bool { return w.dbKill != nil }, (*world).databaseKill},
	{"db-stop", func(w *world) bool { return w.dbStop != nil }, (*world).databaseStop},
	{"move-slot", sharded, (*world).moveSlot},
	{"create-shard-down", both(sharded, hasTag(false)), (*world).createShardDown},
	{"start-other-shards", sharded, (*world).startOtherShards},
	{"start-other-epoch", always, (*world).startOtherEpoch},
	{"start-unix-none", func(w *world) bool { return w.kind == "sqlite" }, (*world).startUnixNone},
	{"start-pg-spaces", func(w *world) bool { return w.kind == "postgres" }, (*world).startPGSpaces},
}

func always(*world) bool      { return true }
func sharded(w *world) bool   { return w.c.shards != nil }
func unsharded(w *world) bool { return w.c.shards == nil }
func both(a, b func(*world) bool) func(*world) bool {
	return func(w *world) bool { return a(w) && b(w) }
}

// hasTag: some tag of the world exists (or, with false, does not).
func hasTag(exists bool) func(*world) bool {
	return func(w *world) bool { return len(w.tagsWhere(exists)) > 0 }
}

func (w *world) tagsWhere(exists bool) []string {
	var out []string
	for _, tag := range rndTags {
		if (w.format[tag] != "") == exists {
			out = append(out, tag)
		}
	}
	return out
}

// chosenActions reads LEAFD_E2E_ACTIONS: empty for every action, a list of
// names to keep, or of -names to leave out.
func chosenActions(spec string) ([]action, error) {
	if spec == "" {
		return vocabulary, nil
	}
	names := strings.Split(spec, ",")
	exclude := strings.HasPrefix(names[0], "-")
	var out []action
	for _, a := range vocabulary {
		listed := slices.Contains(names, a.name) || slices.Contains(names, "-"+a.name)
		if listed != exclude {
			out = append(out, a)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(vocabulary, func(a action) bool { return a.name == strings.TrimPrefix(n, "-") }) {
			return nil, fmt.Errorf("LEAFD_E2E_ACTIONS: no action %q", n)
		}
	}
	return out, nil
}

// run starts the world under load, runs the sequence and checks the
// invariants after each step and at the end.
func (w *world) run(actions []action, rp randomProfile) {
	w.c.startAll()
	w.load = w.c.startLoad(loadSpec{tags: rndTags, snowflake: true, ranges: true, anyOrder: true, clients: 2})
	time.Sleep(rp.settle)
	w.action = "start"
	w.check()
	for range rp.steps {
		var can []action
		for _, a := range actions {
			if a.can(w) {
				can = append(can, a)
			}
		}
		if len(can) == 0 {
			w.t.Logf("step %d: no action of LEAFD_E2E_ACTIONS can run here; the sequence ends", w.step+1)
			break
		}
		a := can[w.rng.IntN(len(can))]
		w.step++
		w.action = a.name
		began := time.Now()
		what := a.do(w)
		time.Sleep(rp.settle)
		line := fmt.Sprintf("step %d %s: %s (%v)", w.step, a.name, what, time.Since(began).Round(time.Millisecond))
		w.log = append(w.log, a.name)
		w.t.Log(line)
		w.check()
	}
	w.load.Stop()
	w.action = "end"
	w.finish()
}

// check is the invariant check after a step: no ID that came before
// (naming the steps of both), the failed answers of the step documented,
// and every server of the world still running.
func (w *world) check() {
	c := w.c
	c.ledger.mu.Lock()
	type dup struct {
		tag   string
		id    int64
		first int
	}
	var dups []dup
	scan := func(tag string, got *stamps) {
		set := w.seen[tag]
		if set == nil {
			set = map[int64]int{}
			w.seen[tag] = set
		}
		for s := range got.from(w.checked[tag]) {
			if first, ok := set[s.id]; ok {
				dups = append(dups, dup{tag, s.id, first})
				continue
			}
			set[s.id] = w.step
		}
		w.ids += int64(got.len() - w.checked[tag])
		w.checked[tag] = got.len()
	}
	for tag, got := range c.ledger.seg {
		scan(tag, got)
	}
	scan("", &c.ledger.sf)
	c.ledger.mu.Unlock()
	if len(dups) > 0 {
		w.found[w.action] += len(dups)
		if w.first == "" {
			w.first = fmt.Sprintf("step %d %s", w.step, w.action)
		}
		for i, d := range dups[:min(3, len(dups))] {
			what := "snowflake ID"
			if d.tag != "" {
				what = "ID of tag " + d.tag
			}
			c.violate("step %d %s: %s %d issued again (first seen after step %d) [%d of %d]", w.step, w.action, what, d.id, d.first, i+1, len(dups))
		}
	}
	bad := map[string]int{}
	c.mu.Lock()
	for i := w.outcomes; i < len(c.outcomes); i++ {
		if o := &c.outcomes[i]; o.status != 0 && o.status != 200 && !documented(o) {
			bad[fmt.Sprintf("%d %s", o.status, o.code)]++
		}
	}
	w.outcomes = len(c.outcomes)
	c.mu.Unlock()
	if len(bad) > 0 {
		w.t.Logf("step %d %s: answers that are not the contract's: %v", w.step, w.action, bad)
	}
	for _, s := range c.servers {
		if p := s.current(); p != nil && p.Exited() {
			c.violate("step %d %s: server %d (process %d) exited by itself, %v", w.step, w.action, s.idx, p.seq, p.State())
			s.takeDown()
		}
	}
}

// finish stops the servers (each must exit 0) and checks every ID and
// answer of the sequence.
func (w *world) finish() {
	c := w.c
	for _, s := range c.servers {
		if code := s.stop(); code != 0 {
			c.violate("server %d: exit %d after SIGTERM, want 0", s.idx, code)
		}
	}
	// IDs of an opaque tag lie anywhere in its domain, and a tag may end
	// deleted: the bound is the duplicate check alone.
	unbounded := map[string]int64{}
	c.ledger.mu.Lock()
	for tag := range c.ledger.seg {
		unbounded[tag] = math.MaxInt64
	}
	c.ledger.mu.Unlock()
	c.checkIDs(unbounded)
	c.checkOutcomes()
	var found []string
	for _, name := range sortedKeys(w.found) {
		found = append(found, fmt.Sprintf("%s ×%d", name, w.found[name]))
	}
	if len(found) == 0 {
		found = []string{"none"}
	} else {
		found = append(found, "the first in "+w.first)
	}
	c.note("%d steps: %s; %d IDs; duplicates appeared in: %s", w.step, strings.Join(w.log, ", "), w.ids, strings.Join(found, ", "))
}

// server picks a running server of the world.
func (w *world) server() *server {
	var up []*server
	for _, s := range w.c.servers[:w.mainServers()] {
		if s.current() != nil {
			up = append(up, s)
		}
	}
	if len(up) == 0 {
		w.t.Fatalf("step %d %s: no server is running", w.step, w.action)
	}
	return up[w.rng.IntN(len(up))]
}

// mainServers is how many servers the world started with; later ones ran
// beside it with other configurations.
func (w *world) mainServers() int { return len(w.load.spec.servers) }

// adminCall sends an admin request and checks its answer: a 2xx, or a
// documented code with its status. It returns the status and the code.
func (w *world) adminCall(s *server, method, path, body string) (int, string) {
	p := s.current()
	if p == nil {
		return 0, "server down"
	}
	status, text := w.c.admin(p, method, path, body)
	if status == 0 || status/100 == 2 {
		return status, ""
	}
	var e struct{ Error struct{ Code string } }
	_ = json.Unmarshal([]byte(text), &e)
	if want, ok := leafd.HTTPStatus(e.Error.Code); !ok || e.Error.Code == leafd.EInternal || want != status {
		w.c.violate("step %d %s: %s %s answered %d %.300s: not a documented code with its status", w.step, w.action, method, path, status, text)
	}
	return status, e.Error.Code
}

// createBody is a POST /api/tags body for tag in a random format: dated
// too, unless the store is sharded (which holds no dated tag).
func (w *world) createBody(tag string) (string, string) {
	step := 1 + w.rng.IntN(rndMaxStep)
	formats := 3
	if unsharded(w) {
		formats = 4
	}
	switch w.rng.IntN(formats) {
	case 0:
		return "sequential", fmt.Sprintf(`{"tag":%q,"step":%d}`, tag, step)
	case 1:
		return "opaque", fmt.Sprintf(`{"tag":%q,"step":%d,"format":"opaque"}`, tag, step)
	case 3:
		// Few digits, so that a number handed out again in the day is
		// likely to meet one handed out before, and the day may fill.
		zone := pick(w, []string{"UTC", "Asia/Shanghai", "America/New_York"})
		return "dated", fmt.Sprintf(`{"tag":%q,"step":%d,"format":"dated","period":"day","zone":%q,"digits":%d}`,
			tag, step, zone, 3+w.rng.IntN(4))
	}
	// A small domain, so that an ID handed out again in it is likely to
	// meet one handed out before.
	d := 6 + w.rng.IntN(3)
	return "opaque", fmt.Sprintf(`{"tag":%q,"step":%d,"format":"opaque","digits":%d}`, tag, step, d)
}

func pick[T any](w *world, from []T) T { return from[w.rng.IntN(len(from))] }

// create: POST /api/tags of a tag that does not exist (never did, or was
// deleted: then it is created again), in any format.
func (w *world) create() string {
	tag := pick(w, w.tagsWhere(false))
	format, body := w.createBody(tag)
	w.format[tag] = format
	status, code := w.post(w.server(), tag, body)
	return fmt.Sprintf("%s → %d %s", body, status, code)
}

// post sends POST /api/tags of tag with body to s and notes whether the
// answer says the tag exists.
func (w *world) post(s *server, tag, body string) (int, string) {
	status, code := w.adminCall(s, "POST", "/api/tags", body)
	if status == 201 || code == leafd.ETagExists {
		w.mu.Lock()
		w.exists[tag] = true
		w.mu.Unlock()
	}
	return status, code
}

// retryPost: the same POST /api/tags to two servers at once, as a client
// retrying over a load balancer. At most one may create the tag.
func (w *world) retryPost() string {
	tag := pick(w, rndTags)
	format, body := w.createBody(tag)
	existed := w.exists[tag]
	if w.format[tag] == "" {
		w.format[tag] = format
	}
	a, b := w.server(), w.server()
	var wg sync.WaitGroup
	var sa, sb int
	var ca, cb string
	wg.Go(func() { sa, ca = w.post(a, tag, body) })
	wg.Go(func() { sb, cb = w.post(b, tag, body) })
	wg.Wait()
	if sa == 201 && sb == 201 {
		w.c.violate("step %d %s: POST %s created the tag twice (201 from servers %d and %d)", w.step, w.action, body, a.idx, b.idx)
	}
	if existed && (sa == 201 || sb == 201) {
		w.c.violate("step %d %s: POST %s of a tag that exists answered 201, want 409 tag_exists", w.step, w.action, body)
	}
	return fmt.Sprintf("%s twice → %d %s, %d %s", body, sa, ca, sb, cb)
}

// exec runs statement q on database i, with MySQL's ? placeholders.
func (w *world) exec(i int, q string, args ...any) (int64, error) {
	db, err := sql.Open(w.sqlDrv, w.dbs[i])
	if err != nil {
		return 0, err
	}
	defer db.Close()
	q = sqlx.Rebind(sqlx.BindType(w.sqlDrv), q)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := db.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// deleteSQL: DELETE of a tag's leaf_alloc row, as an operator would do by
// hand (the admin API has no delete); on a sharded store from one
// database or all.
func (w *world) deleteSQL() string {
	tag := pick(w, w.tagsWhere(true))
	w.format[tag] = ""
	w.exists[tag] = false
	dbs := []int{0}
	if len(w.dbs) > 1 {
		dbs = []int{w.rng.IntN(len(w.dbs))}
		if w.rng.IntN(2) == 0 {
			dbs = []int{0, 1, 2}
		}
	}
	var rows int64
	for _, i := range dbs {
		n, err := w.exec(i, "DELETE FROM leaf_alloc WHERE biz_tag = ?", tag)
		if err != nil {
			w.t.Fatalf("step %d: deleting %s: %v", w.step, tag, err)
		}
		rows += n
	}
	return fmt.Sprintf("%s from databases %v: %d rows", tag, dbs, rows)
}

func (w *world) setStep() string {
	tag := pick(w, w.tagsWhere(true))
	body := fmt.Sprintf(`{"step":%d}`, 1+w.rng.IntN(rndMaxStep))
	status, code := w.adminCall(w.server(), "PATCH", "/api/tags/"+tag, body)
	return fmt.Sprintf("%s %s → %d %s", tag, body, status, code)
}

// lowerMaxID: UPDATE of a tag's max_id to 1 or to half of it.
func (w *world) lowerMaxID() string {
	tag := pick(w, w.tagsWhere(true))
	q := "UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag = ?"
	if w.rng.IntN(2) == 0 {
		q = "UPDATE leaf_alloc SET max_id = max_id / 2 + 1 WHERE biz_tag = ?"
	}
	n, err := w.exec(0, q, tag)
	if err != nil {
		w.t.Fatalf("step %d: %s: %v", w.step, q, err)
	}
	return fmt.Sprintf("%q of %s: %d rows", q, tag, n)
}

func (w *world) repair() string {
	tag := pick(w, w.tagsWhere(true))
	status, code := w.adminCall(w.server(), "POST", "/api/tags/"+tag+"/repair", "")
	return fmt.Sprintf("%s → %d %s", tag, status, code)
}

// restart: SIGTERM under load (exit 0), started again.
func (w *world) restart() string {
	s := w.server()
	if code := s.stop(); code != 0 {
		w.c.violate("step %d %s: server %d exit %d after SIGTERM, want 0", w.step, w.action, s.idx, code)
	}
	w.startAgain(s)
	return fmt.Sprintf("server %d", s.idx)
}

// startAgain starts s after a stop or kill; a failure to start is fatal.
func (w *world) startAgain(s *server) {
	if err := s.start(); err != nil {
		w.t.Fatalf("step %d %s: server %d did not start again: %v", w.step, w.action, s.idx, err)
	}
}

func (w *world) kill9() string {
	s := w.server()
	s.kill()
	w.startAgain(s)
	return fmt.Sprintf("server %d", s.idx)
}

// sigstop: a server paused with SIGSTOP past its snowflake lease, then
// continued. It must notice that it lost the lease before it issues again.
func (w *world) sigstop() string {
	s := w.server()
	p := s.takeDown()
	from := time.Now()
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		w.t.Fatal(err)
	}
	pause := rndLease + time.Duration(w.rng.IntN(2000))*time.Millisecond
	time.Sleep(pause)
	if err := p.Signal(syscall.SIGCONT); err != nil {
		w.t.Fatal(err)
	}
	// A paused server may hold the SQLite file's lock, or a tag's row lock
	// in the middle of a range load, which the others then wait for.
	w.late(from)
	if err := p.waitReady(30 * time.Second); err != nil {
		w.t.Fatalf("step %d %s: %v", w.step, w.action, err)
	}
	s.mu.Lock()
	s.cur = p
	s.mu.Unlock()
	return fmt.Sprintf("server %d for %v", s.idx, pause)
}

func (w *world) databaseKill() string {
	d := time.Duration(500+w.rng.IntN(2500)) * time.Millisecond
	w.dbKill(d)
	return fmt.Sprintf("down %v", d)
}

func (w *world) databaseStop() string {
	d := time.Duration(500+w.rng.IntN(2500)) * time.Millisecond
	from := time.Now()
	w.dbStop(d)
	w.late(from)
	return fmt.Sprintf("hung %v", d)
}

// late lets every process of the world answer late what it was asked from
// from until now.
func (w *world) late(from time.Time) {
	w.c.mu.Lock()
	procs := slices.Clone(w.c.procs)
	w.c.mu.Unlock()
	for _, p := range procs {
		p.late.add(from, time.Now())
	}
}

// moveSlot moves a random slot to a random database under load.
func (w *world) moveSlot() string {
	sh, err := shardstore.Open("mysql", w.dbs, shardstore.Options{Slots: rndSlots, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		w.t.Fatal(err)
	}
	defer sh.Close()
	k, to := int64(w.rng.IntN(rndSlots)), w.rng.IntN(len(w.dbs))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := sh.MoveSlot(ctx, k, to, nil); err != nil {
		return fmt.Sprintf("slot %d to database %d: %v", k, to, err)
	}
	return fmt.Sprintf("slot %d to database %d", k, to)
}

// createShardDown: POST /api/tags of a new tag while the first database
// is cut off, then the same tag again, in another format, once it is back.
// The contract's answer to the second is 409 tag_exists; never two
// definitions (or a refusal of the first while a database is down).
func (w *world) createShardDown() string {
	tag := pick(w, w.tagsWhere(false))
	format, body := w.createBody(tag)
	w.format[tag] = format
	w.shardProxies[0].Down()
	s1, c1 := w.post(w.server(), tag, body)
	w.shardProxies[0].Up()
	_, again := w.createBody(tag)
	s2, c2 := w.post(w.server(), tag, again)
	if s1 == 201 && s2 == 201 {
		w.c.violate("step %d %s: POST %s after %s answered 201 twice, want 409 tag_exists", w.step, w.action, again, body)
	}
	return fmt.Sprintf("%s with database 0 down → %d %s; %s with it up → %d %s", body, s1, c1, again, s2, c2)
}

// side describes a server started beside the world's with another
// configuration.
type side struct {
	proxy      *faultproxy.Proxy // the database's, for faults; nil if none
	dsn        string
	env        []string
	epochShift int64
}

// beside starts servers with other configurations at once, puts them under
// load on tags for a while, and stops them. Each may be refused at start-up
// (exit 1 or 2, its log saying why); once serving, it must not hand out an
// ID another server gave (the world's checks).
func (w *world) beside(tags []string, snowflake bool, sides ...side) string {
	c := w.c
	var servers []*server
	for _, sd := range sides {
		s := &server{c: c, idx: len(c.servers), proxy: sd.proxy, dsn: sd.dsn, env: sd.env, epochShift: sd.epochShift}
		c.servers = append(c.servers, s)
		servers = append(servers, s)
	}
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() {
			// Ready within seconds, or refused: a server that retries a
			// mismatch with the deployment's records forever is neither.
			p, err := s.launch()
			if err == nil {
				err = p.waitReady(15 * time.Second)
			}
			if err == nil {
				s.mu.Lock()
				s.cur = p
				s.mu.Unlock()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	var what []string
	var serving []*server
	for i, s := range servers {
		if errs[i] == nil {
			serving = append(serving, s)
			what = append(what, fmt.Sprintf("server %d serving", s.idx))
			continue
		}
		p := w.lastProcess(s)
		if p == nil {
			w.t.Fatalf("step %d %s: server %d: %v", w.step, w.action, s.idx, errs[i])
		}
		p.mu.Lock()
		p.stopped = true // its refused connections are expected
		p.mu.Unlock()
		exited := p.Exited()
		code, _ := p.Stop(10 * time.Second)
		switch {
		case !exited:
			c.violate("step %d %s: server %d neither served nor was refused at start-up: %v", w.step, w.action, s.idx, errs[i])
			what = append(what, fmt.Sprintf("server %d never ready: %s", s.idx, lastWarning(p)))
		case code != 1 && code != 2:
			c.violate("step %d %s: server %d exited %d at start-up, want 1 or 2: %v", w.step, w.action, s.idx, code, errs[i])
			fallthrough
		default:
			what = append(what, fmt.Sprintf("server %d refused at start-up, exit %d: %s", s.idx, code, refusal(p)))
		}
	}
	if len(serving) > 0 {
		l := c.startLoad(loadSpec{tags: tags, snowflake: snowflake, clients: 2, servers: serving, anyOrder: true})
		time.Sleep(time.Second + time.Duration(w.rng.IntN(2000))*time.Millisecond)
		l.Stop()
		for _, s := range serving {
			if p := s.current(); p != nil && p.Exited() {
				// A mismatch with the deployment's records found while
				// serving stops the server with exit 1: the requests it
				// cut are expected.
				s.takeDown()
				p.mu.Lock()
				p.killed = true
				p.mu.Unlock()
				if code := p.Wait(); code != 1 {
					c.violate("step %d %s: server %d stopped by itself with exit %d", w.step, w.action, s.idx, code)
				}
				what = append(what, fmt.Sprintf("server %d stopped by itself, %v: %s", s.idx, p.State(), refusal(p)))
				continue
			}
			if code := s.stop(); code != 0 {
				c.violate("step %d %s: server %d exit %d after SIGTERM, want 0", w.step, w.action, s.idx, code)
			}
		}
	}
	return strings.Join(what, "; ")
}

// lastProcess is the last process started in s.
func (w *world) lastProcess(s *server) *process {
	w.c.mu.Lock()
	defer w.c.mu.Unlock()
	for i := len(w.c.procs) - 1; i >= 0; i-- {
		if w.c.procs[i].srv == s {
			return w.c.procs[i]
		}
	}
	return nil
}

// lastWarning is the last WARN or ERROR line of a server's log, shortened:
// why it is not ready.
func lastWarning(p *process) string {
	lines := strings.Split(strings.TrimSpace(p.Output()), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], `"level":"WARN"`) || strings.Contains(lines[i], `"level":"ERROR"`) {
			return shorten(lines[i])
		}
	}
	return "no warning in its log"
}

func shorten(line string) string {
	if len(line) > 200 {
		return line[:200] + "…"
	}
	return line
}

// refusal is the last line of a refused server's log, shortened.
func refusal(p *process) string {
	lines := strings.Split(strings.TrimSpace(p.Output()), "\n")
	return shorten(lines[len(lines)-1])
}

// sideTag names the tag of a deployment started beside the world's, its
// own in the ledger: x and the step's number.
func (w *world) sideTag() string { return "x" + strconv.Itoa(w.step) }

// startOtherShards: two servers started together on new databases with
// different store.shards lists ([x y] and [x z]), both setting sharding up.
// Their tag is their own (sideTag) and snowflake off: they are a deployment of
// their own, and only may not hand out one ID twice.
func (w *world) startOtherShards() string {
	x, y, z := testdb.MySQL(w.t), testdb.MySQL(w.t), testdb.MySQL(w.t)
	tag := w.sideTag()
	env := func(dbs ...string) []string {
		return []string{"LEAFD_STORE_SHARDS=" + strings.Join(dbs, " "), "LEAFD_SEGMENT_SEED_TAGS=" + tag + ":100",
			"LEAFD_SNOWFLAKE_ENABLED=false"}
	}
	return w.beside([]string{tag}, false, side{dsn: x, env: env(x, y)}, side{dsn: x, env: env(x, z)})
}

// startOtherEpoch: a server killed with kill -9, and once its lease has
// expired another started with a later snowflake.epoch on the same lease
// table, by as much as the killed one had run: if it takes the lost worker
// id, its IDs' times are those the killed one issued at.
func (w *world) startOtherEpoch() string {
	s := w.server()
	p := s.current()
	s.kill()
	killedAt := time.Now()
	time.Sleep(rndLease + 500*time.Millisecond)
	mid := p.Started().Add(killedAt.Sub(p.Started()) / 2)
	shift := time.Since(mid).Milliseconds()
	what := w.beside(rndTags, true, side{proxy: s.proxy, dsn: s.dsn, env: append(slices.Clone(s.env),
		"LEAFD_SNOWFLAKE_EPOCH="+strconv.FormatInt(sfEpoch+shift, 10)), epochShift: shift})
	w.startAgain(s)
	return fmt.Sprintf("server %d killed; epoch +%dms: %s", s.idx, shift, what)
}

// startUnixNone: three servers started together on a new SQLite file with
// vfs=unix-none, which takes no file locks. Their tag is their own,
// snowflake off.
func (w *world) startUnixNone() string {
	dsn := "file:" + filepath.Join(w.t.TempDir(), "nolock.db") + "?vfs=unix-none"
	tag := w.sideTag()
	sd := side{dsn: dsn, env: []string{"LEAFD_SEGMENT_SEED_TAGS=" + tag + ":100", "LEAFD_SNOWFLAKE_ENABLED=false"}}
	return w.beside([]string{tag}, false, sd, sd, sd)
}

// startPGSpaces: a server given the world's PostgreSQL database as a libpq
// key/value DSN with spaces around '=', store.driver left at its default.
func (w *world) startPGSpaces() string {
	host, port, _ := strings.Cut(w.pg.Addr(), ":")
	dsn := fmt.Sprintf("host = %s port = %s user = root dbname = leafd sslmode = disable", host, port)
	return w.beside(rndTags, true, side{dsn: dsn, env: []string{"LEAFD_STORE_DRIVER="}})
}
