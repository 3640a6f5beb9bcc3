package store_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
	"github.com/leafd/leafd/store/storetest"
)

// The database's share of the cost of many tags: ListTags, which the
// allocator calls at start and every tag_refresh, and LookupTag, which it
// calls for a tag it does not hold, over a table of 10,000 tags (and
// 100,000 with LEAFD_BENCH_LARGE=1). The set-up is outside the timer.

// BenchmarkScaleListTags reads every row of a table of n tags.
func BenchmarkScaleListTags(b *testing.B) {
	sizes := []int{10_000}
	if os.Getenv("LEAFD_BENCH_LARGE") == "1" {
		sizes = append(sizes, 100_000)
	}
	ctx := context.Background()
	for _, driver := range store.Drivers() {
		for _, n := range sizes {
			b.Run(fmt.Sprintf("%s/%d", driver, n), func(b *testing.B) {
				s := openScaleStore(b, driver, n)
				b.ReportAllocs()
				for b.Loop() {
					tags, err := s.ListTags(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if len(tags) != n {
						b.Fatalf("%d tags listed, want %d", len(tags), n)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/list")
			})
		}
	}
}

// BenchmarkScaleLookupTag looks up one tag by name in a table of 10,000,
// found and not found: the price of one look-up of a tag not in memory.
func BenchmarkScaleLookupTag(b *testing.B) {
	ctx := context.Background()
	for _, driver := range store.Drivers() {
		b.Run(driver, func(b *testing.B) {
			s := openScaleStore(b, driver, 10_000)
			for _, name := range []string{scaleTagName(5_000), "nosuch"} {
				b.Run(map[bool]string{true: "found", false: "unknown"}[name != "nosuch"], func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if _, err := s.LookupTag(ctx, name); err != nil && name != "nosuch" {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

func scaleTagName(i int) string { return fmt.Sprintf("scale%06d", i) }

// openScaleStore returns a store over a fresh, migrated database of driver
// holding n tags, inserted by SQL 1,000 rows a statement.
func openScaleStore(b *testing.B, driver string, n int) storetest.Store {
	b.Helper()
	dsn := testdb.DSN(b, driver)
	s, err := store.Open(driver, dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	raw := testdb.SQL(b, driver, dsn)
	defer raw.Close()
	tx, err := raw.Begin()
	if err != nil {
		b.Fatal(err)
	}
	defer tx.Rollback()
	for lo := 0; lo < n; lo += 1000 {
		hi := min(lo+1000, n)
		var q strings.Builder
		args := make([]any, 0, hi-lo)
		q.WriteString("INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES ")
		for i := lo; i < hi; i++ {
			if i > lo {
				q.WriteByte(',')
			}
			q.WriteString("(?, 1, 1000, 'scale benchmark')")
			args = append(args, scaleTagName(i))
		}
		if _, err := tx.Exec(raw.Rebind(q.String()), args...); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	return s
}
