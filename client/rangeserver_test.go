package client_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/leafd/leafd"
)

// rangeStore is the shared state of a fleet of fake range servers: the
// next ID of each tag, as leaf_alloc's max_id is for real servers.
type rangeStore struct {
	mu     sync.Mutex
	next   map[string]int64 // sequential tags: the next ID to hand out
	opaque map[string]int64 // opaque tags: a counter, IDs spread out from it
	// maxRange and maxBatch are segment.max_range and segment.max_batch.
	maxRange int64
	maxBatch int
}

func newRangeStore(tags ...string) *rangeStore {
	st := &rangeStore{next: map[string]int64{}, opaque: map[string]int64{}, maxRange: 1_000_000, maxBatch: 10_000}
	for _, t := range tags {
		st.next[t] = 1
	}
	return st
}

// rangeServer is a fake leafd that implements GET /segment/{tag}/range as
// the contract says, and GET /segment/{tag}?count=N&format=json for the
// tags that fall back, over a rangeStore. Tests inject failures with fail
// and hold requests at a gate.
type rangeServer struct {
	*httptest.Server
	st *rangeStore

	ranges   atomic.Int64 // /range requests received
	answered atomic.Int64 // /range requests answered 200
	segments atomic.Int64 // /segment/{tag} requests received

	mu sync.Mutex
	// fail, if set, answers a request instead of the server (true) or
	// lets it through (false).
	fail func(w http.ResponseWriter, r *http.Request) bool
	gate chan struct{} // non-nil: /range requests wait until it is closed
	// noRoute makes the server one without the range route (404
	// not_found), as leafd before range leases.
	noRoute bool
	sizes   []int64 // the size of every /range request
}

func newRangeServer(tb testing.TB, st *rangeStore) *rangeServer {
	tb.Helper()
	rs := &rangeServer{st: st}
	rs.Server = httptest.NewServer(rs)
	tb.Cleanup(rs.Close)
	return rs
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": msg}})
	w.Write(b)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	b, _ := json.Marshal(v)
	w.Write(b)
}

func (rs *rangeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/segment/")
	if !ok || r.Method != http.MethodGet {
		writeError(w, 404, leafd.ENotFound, "no route "+r.URL.Path)
		return
	}
	tag, isRange := strings.CutSuffix(rest, "/range")
	rs.mu.Lock()
	fail, gate, noRoute := rs.fail, rs.gate, rs.noRoute
	rs.mu.Unlock()
	if isRange {
		rs.ranges.Add(1)
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
	} else {
		rs.segments.Add(1)
	}
	if fail != nil && fail(w, r) {
		return
	}
	if strings.Contains(tag, "/") || (isRange && noRoute) {
		writeError(w, 404, leafd.ENotFound, "no route "+r.URL.Path)
		return
	}
	if err := leafd.ValidateTag(tag); err != nil {
		writeError(w, 400, leafd.EInvalidTag, leafd.ErrorMessage(err))
		return
	}
	st := rs.st
	if isRange {
		q := r.URL.Query()
		size, err := strconv.ParseInt(q.Get("size"), 10, 64)
		if err != nil || len(q["size"]) != 1 || size < 1 || size > st.maxRange {
			writeError(w, 400, leafd.EInvalidSize, fmt.Sprintf("size %q is not valid: use a whole number from 1 to %d", q.Get("size"), st.maxRange))
			return
		}
		rs.mu.Lock()
		rs.sizes = append(rs.sizes, size)
		rs.mu.Unlock()
		st.mu.Lock()
		next, seq := st.next[tag]
		_, opq := st.opaque[tag]
		if seq {
			st.next[tag] = next + size
		}
		st.mu.Unlock()
		switch {
		case opq:
			writeError(w, 409, leafd.ERangeUnsupported, fmt.Sprintf("tag %q is opaque: its IDs are not consecutive; ask GET /segment/%s?count=N", tag, tag))
		case !seq:
			writeError(w, 404, leafd.EUnknownTag, fmt.Sprintf("tag %q is not defined", tag))
		default:
			writeJSON(w, map[string]string{"tag": tag, "start": strconv.FormatInt(next, 10), "end": strconv.FormatInt(next+size, 10)})
			rs.answered.Add(1)
		}
		return
	}
	n := 1
	if s := r.URL.Query().Get("count"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 || n > st.maxBatch {
			writeError(w, 400, leafd.EInvalidCount, fmt.Sprintf("count %q is not valid: use a whole number from 1 to %d", s, st.maxBatch))
			return
		}
	}
	ids := make([]string, n)
	st.mu.Lock()
	next, seq := st.next[tag]
	pos, opq := st.opaque[tag]
	switch {
	case seq:
		for i := range ids {
			ids[i] = strconv.FormatInt(next+int64(i), 10)
		}
		st.next[tag] = next + int64(n)
	case opq:
		for i := range ids { // distinct, in no particular order
			ids[i] = strconv.FormatInt((pos+int64(i))*7919%1_000_003+1, 10)
		}
		st.opaque[tag] = pos + int64(n)
	}
	st.mu.Unlock()
	if !seq && !opq {
		writeError(w, 404, leafd.EUnknownTag, fmt.Sprintf("tag %q is not defined", tag))
		return
	}
	writeJSON(w, map[string]any{"tag": tag, "ids": ids})
}

// setFail sets (or, with nil, clears) the failure hook.
func (rs *rangeServer) setFail(f func(w http.ResponseWriter, r *http.Request) bool) {
	rs.mu.Lock()
	rs.fail = f
	rs.mu.Unlock()
}

// hold makes the following /range requests wait; the returned function
// lets them (and later ones) through.
func (rs *rangeServer) hold() (release func()) {
	gate := make(chan struct{})
	rs.mu.Lock()
	rs.gate = gate
	rs.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			rs.mu.Lock()
			rs.gate = nil
			rs.mu.Unlock()
			close(gate)
		})
	}
}

func (rs *rangeServer) allSizes() []int64 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return append([]int64(nil), rs.sizes...)
}

// newRangeServerFor serves h on a loopback port and returns its URL.
func newRangeServerFor(tb testing.TB, h http.Handler) string {
	tb.Helper()
	srv := httptest.NewServer(h)
	tb.Cleanup(srv.Close)
	return srv.URL
}

// countBlocked counts goroutines blocked in a select inside the function
// fn names (such as "leafd/client.(*Client).awaitLease("), read from the
// goroutine dump: parked, not spinning, is what the dump's state says.
func countBlocked(fn string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if strings.Contains(header, "[select") && strings.Contains(g, fn) {
			count++
		}
	}
	return count
}
