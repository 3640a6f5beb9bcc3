package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd"
	leafhttp "github.com/leafd/leafd/http"
	leafmetrics "github.com/leafd/leafd/metrics"
	"github.com/leafd/leafd/segment"
)

// slotStore stands in for slot 3 of 4 of a sharded store: it hands out only
// IDs ≡ 3 (mod 4), a range of step IDs being 3, 7, 11, … It keeps its rows
// in memory, since no store of today hands out strided ranges; the subject
// here is how they are written, not a database.
type slotStore struct {
	mu   sync.Mutex
	next int64
}

const slots = 4

func (s *slotStore) Allocate(ctx context.Context, tag string, step int64) (segment.Allocation, error) {
	if tag != "order" {
		return segment.Allocation{}, leafd.UnknownTagError(tag)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next == 0 {
		s.next = 3
	}
	a := segment.Allocation{Start: s.next, End: s.next + step*slots, Stride: slots, TableStep: 10}
	s.next = a.End
	return a, nil
}

// AllocateIn is for dated tags, and order is not one.
func (s *slotStore) AllocateIn(ctx context.Context, tag string, step int64, _ func(time.Time) (segment.Window, error)) (segment.Allocation, error) {
	return segment.Allocation{}, fmt.Errorf("slotStore: tag %q is not dated", tag)
}

func (s *slotStore) Ping(ctx context.Context) error { return nil }

func (s *slotStore) ListTags(ctx context.Context) ([]leafd.Tag, error) {
	return []leafd.Tag{{Name: "order", MaxID: 1, Step: 10}}, nil
}

func (s *slotStore) LookupTag(ctx context.Context, name string) (leafd.Tag, error) {
	if name != "order" {
		return leafd.Tag{}, leafd.UnknownTagError(name)
	}
	return leafd.Tag{Name: "order", MaxID: 1, Step: 10}, nil
}

// newSlotServer serves the tag order of a slotStore in ranges of 10 IDs,
// with every per-tag metric.
func newSlotServer(t *testing.T) (*httptest.Server, *segment.Allocator) {
	t.Helper()
	m, err := leafmetrics.NewWith(leafmetrics.Options{PerTag: leafmetrics.PerTagFull})
	if err != nil {
		t.Fatal(err)
	}
	a, err := segment.New(&slotStore{}, segment.Config{
		MaxStep: 10, MaxBatch: 100, WaitTimeout: 10 * time.Second, Logger: quiet, OnLoad: m.ObserveLoad,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.Start()
	t.Cleanup(func() { a.Close() })
	srv := httptest.NewServer(leafhttp.New(leafhttp.Config{Segment: a, Metrics: m, Logger: quiet}).Handler())
	t.Cleanup(srv.Close)
	return srv, a
}

// slotIDs returns n IDs of slot 3 of 4 from the ith on, as decimals.
func slotIDs(i, n int) []string {
	var out []string
	for ; n > 0; i, n = i+1, n-1 {
		out = append(out, fmt.Sprint(3+slots*i))
	}
	return out
}

// Batches of a strided range list its IDs a stride apart, across ranges,
// in text and in JSON.
func TestSegmentStrided(t *testing.T) {
	srv, _ := newSlotServer(t)
	r := do(t, "GET", srv.URL+"/segment/order")
	if r.status != 200 || r.body != "3\n" {
		t.Fatalf("GET /segment/order = %d %q, want 3", r.status, r.body)
	}
	r = do(t, "GET", srv.URL+"/segment/order?count=25") // spans three ranges of 10
	if want := strings.Join(slotIDs(1, 25), "\n") + "\n"; r.status != 200 || r.body != want {
		t.Fatalf("count=25 = %d\n%q\nwant\n%q", r.status, r.body, want)
	}
	r = do(t, "GET", srv.URL+"/segment/order?count=12&format=json") // 26..37: across a range's end
	var body struct {
		Tag string   `json:"tag"`
		IDs []string `json:"ids"`
	}
	if err := json.Unmarshal([]byte(r.body), &body); err != nil || r.status != 200 {
		t.Fatalf("JSON: %d %q: %v", r.status, r.body, err)
	}
	if want := slotIDs(26, 12); body.Tag != "order" || strings.Join(body.IDs, ",") != strings.Join(want, ",") {
		t.Fatalf("JSON: %q, want IDs %v", r.body, want)
	}
	r = do(t, "GET", srv.URL+"/api/segment/get/order")
	if want := slotIDs(38, 1)[0]; r.status != 200 || r.body != want {
		t.Fatalf("Leaf route: %d %q, want %s", r.status, r.body, want)
	}
}

// /api/state counts a strided buffer's size and used in IDs and gives its
// stride; /metrics counts the IDs it has left. A contiguous buffer has no
// stride field.
func TestStateStrided(t *testing.T) {
	srv, a := newSlotServer(t)
	if r := do(t, "GET", srv.URL+"/segment/order?count=13"); r.status != 200 { // 10 of one range, 3 of the next
		t.Fatalf("GET = %d %q", r.status, r.body)
	}
	// Taking from the second range started the load of the third: wait
	// for it, so that the state holds still.
	var st segment.TagState
	deadline := time.Now().Add(10 * time.Second)
	for st, _ = a.TagState("order"); st.Loads < 3 || st.Loading; st, _ = a.TagState("order") {
		if time.Now().After(deadline) {
			t.Fatalf("no third range within 10s: %+v", st)
		}
		time.Sleep(time.Millisecond)
	}
	r := do(t, "GET", srv.URL+"/api/state")
	var body struct {
		Segment struct {
			Tags []struct {
				Current int               `json:"current"`
				Buffers []json.RawMessage `json:"buffers"`
			} `json:"tags"`
		} `json:"segment"`
	}
	if err := json.Unmarshal([]byte(r.body), &body); err != nil || len(body.Segment.Tags) != 1 {
		t.Fatalf("GET /api/state = %d %s: %v", r.status, r.body, err)
	}
	tag := body.Segment.Tags[0]
	// The first range, 3 to 39, is used up; the current one, 43 to 79, has
	// given 43, 47, 51; the next, 83 to 119, none.
	want := `{"start":43,"end":83,"next":55,"ready":true,"loading":false,"size":10,"used":3,"stride":4}`
	if got := string(tag.Buffers[tag.Current]); got != want {
		t.Errorf("current buffer %s, want %s", got, want)
	}
	want = `{"start":83,"end":123,"next":83,"ready":true,"loading":false,"size":10,"used":0,"stride":4}`
	if got := string(tag.Buffers[1-tag.Current]); got != want {
		t.Errorf("next buffer %s, want %s", got, want)
	}
	r = do(t, "GET", srv.URL+"/metrics")
	for _, want := range []string{
		`leafd_segment_buffer_remaining{buffer="current",tag="order"} 7` + "\n",
		`leafd_segment_buffer_remaining{buffer="next",tag="order"} 10` + "\n",
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("/metrics has no %q:\n%s", want, grep(r.body, "buffer_remaining"))
		}
	}

	contiguous, _ := newServer(t, map[string]int64{"order": 1})
	do(t, "GET", contiguous.URL+"/segment/order?count=3")
	r = do(t, "GET", contiguous.URL+"/api/state")
	if !strings.Contains(r.body, `"size":10,"used":3}`) || strings.Contains(r.body, `"stride"`) {
		t.Errorf("contiguous: %s", r.body)
	}
}

// grep returns the lines of s that contain sub.
func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
