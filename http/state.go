package http

import (
	"cmp"
	"context"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/health"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store"
)

// The JSON of GET /api/state (docs/contract.md section 6). Times are RFC 3339 UTC with
// milliseconds; a time that has not happened yet (no load, no lease) is
// null. start, end and next are numbers, as in the contract; size and used, the
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
		// The address in use (see health.Store.Address): its host:port,
		// its index in store.dsn + store.fallback_dsns, how many there
		// are, and the switches between them so far.
		Address          string  `json:"address,omitempty"`
		AddressIndex     *int    `json:"address_index,omitempty"`
		Addresses        int     `json:"addresses,omitempty"`
		Switches         *int64  `json:"switches,omitempty"`
		LastSwitch       *string `json:"last_switch,omitempty"`
		LastSwitchReason string  `json:"last_switch_reason,omitempty"`
		// Shards is each database of store.shards, with the slots it
		// serves, when the store has them.
		Shards []shardJSON `json:"shards,omitempty"`
	}
	shardJSON struct {
		Index   int     `json:"index"`
		Address string  `json:"address"`
		Up      bool    `json:"up"`
		Slots   []int64 `json:"slots"`
	}
	segmentJSON struct {
		Tags []stateTag `json:"tags"`
		// Total counts the tags that match the query, before paging; Counts
		// every tag by status, whatever the query.
		Total       int        `json:"total"`
		Counts      countsJSON `json:"counts"`
		Offset      *int       `json:"offset,omitempty"`
		Limit       *int       `json:"limit,omitempty"`
		RefillMinMs int64      `json:"refill_min_ms"`
		RefillMaxMs int64      `json:"refill_max_ms"`
	}
	// countsJSON is a struct, not a map, so that the counts come in the
	// order of segment.Statuses.
	countsJSON struct {
		All     int `json:"all"`
		Failing int `json:"failing"`
		Waiting int `json:"waiting"`
		Loading int `json:"loading"`
		Serving int `json:"serving"`
		Idle    int `json:"idle"`
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
		// TokenRefusals counts the requests for the tag refused for their
		// access token (segment.require_token), when there were any.
		TokenRefusals int64 `json:"token_refusals,omitempty"`
		// Domain is an opaque tag's largest ID; DomainUsed and
		// DomainReserved how many of its IDs are gone and in this server's
		// buffers (segment.TagState). All three are absent for a sequential
		// tag.
		Domain         *int64 `json:"domain,omitempty"`
		DomainUsed     *int64 `json:"domain_used,omitempty"`
		DomainReserved *int64 `json:"domain_reserved,omitempty"`
		// Period is a dated tag's current period (2026-11-27), PeriodEnd
		// when it ends, PeriodCapacity and PeriodUsed the numbers it holds
		// and those gone, and PeriodFullAt when, at the current rate, it
		// would run out before it ends. All are absent for other tags.
		Period         string `json:"period,omitempty"`
		PeriodEnd      string `json:"period_end,omitempty"`
		PeriodCapacity *int64 `json:"period_capacity,omitempty"`
		PeriodUsed     *int64 `json:"period_used,omitempty"`
		PeriodFullAt   string `json:"period_full_at,omitempty"`
		// State is last so that the fields of docs/contract.md section 6 keep their
		// order.
		State segment.Status `json:"state"`
		Error string         `json:"error,omitempty"`
		// ErrorCode is the code of Error (docs/contract.md section 4):
		// tag_rewound, store_unavailable …, internal for a failure without
		// one; absent with Error. The dashboard words a rewound tag by it.
		ErrorCode string `json:"error_code,omitempty"`
	}
	stateBuffer struct {
		Start   int64 `json:"start"`
		End     int64 `json:"end"`
		Next    int64 `json:"next"`
		Ready   bool  `json:"ready"`
		Loading bool  `json:"loading"`
		Size    int64 `json:"size"`
		Used    int64 `json:"used"`
		// Stride is the distance between consecutive IDs of a strided
		// range (a sharded store); absent for a contiguous one.
		Stride int64 `json:"stride,omitempty"`
	}
	snowflakeJSON struct {
		// WorkerID is null while no worker id is held; the lowest of
		// WorkerIDs, every worker id held (snowflake.workers).
		WorkerID       *int64  `json:"worker_id"`
		WorkerSource   string  `json:"worker_source"`
		LeaseUntil     *string `json:"lease_until"`
		LastMs         int64   `json:"last_ms"`
		BackwardEvents int64   `json:"backward_events"`
		Issued         int64   `json:"issued"`
		Renewals       int64   `json:"renewals"`
		// Borrowing (snowflake.max_borrow, 0 when off): how far the last
		// ID's millisecond is ahead of the clock now, the largest lead a
		// borrow made, and the milliseconds borrowed in all.
		MaxBorrowMs int64   `json:"max_borrow_ms"`
		LeadMs      int64   `json:"lead_ms"`
		MaxLeadMs   int64   `json:"max_lead_ms"`
		BorrowedMs  int64   `json:"borrowed_ms"`
		WorkerIDs   []int64 `json:"worker_ids"`
		Error       string  `json:"error,omitempty"`
	}
)

// getState answers GET /api/state. It reads the allocators' snapshots,
// which take each tag's lock for a few field copies, never the hot path's
// atomic cursor. The query (see stateQuery) picks, orders and pages the
// tags; invalid_query when it does not parse.
func (s *Server) getState(c *gin.Context) {
	q, err := parseStateQuery(c)
	if err != nil {
		s.writeError(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, s.state(c.Request.Context(), q))
}

func (s *Server) state(ctx context.Context, q stateQuery) stateJSON {
	out := stateJSON{Time: timeJSON(time.Now())}
	if s.health != nil {
		out.Store = storeState(ctx, s.health)
	}
	if s.seg != nil {
		lo, hi := s.seg.RefillWindow()
		out.Segment = q.segment(s.seg.State())
		for i := range out.Segment.Tags {
			out.Segment.Tags[i].TokenRefusals = s.access.RefusalsOf(out.Segment.Tags[i].Tag)
		}
		out.Segment.RefillMinMs, out.Segment.RefillMaxMs = lo.Milliseconds(), hi.Milliseconds()
	}
	if s.sf != nil {
		out.Snowflake = stateOfSnowflake(s.sf.State())
	}
	return out
}

func storeState(ctx context.Context, h *health.Store) *storeJSON {
	now := h.Check(ctx)
	j := &storeJSON{Driver: h.Driver(), OK: now.OK, Error: store.Redact(now.Err)}
	if !now.At.IsZero() {
		at := timeJSON(now.At)
		j.CheckedAt = &at
	}
	if addr, ok := h.Address(); ok {
		j.Address, j.AddressIndex, j.Addresses = addr.Name, &addr.Index, addr.Count
		j.Switches, j.LastSwitchReason = &addr.Switches, store.Redact(addr.LastSwitchReason)
		if !addr.LastSwitch.IsZero() {
			at := timeJSON(addr.LastSwitch)
			j.LastSwitch = &at
		}
		for _, sh := range addr.Shards {
			j.Shards = append(j.Shards, shardJSON{Index: sh.Index, Address: sh.Name, Up: !sh.Down, Slots: sh.Slots})
		}
	}
	return j
}

func stateOfTag(t segment.TagState, now time.Time) stateTag {
	j := stateTag{
		Tag: t.Tag, State: t.Status, Step: t.Step, MinStep: t.MinStep, Current: t.Current, Loading: t.Loading,
		LastPeriodMs: t.LastPeriod.Milliseconds(),
		Rate:         math.Round(t.Rate*1000) / 1000,
		Issued:       t.Issued, Waits: t.Waits, Loads: t.Loads, Errors: t.Errors, LoadErrors: t.LoadErrors,
	}
	if t.Domain > 0 {
		j.Domain, j.DomainUsed, j.DomainReserved = &t.Domain, &t.DomainUsed, &t.DomainReserved
	}
	if t.Period != "" {
		j.Period, j.PeriodEnd = t.Period, t.PeriodEnd.UTC().Format(time.RFC3339)
		j.PeriodCapacity, j.PeriodUsed = &t.PeriodCapacity, &t.PeriodUsed
		if left := t.PeriodCapacity - t.PeriodUsed; t.Rate > 0 {
			if full := now.Add(time.Duration(float64(left) / t.Rate * float64(time.Second))); full.Before(t.PeriodEnd) {
				j.PeriodFullAt = full.UTC().Format(time.RFC3339)
			}
		}
	}
	for i, b := range t.Buffers {
		// size and used count IDs, which in a strided range are fewer
		// than its width.
		stride := max(b.Stride, 1)
		j.Buffers[i] = stateBuffer{Start: b.Start, End: b.End, Next: b.Next, Ready: b.Ready, Loading: b.Loading,
			Size: (b.End - b.Start) / stride, Used: (b.Next - b.Start) / stride}
		if stride > 1 {
			j.Buffers[i].Stride = stride
		}
	}
	if !t.LastLoad.IsZero() {
		at := timeJSON(t.LastLoad)
		j.LastLoad = &at
	}
	if t.Err != nil {
		j.Error = store.Redact(t.Err.Error())
		j.ErrorCode = leafd.ErrorCode(t.Err)
	}
	return j
}

func stateOfSnowflake(st snowflake.State) *snowflakeJSON {
	j := &snowflakeJSON{WorkerSource: st.Source, LastMs: st.LastMs, BackwardEvents: st.BackwardEvents,
		Issued: st.Issued, Renewals: st.Renewals, MaxBorrowMs: st.MaxBorrow.Milliseconds(),
		LeadMs: st.LeadMs, MaxLeadMs: st.MaxLeadMs, BorrowedMs: st.BorrowedMs, WorkerIDs: st.WorkerIDs}
	if j.WorkerIDs == nil {
		j.WorkerIDs = []int64{}
	}
	if st.WorkerID >= 0 {
		id := st.WorkerID
		j.WorkerID = &id
	}
	if !st.LeaseUntil.IsZero() {
		at := timeJSON(st.LeaseUntil)
		j.LeaseUntil = &at
	}
	if st.Err != nil {
		j.Error = store.Redact(st.Err.Error())
	}
	return j
}

func timeJSON(t time.Time) string { return t.UTC().Format(rfc3339Milli) }

// maxStateLimit is the most tags one page of /api/state holds.
const maxStateLimit = 1000

// stateQuery is what GET /api/state was asked for: which tags, in what
// order, which page. The zero value is every tag by name, as the route
// answered before it took parameters.
type stateQuery struct {
	tag    string         // tag=: that tag only
	q      string         // q=: names containing it, any case
	status segment.Status // state=: that status only
	sort   string         // sort=: "name" (also ""), "problems" or "rate"
	// offset and limit page the matching tags; limit 0 is all of them.
	// set remembers which the client gave, to echo them.
	offset, limit       int
	offsetSet, limitSet bool
}

// The orders of sort=.
const (
	sortName     = "name"
	sortProblems = "problems"
	sortRate     = "rate"
)

// parseStateQuery reads the query of GET /api/state. An empty value is the
// same as none, so that a form may send every field. It returns an
// invalid_query error naming the parameter and what it accepts. Parameters
// it does not know are ignored, like the dashboard's own (?poll=).
func parseStateQuery(c *gin.Context) (stateQuery, error) {
	var q stateQuery
	raw := c.Request.URL.RawQuery
	if strings.Count(raw, "&") >= 10000 { // url.ParseQuery's limit, which this route kept
		return q, leafd.Errorf(leafd.EInvalidQuery, "the query does not parse (number of URL query parameters exceeded limit); write it as name=value pairs joined by &, with %%XX escapes")
	}
	var v query
	if err := apiStateQuery.read(raw, &v); err != nil {
		return q, err
	}
	get := func(name string) string { s, _ := v.get(name); return s }
	q.tag, q.q = get("tag"), get("q")
	if st := get("state"); st != "" {
		q.status = segment.Status(st)
		if !slices.Contains(segment.Statuses, q.status) {
			return q, leafd.Errorf(leafd.EInvalidQuery, "state %q is not a tag status; use one of %s", st, statusList())
		}
	}
	switch q.sort = get("sort"); q.sort {
	case "", sortName, sortProblems, sortRate:
	default:
		return q, leafd.Errorf(leafd.EInvalidQuery, "sort %q is not an order; use name, problems or rate", q.sort)
	}
	if s := get("offset"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return q, leafd.Errorf(leafd.EInvalidQuery, "offset %q is not a whole number of 0 or more", s)
		}
		q.offset, q.offsetSet = n, true
	}
	if s := get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxStateLimit {
			return q, leafd.Errorf(leafd.EInvalidQuery, "limit %q is not a whole number from 1 to %d; leave it out for every tag", s, maxStateLimit)
		}
		q.limit, q.limitSet = n, true
	}
	return q, nil
}

func statusList() string {
	names := make([]string, len(segment.Statuses))
	for i, s := range segment.Statuses {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// segment counts tags (one snapshot, sorted by name) by status, keeps those
// the query matches in its order, and builds the JSON of the page alone:
// at ten thousand tags, the cost of a dashboard's poll is a snapshot and a
// sort, not ten thousand tags' JSON. It reuses tags' storage.
func (q stateQuery) segment(tags []segment.TagState) *segmentJSON {
	seg := &segmentJSON{}
	kept := tags[:0]
	for _, t := range tags {
		seg.Counts.add(t.Status)
		if q.match(&t) {
			kept = append(kept, t)
		}
	}
	switch q.sort {
	case sortProblems:
		slices.SortFunc(kept, func(a, b segment.TagState) int {
			if c := cmp.Compare(urgency(a.Status), urgency(b.Status)); c != 0 {
				return c
			}
			return byRate(a, b)
		})
	case sortRate:
		slices.SortFunc(kept, byRate)
	}
	seg.Total = len(kept)
	page := kept[min(q.offset, len(kept)):]
	if q.limit > 0 && len(page) > q.limit {
		page = page[:q.limit]
	}
	seg.Tags = make([]stateTag, len(page))
	now := time.Now()
	for i := range page {
		seg.Tags[i] = stateOfTag(page[i], now)
	}
	if q.offsetSet {
		seg.Offset = &q.offset
	}
	if q.limitSet {
		seg.Limit = &q.limit
	}
	return seg
}

func (q stateQuery) match(t *segment.TagState) bool {
	return (q.tag == "" || t.Tag == q.tag) &&
		(q.status == "" || t.Status == q.status) &&
		(q.q == "" || containsFold(t.Tag, q.q))
}

// byRate orders the busiest tags first, then by name.
func byRate(a, b segment.TagState) int {
	if c := cmp.Compare(b.Rate, a.Rate); c != 0 {
		return c
	}
	return strings.Compare(a.Tag, b.Tag)
}

// urgency is s's place in segment.Statuses: 0 for the most urgent.
func urgency(s segment.Status) int {
	if i := slices.Index(segment.Statuses, s); i >= 0 {
		return i
	}
	return len(segment.Statuses)
}

func (c *countsJSON) add(s segment.Status) {
	c.All++
	switch s {
	case segment.StatusFailing:
		c.Failing++
	case segment.StatusWaiting:
		c.Waiting++
	case segment.StatusLoading:
		c.Loading++
	case segment.StatusServing:
		c.Serving++
	case segment.StatusIdle:
		c.Idle++
	}
}

// containsFold reports whether substr is within s, ignoring case, without
// lowering a copy of every tag name.
func containsFold(s, substr string) bool {
	for i := 0; i+len(substr) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(substr)], substr) {
			return true
		}
	}
	return false
}
