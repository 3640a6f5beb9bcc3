package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/client"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
)

// A dated tag through every route a caller has: the Go client over HTTP
// and over gRPC, with a buffer and with range leases (valid until the end
// of their period), and the Leaf route. Every
// number is today's date in Shanghai followed by a counter of 6 digits,
// none comes twice, and a full period answers period_exhausted through
// each (a 2-digit counter: 99 numbers a day).
func TestDatedTagEveryRoute(t *testing.T) {
	ctx := context.Background()
	s := openStore(t, testdb.SQLite(t))
	for _, tag := range []leafd.Tag{
		{Name: "orders", Step: 20, MaxID: 1, Format: segment.FormatDated, Period: segment.PeriodDay, Zone: "Asia/Shanghai", Digits: 6},
		{Name: "small", Step: 20, MaxID: 1, Format: segment.FormatDated, Period: segment.PeriodDay, Zone: "Asia/Shanghai", Digits: 2},
	} {
		if _, err := s.CreateTag(ctx, tag); err != nil {
			t.Fatal(err)
		}
	}
	p := newPair(t, s, bothModes)
	sh, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	day := func(id int64, digits int) bool {
		d := id
		for range digits {
			d /= 10
		}
		for _, at := range []time.Time{start, time.Now()} {
			if n, _ := strconv.ParseInt(at.In(sh).Format("20060102"), 10, 64); d == n {
				return true
			}
		}
		return false
	}
	clients := map[string]*client.Client{}
	for name, mk := range map[string]func(opts ...client.Option) (*client.Client, error){
		"http": func(opts ...client.Option) (*client.Client, error) { return client.New(p.url, opts...) },
		"grpc": func(opts ...client.Option) (*client.Client, error) { return client.NewGRPC(p.addr, opts...) },
	} {
		for kind, opts := range map[string][]client.Option{
			"direct": nil,
			"buffer": {client.WithBuffer(50, 0.5)},
			"ranges": {client.WithRanges(50, 0.5)},
		} {
			c, err := mk(opts...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			clients[name+"/"+kind] = c
		}
	}
	seen := map[int64]string{}
	record := func(by string, ids ...int64) {
		t.Helper()
		for _, id := range ids {
			if !day(id, 6) || id%1_000_000 == 0 || id >= 1e14 {
				t.Fatalf("%s: %d is not today's date in Shanghai and a counter of 6 digits", by, id)
			}
			if other, ok := seen[id]; ok {
				t.Fatalf("%s: %d came twice (first to %s)", by, id, other)
			}
			seen[id] = by
		}
	}
	for round := range 3 {
		for name, c := range clients {
			id, err := c.Next(ctx, "orders")
			if err != nil {
				t.Fatalf("%s: Next: %v", name, err)
			}
			ids, err := c.NextN(ctx, "orders", 7)
			if err != nil || len(ids) != 7 {
				t.Fatalf("%s: NextN(7) = %v, %v", name, ids, err)
			}
			record(name, append(ids, id)...)
		}
		res, err := http.Get(p.url + "/api/segment/get/orders")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		id, err := strconv.ParseInt(strings.TrimSpace(string(body)), 10, 64)
		if res.StatusCode != 200 || err != nil {
			t.Fatalf("round %d: the Leaf route answered %d %q", round, res.StatusCode, body)
		}
		record("leaf route", id)
	}
	if first := slices.Min(keysOf(seen)); first%1_000_000 != 1 {
		t.Fatalf("the first number of the day is %d, want a counter of 000001", first)
	}

	// 99 numbers of the day, then period_exhausted through each route.
	got := 0
	for got < 99 {
		ids, err := clients["http/direct"].NextN(ctx, "small", 9)
		if err != nil {
			break
		}
		for _, id := range ids {
			if !day(id, 2) || id%100 == 0 {
				t.Fatalf("small: %d is not today's date and a counter of 2 digits", id)
			}
		}
		got += len(ids)
	}
	if got != 99 {
		t.Fatalf("small handed out %d numbers of the day, want 99", got)
	}
	for name, c := range clients {
		_, err := c.Next(ctx, "small")
		var e *client.Error
		if !errors.Is(err, client.ErrPeriodExhausted) || !errors.As(err, &e) || !strings.Contains(e.Message, `tag "small"`) ||
			!strings.Contains(e.Message, "99, the capacity of 2 digits") {
			t.Fatalf("%s: Next of a full day = %v, want period_exhausted naming the tag and its capacity", name, err)
		}
		if strings.HasPrefix(name, "http/") && e.Status != http.StatusServiceUnavailable {
			t.Fatalf("%s: period_exhausted with status %d, want 503", name, e.Status)
		}
	}
}

func keysOf(m map[int64]string) []int64 {
	ks := make([]int64, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}
