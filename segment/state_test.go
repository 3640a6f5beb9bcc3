package segment_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

// gateStore holds every Allocate of a real store until the gate opens, and
// can fail them like a database that is down.
type gateStore struct {
	segment.Store
	mu   sync.Mutex
	gate chan struct{} // nil: open
	down bool
}

func (g *gateStore) Allocate(ctx context.Context, tag string, step int64) (segment.Allocation, error) {
	g.mu.Lock()
	gate, down := g.gate, g.down
	g.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return segment.Allocation{}, ctx.Err()
		}
	}
	if down {
		return segment.Allocation{}, leafd.Errorf(leafd.EStoreUnavailable, "injected outage")
	}
	return g.Store.Allocate(ctx, tag, step)
}

func (g *gateStore) close() {
	g.mu.Lock()
	g.gate = make(chan struct{})
	g.mu.Unlock()
}

func (g *gateStore) open() {
	g.mu.Lock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
	g.mu.Unlock()
}

// loadLog records the calls of Config.OnLoad.
type loadLog struct {
	mu    sync.Mutex
	calls []loadCall
}

type loadCall struct {
	tag  string
	step int64
	took time.Duration
	err  error
}

func (l *loadLog) observe(tag string, step int64, took time.Duration, err error) {
	l.mu.Lock()
	l.calls = append(l.calls, loadCall{tag, step, took, err})
	l.mu.Unlock()
}

func (l *loadLog) snapshot() []loadCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]loadCall(nil), l.calls...)
}

func tagState(t *testing.T, a *segment.Allocator, name string) segment.TagState {
	t.Helper()
	s, ok := a.TagState(name)
	if !ok {
		t.Fatalf("tag %q is not served", name)
	}
	return s
}

// TestStateFollowsBuffers walks a tag through the states the dashboard
// shows: empty, first range loading, serving, next range loading, next
// ready, switched, failing; and checks that OnLoad saw every attempt.
func TestStateFollowsBuffers(t *testing.T) {
	forEachDatabase(t, func(t *testing.T, db *database) {
		db.addTag(t, "order", 1, 10)
		gs := &gateStore{Store: db.store(t)}
		var loads loadLog
		cfg := fastConfig()
		cfg.MaxStep = 10 // the step stays 10, whatever the rate
		// Requests wait for the gate as long as a loaded machine needs;
		// the one meant to fail has a short deadline of its own.
		cfg.WaitTimeout = time.Minute
		cfg.OnLoad = loads.observe
		a := newAllocator(t, gs, cfg)
		ctx := context.Background()

		if s := tagState(t, a, "order"); s.Loading || s.Buffers != [2]segment.BufferState{} || s.Loads != 0 {
			t.Fatalf("before any request: %+v", s)
		}

		t.Run("FirstRangeLoadsIntoCurrentSlot", func(t *testing.T) {
			gs.close()
			got := make(chan int64, 1)
			go func() {
				id, _ := a.Next(context.Background(), "order")
				got <- id
			}()
			eventually(t, func() bool { return tagState(t, a, "order").Loading }, "first load in flight")
			s := tagState(t, a, "order")
			if !s.Buffers[s.Current].Loading || s.Buffers[1-s.Current].Loading || s.Buffers[s.Current].Ready {
				t.Fatalf("first load: %+v", s)
			}
			gs.open()
			if id := <-got; id != 1 {
				t.Fatalf("first ID %d, want 1", id)
			}
		})

		t.Run("NextRangeLoadsIntoOtherSlot", func(t *testing.T) {
			gs.close()
			if _, err := a.NextN(ctx, "order", 2, nil); err != nil { // IDs 2, 3: past the preload point
				t.Fatal(err)
			}
			eventually(t, func() bool { return tagState(t, a, "order").Loading }, "preload in flight")
			s := tagState(t, a, "order")
			want := segment.BufferState{Start: 1, End: 11, Next: 4, Stride: 1, Ready: true}
			if s.Buffers[s.Current] != want || !s.Buffers[1-s.Current].Loading {
				t.Fatalf("while preloading: %+v", s)
			}
			gs.open()
			eventually(t, func() bool { return tagState(t, a, "order").Buffers[1-s.Current].Ready }, "next range ready")
			s = tagState(t, a, "order")
			if next := s.Buffers[1-s.Current]; next != (segment.BufferState{Start: 11, End: 21, Next: 11, Stride: 1, Ready: true}) || s.Loading {
				t.Fatalf("next buffer %+v, loading %v", next, s.Loading)
			}
			if s.Loads != 2 || s.Issued != 3 || s.Waits != 1 || s.Step != 10 || s.MinStep != 10 || s.LastLoad.IsZero() {
				t.Fatalf("counters: %+v", s)
			}
		})

		t.Run("SwitchMovesCurrent", func(t *testing.T) {
			before := tagState(t, a, "order").Current
			if _, err := a.NextN(ctx, "order", 8, nil); err != nil { // 4..11: into the second range
				t.Fatal(err)
			}
			s := tagState(t, a, "order")
			if s.Current == before || s.Buffers[s.Current].Start != 11 || s.Buffers[s.Current].Next != 12 {
				t.Fatalf("after the switch: %+v", s)
			}
		})

		t.Run("FailuresAreCounted", func(t *testing.T) {
			gs.mu.Lock()
			gs.down = true
			gs.mu.Unlock()
			short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			defer cancel()
			_, err := a.NextN(short, "order", 30, nil) // more than both buffers hold
			if leafd.ErrorCode(err) != leafd.ESegmentUnavailable {
				t.Fatalf("with the store down: %v", err)
			}
			eventually(t, func() bool { return tagState(t, a, "order").LoadErrors > 0 }, "a failed load recorded")
			s := tagState(t, a, "order")
			if s.Errors != 1 || s.Err == nil {
				t.Fatalf("after a failed request: errors %d, err %v", s.Errors, s.Err)
			}
			gs.mu.Lock()
			gs.down = false
			gs.mu.Unlock()
			eventually(t, func() bool {
				s := tagState(t, a, "order")
				return !s.Loading && s.Err == nil
			}, "recovery")
		})

		calls := loads.snapshot()
		var ok, failed int
		for _, c := range calls {
			if c.tag != "order" || c.step != 10 || c.took < 0 {
				t.Fatalf("OnLoad(%q, %d, %v, %v)", c.tag, c.step, c.took, c.err)
			}
			if c.err == nil {
				ok++
			} else if leafd.ErrorCode(c.err) == leafd.EStoreUnavailable {
				failed++
			} else if !errors.Is(c.err, context.Canceled) {
				t.Fatalf("OnLoad error %v", c.err)
			}
		}
		if s := tagState(t, a, "order"); int64(ok) != s.Loads || failed == 0 {
			t.Fatalf("OnLoad saw %d loads and %d failures; the state says %d loads", ok, failed, s.Loads)
		}
	})
}
