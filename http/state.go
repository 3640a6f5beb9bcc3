package http

import (
	"context"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
)

// Store is what the dashboard, /api/state and /metrics need of the
// database: its driver's name and a ping. store.MySQL and store.SQLite
// implement it.
type Store interface {
	Driver() string
	Ping(ctx context.Context) error
}

// segmentStater and snowflakeStater are what /api/state and /metrics read
// of each mode. They are asked of Config.Segment and Config.Snowflake with a
// type assertion, so that a Segment or Snowflake without them (a stub in a
// test) still serves IDs; the real ones have them, checked here.
type (
	segmentStater interface {
		State() []segment.TagState
		RefillWindow() (lo, hi time.Duration)
	}
	snowflakeStater interface {
		State() snowflake.State
	}
	// storeAddresser is what a store spread over the addresses of a
	// cluster (store.fallback_dsns) tells of the address it uses.
	storeAddresser interface {
		Address() leafd.StoreAddress
	}
)

var (
	_ segmentStater   = (*segment.Allocator)(nil)
	_ snowflakeStater = (*snowflake.Generator)(nil)
)

// Store health is pinged at most once per healthEvery however many
// dashboards poll and scrapers scrape, each ping bounded by healthTimeout.
const (
	healthEvery   = time.Second
	healthTimeout = time.Second
)

// storeHealth caches the outcome of the store's ping. One caller at a time
// pings; the others answer the last outcome meanwhile, or wait for the very
// first one.
type storeHealth struct {
	store Store

	mu      sync.Mutex
	last    health
	pinging chan struct{} // closed when the ping in flight ends; nil if none
}

type health struct {
	ok  bool
	err string
	at  time.Time // when the ping ended; zero before the first
}

func newStoreHealth(s Store) *storeHealth {
	if s == nil {
		return nil
	}
	return &storeHealth{store: s}
}

// check returns the store's health, no older than healthEvery unless a
// ping is in flight. ctx only bounds the wait for the first ping: the ping
// itself runs on its own deadline, so that a dashboard closed mid-poll does
// not count as a failure of the database.
func (h *storeHealth) check(ctx context.Context) health {
	h.mu.Lock()
	last, pinging := h.last, h.pinging
	fresh := !last.at.IsZero() && time.Since(last.at) < healthEvery
	if fresh || (pinging != nil && !last.at.IsZero()) {
		h.mu.Unlock()
		return last
	}
	if pinging != nil {
		h.mu.Unlock()
		select {
		case <-pinging:
		case <-ctx.Done():
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.last
	}
	done := make(chan struct{})
	h.pinging = done
	h.mu.Unlock()

	pctx, cancel := context.WithTimeout(context.Background(), healthTimeout)
	err := h.store.Ping(pctx)
	cancel()
	now := health{ok: err == nil, at: time.Now()}
	if err != nil {
		now.err = err.Error()
	}
	h.mu.Lock()
	h.last, h.pinging = now, nil
	h.mu.Unlock()
	close(done)
	return now
}

// The JSON of GET /api/state (SPEC section 5). Times are RFC 3339 UTC with
// milliseconds; a time that has not happened yet (no load, no lease) is
// null. start, end and next are numbers, as in SPEC; size and used, the
// same buffer as offsets, stay far below 2^53, so that a browser can draw
// it exactly whatever the IDs.
type (
	stateJSON struct {
		Store     *storeJSON     `json:"store"`
		Segment   *segmentJSON   `json:"segment"`
		Snowflake *snowflakeJSON `json:"snowflake"`
		// Time is the server's clock when the state was read: the dashboard
		// measures "ago" against it, not against the browser's clock.
		Time string `json:"time"`
	}
	storeJSON struct {
		Driver    string  `json:"driver"`
		OK        bool    `json:"ok"`
		Error     string  `json:"error,omitempty"`
		CheckedAt *string `json:"checked_at"`
		// The address in use (MySQL only): its host:port, its index in
		// store.dsn + store.fallback_dsns, how many there are, and the
		// switches between them so far.
		Address          string  `json:"address,omitempty"`
		AddressIndex     *int    `json:"address_index,omitempty"`
		Addresses        int     `json:"addresses,omitempty"`
		Switches         *int64  `json:"switches,omitempty"`
		LastSwitch       *string `json:"last_switch,omitempty"`
		LastSwitchReason string  `json:"last_switch_reason,omitempty"`
	}
	segmentJSON struct {
		Tags        []stateTag `json:"tags"`
		RefillMinMs int64      `json:"refill_min_ms"`
		RefillMaxMs int64      `json:"refill_max_ms"`
	}
	stateTag struct {
		Tag          string         `json:"tag"`
		Step         int64          `json:"step"`
		MinStep      int64          `json:"min_step"`
		Current      int            `json:"current"`
		Loading      bool           `json:"loading"`
		Buffers      [2]stateBuffer `json:"buffers"`
		LastLoad     *string        `json:"last_load"`
		LastPeriodMs int64          `json:"last_period_ms"`
		Rate         float64        `json:"rate"`
		Issued       int64          `json:"issued"`
		Waits        int64          `json:"waits"`
		Loads        int64          `json:"loads"`
		Errors       int64          `json:"errors"`
		LoadErrors   int64          `json:"load_errors"`
		Error        string         `json:"error,omitempty"`
	}
	stateBuffer struct {
		Start   int64 `json:"start"`
		End     int64 `json:"end"`
		Next    int64 `json:"next"`
		Ready   bool  `json:"ready"`
		Loading bool  `json:"loading"`
		Size    int64 `json:"size"`
		Used    int64 `json:"used"`
	}
	snowflakeJSON struct {
		// WorkerID is null while no worker id is held.
		WorkerID       *int64  `json:"worker_id"`
		WorkerSource   string  `json:"worker_source"`
		LeaseUntil     *string `json:"lease_until"`
		LastMs         int64   `json:"last_ms"`
		BackwardEvents int64   `json:"backward_events"`
		Issued         int64   `json:"issued"`
		Renewals       int64   `json:"renewals"`
		Error          string  `json:"error,omitempty"`
	}
)

// getState answers GET /api/state. It reads the allocators' snapshots,
// which take each tag's lock for a few field copies, never the hot path's
// atomic cursor.
func (s *Server) getState(c *gin.Context) {
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, s.state(c.Request.Context()))
}

func (s *Server) state(ctx context.Context) stateJSON {
	out := stateJSON{Time: timeJSON(time.Now())}
	if s.health != nil {
		h := s.health.check(ctx)
		out.Store = &storeJSON{Driver: s.health.store.Driver(), OK: h.ok, Error: h.err}
		if !h.at.IsZero() {
			at := timeJSON(h.at)
			out.Store.CheckedAt = &at
		}
		if a, ok := s.health.store.(storeAddresser); ok {
			addr := a.Address()
			out.Store.Address, out.Store.AddressIndex, out.Store.Addresses = addr.Name, &addr.Index, addr.Count
			out.Store.Switches, out.Store.LastSwitchReason = &addr.Switches, addr.LastSwitchReason
			if !addr.LastSwitch.IsZero() {
				at := timeJSON(addr.LastSwitch)
				out.Store.LastSwitch = &at
			}
		}
	}
	if st, ok := s.seg.(segmentStater); ok {
		lo, hi := st.RefillWindow()
		tags := st.State()
		seg := &segmentJSON{Tags: make([]stateTag, 0, len(tags)), RefillMinMs: lo.Milliseconds(), RefillMaxMs: hi.Milliseconds()}
		for _, t := range tags {
			seg.Tags = append(seg.Tags, stateOfTag(t))
		}
		out.Segment = seg
	}
	if st, ok := s.sf.(snowflakeStater); ok {
		out.Snowflake = stateOfSnowflake(st.State())
	}
	return out
}

func stateOfTag(t segment.TagState) stateTag {
	j := stateTag{
		Tag: t.Tag, Step: t.Step, MinStep: t.MinStep, Current: t.Current, Loading: t.Loading,
		LastPeriodMs: t.LastPeriod.Milliseconds(),
		Rate:         math.Round(t.Rate*1000) / 1000,
		Issued:       t.Issued, Waits: t.Waits, Loads: t.Loads, Errors: t.Errors, LoadErrors: t.LoadErrors,
	}
	for i, b := range t.Buffers {
		j.Buffers[i] = stateBuffer{Start: b.Start, End: b.End, Next: b.Next, Ready: b.Ready, Loading: b.Loading,
			Size: b.End - b.Start, Used: b.Next - b.Start}
	}
	if !t.LastLoad.IsZero() {
		at := timeJSON(t.LastLoad)
		j.LastLoad = &at
	}
	if t.Err != nil {
		j.Error = t.Err.Error()
	}
	return j
}

func stateOfSnowflake(st snowflake.State) *snowflakeJSON {
	j := &snowflakeJSON{WorkerSource: st.Source, LastMs: st.LastMs, BackwardEvents: st.BackwardEvents,
		Issued: st.Issued, Renewals: st.Renewals}
	if st.WorkerID >= 0 {
		id := st.WorkerID
		j.WorkerID = &id
	}
	if !st.LeaseUntil.IsZero() {
		at := timeJSON(st.LeaseUntil)
		j.LeaseUntil = &at
	}
	if st.Err != nil {
		j.Error = st.Err.Error()
	}
	return j
}

func timeJSON(t time.Time) string { return t.UTC().Format(rfc3339Milli) }
