package segment_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

// issuedLog collects every ID the servers of a test hand out and finds the
// ones handed out twice.
type issuedLog struct {
	mu    sync.Mutex
	seen  map[int64]int // ID → index of the server that issued it
	dupes []string
	n     int
}

func (l *issuedLog) add(server int, rs []segment.Range) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[int64]int{}
	}
	for _, r := range rs {
		for id := r.Start; id < r.End; id++ {
			if first, dup := l.seen[id]; dup && len(l.dupes) < 10 {
				l.dupes = append(l.dupes, fmt.Sprintf("ID %d by server %d and by server %d", id, first, server))
			}
			l.seen[id] = server
			l.n++
		}
	}
}

// rewindServers are the allocators (servers) of TestRewoundTagNeverReissues,
// each over a store of its own on one database.
type rewindServers struct {
	t   *testing.T
	db  *database
	cfg segment.Config
	as  []*segment.Allocator
	log issuedLog
}

func (s *rewindServers) start(i int) {
	a, err := segment.New(s.db.store(s.t), s.cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := a.Refresh(context.Background()); err != nil {
		s.t.Fatal(err)
	}
	a.Start()
	s.t.Cleanup(func() { a.Close() })
	s.as[i] = a
}

// load asks every server for IDs of tag from several goroutines at once
// until stop says so, and returns, per server, the error codes of its
// answers in order ("" for IDs).
func (s *rewindServers) load(tag string, stop func(i int, codes []string) bool) [][]string {
	const goroutines = 4
	codes := make([][]string, len(s.as))
	var wg sync.WaitGroup
	for i, a := range s.as {
		var (
			mu   sync.Mutex
			done atomic.Bool
		)
		for g := range goroutines {
			wg.Go(func() {
				deadline := time.Now().Add(20 * time.Second)
				for n := 0; !done.Load(); n++ {
					rs, err := a.NextN(context.Background(), tag, 1+(g*7+n)%20, nil)
					if err == nil {
						s.log.add(i, rs)
					}
					mu.Lock()
					codes[i] = append(codes[i], code(err))
					if stop(i, codes[i]) || time.Now().After(deadline) {
						done.Store(true)
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	return codes
}

// untilRewound stops a server's load once it answered tag_rewound 50 times.
func untilRewound(_ int, codes []string) bool {
	n := 0
	for _, c := range codes {
		if c == leafd.ETagRewound {
			n++
		}
	}
	return n >= 50
}

// checkRewound checks that, after a rewind, a server answered only IDs
// (those it had buffered, from ranges handed out before the rewind) and
// tag_rewound; that once its buffers are dry every request is answered
// tag_rewound; that the tag shows failing with the cause; and that the
// server stays ready.
func (s *rewindServers) checkRewound(what string, codes [][]string) {
	s.t.Helper()
	for i, cs := range codes {
		rewound := 0
		for _, c := range cs {
			switch c {
			case leafd.ETagRewound:
				rewound++
			case "":
			default:
				s.t.Fatalf("%s: server %d answered %q", what, i, c)
			}
		}
		if rewound == 0 {
			s.t.Fatalf("%s: server %d never answered tag_rewound in %d answers", what, i, len(cs))
		}
		for range 5 {
			if rs, err := s.as[i].NextN(context.Background(), "order", 3, nil); code(err) != leafd.ETagRewound {
				s.t.Fatalf("%s: server %d answered %v, %v once dry; want tag_rewound", what, i, rs, err)
			}
		}
		st, _ := s.as[i].TagState("order")
		if st.Status != segment.StatusFailing || code(st.Err) != leafd.ETagRewound {
			s.t.Fatalf("%s: server %d shows the tag %s with error %v, want failing with tag_rewound", what, i, st.Status, st.Err)
		}
		if err := s.as[i].Ready(); err != nil {
			s.t.Fatalf("%s: server %d is not ready: %v", what, i, err)
		}
	}
	_, err := s.as[0].Next(context.Background(), "order")
	msg := leafd.ErrorMessage(err)
	action, sql := strings.Index(msg, "POST /api/tags/order/repair"), strings.Index(msg, "UPDATE leaf_alloc SET max_id = ")
	if action < 0 || !strings.Contains(msg, "leafd tag repair order") || sql < action {
		s.t.Fatalf("%s: message %q does not give the repair action, then the SQL", what, msg)
	}
}

// Three servers share one database and hand out IDs of one tag under
// concurrent load. An operator then rewinds the tag twice, by
// `UPDATE leaf_alloc SET max_id = 1` and by deleting the tag and creating it
// again, and one server restarts: every server answers tag_rewound (after
// the IDs it had buffered before) until the operator raises max_id as the
// message says, and then serves again. No ID is ever issued twice.
func TestRewoundTagNeverReissues(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		cfg := fastConfig()
		cfg.MaxStep = 200              // small ranges, so that the buffers run dry soon after a rewind
		cfg.MissTTL = time.Millisecond // a tag created again is looked up at once
		s := &rewindServers{t: t, db: db, cfg: cfg, as: make([]*segment.Allocator, 3)}
		db.addTag(t, "order", 1, 100)
		db.addTag(t, "other", 1, 100) // a refresh that lists no tag at all is ignored
		for i := range s.as {
			s.start(i)
		}
		serve := func(i int, codes []string) bool {
			if c := codes[len(codes)-1]; c != "" {
				t.Errorf("server %d: %s", i, c)
				return true
			}
			return len(codes) >= 150
		}
		mark := func() int64 {
			var m int64
			if err := db.raw.QueryRow("SELECT max_id FROM leafd_tag_highwater WHERE biz_tag = 'order'").Scan(&m); err != nil {
				t.Fatal(err)
			}
			return m
		}
		repair := func() {
			db.exec(t, "UPDATE leaf_alloc SET max_id = ? WHERE biz_tag = 'order'", mark())
		}
		s.load("order", serve)

		// Rewound by an UPDATE while the servers hold buffers.
		db.exec(t, "UPDATE leaf_alloc SET max_id = 1 WHERE biz_tag = 'order'")
		s.checkRewound("after UPDATE max_id = 1", s.load("order", untilRewound))

		// A server restarted meanwhile knows nothing in memory: the mark in
		// the database refuses the tag all the same.
		s.as[1].Close()
		s.start(1)
		s.checkRewound("after a restart", s.load("order", untilRewound))

		repair()
		s.load("order", serve)

		// Deleted, then created again with the default max_id of 1.
		db.exec(t, "DELETE FROM leaf_alloc WHERE biz_tag = 'order'")
		for _, a := range s.as {
			if err := a.Refresh(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Next(context.Background(), "order"); code(err) != leafd.EUnknownTag {
				t.Fatalf("a deleted tag: %v, want unknown_tag", err)
			}
		}
		db.addTag(t, "order", 1, 100)
		for _, a := range s.as {
			// Looked up at most 5 times a second: wait until each server
			// has found the tag again.
			eventually(t, func() bool {
				_, err := a.Next(context.Background(), "order")
				return code(err) != leafd.EUnknownTag
			}, "the tag found again")
		}
		s.checkRewound("after delete and create again", s.load("order", untilRewound))

		// Repaired through the store's audited action this time.
		r, err := db.store(t).RepairTag(context.Background(), "order")
		if err != nil || !r.Raised || r.After.MaxID != mark() || r.Before.MaxID >= r.After.MaxID {
			t.Fatalf("RepairTag = %+v, %v; want max_id raised to the mark %d", r, err, mark())
		}
		s.load("order", serve)
		if t.Failed() {
			return
		}
		if len(s.log.dupes) > 0 {
			t.Fatalf("IDs issued twice among %d: %s", s.log.n, strings.Join(s.log.dupes, "; "))
		}
		t.Logf("%d IDs issued, none twice", s.log.n)
	})
}

// rewindableStore is a store without a high-water mark: it hands out
// [max, max+step) and can be rewound, as a store of an older leafd, or
// another implementation of segment.Store, would be.
type rewindableStore struct {
	mu  sync.Mutex
	max int64
}

// AllocateIn is not needed: the rewind tests serve no dated tag.
func (s *rewindableStore) AllocateIn(context.Context, string, int64, func(time.Time) (segment.Window, error)) (segment.Allocation, error) {
	return segment.Allocation{}, errors.New("rewindableStore serves no dated tag")
}

func (s *rewindableStore) Allocate(_ context.Context, tag string, step int64) (segment.Allocation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := segment.Allocation{Start: s.max, End: s.max + step, TableStep: 10}
	s.max += step
	return a, nil
}

func (s *rewindableStore) Ping(context.Context) error { return nil }

func (s *rewindableStore) ListTags(context.Context) ([]leafd.Tag, error) {
	return []leafd.Tag{{Name: "t", MaxID: 1, Step: 10}}, nil
}

func (s *rewindableStore) LookupTag(_ context.Context, name string) (leafd.Tag, error) {
	return leafd.Tag{Name: name, MaxID: 1, Step: 10}, nil
}

func (s *rewindableStore) set(maxID int64) {
	s.mu.Lock()
	s.max = maxID
	s.mu.Unlock()
}

// A server refuses a range that starts at or below an ID it already issued
// for the tag, even when the store keeps no mark, and serves again once the
// store hands out ranges above them.
func TestRewoundInMemory(t *testing.T) {
	st := &rewindableStore{max: 1}
	cfg := fastConfig()
	cfg.MaxStep = 10
	a := newAllocator(t, st, cfg)
	ctx := context.Background()
	rs, err := a.NextN(ctx, "t", 25, nil)
	if err != nil {
		t.Fatal(err)
	}
	top := rs[len(rs)-1].End
	eventually(t, func() bool { s, _ := a.TagState("t"); return !s.Loading }, "the preload landed")
	st.set(5)
	var seen []int64
	for {
		id, err := a.Next(ctx, "t")
		if err != nil {
			if code(err) != leafd.ETagRewound {
				t.Fatalf("after the store was rewound: %v, want tag_rewound", err)
			}
			if msg := leafd.ErrorMessage(err); !strings.Contains(msg, "this server already issued") || !strings.Contains(msg, "POST /api/tags/t/repair") {
				t.Fatalf("message %q", msg)
			}
			break
		}
		if id < top {
			t.Fatalf("ID %d issued again (IDs up to %d were issued before the rewind)", id, top-1)
		}
		seen = append(seen, id)
		if len(seen) > 100 {
			t.Fatal("the allocator kept serving after the store was rewound")
		}
	}
	// The mark of this server is past the buffered ranges; the store is set
	// above it, and the next request loads from there.
	st.set(1000)
	id, err := a.Next(ctx, "t")
	if err != nil || id != 1000 {
		t.Fatalf("after the repair: %d, %v; want 1000", id, err)
	}
}
