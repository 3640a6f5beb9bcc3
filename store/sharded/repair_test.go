package sharded_test

import (
	"context"
	"strings"
	"testing"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/store"
)

// A sharded store keeps no high-water marks: RepairTag refuses with
// range_unsupported, saying why, and changes nothing; an unknown tag is
// unknown_tag, as on every store.
func TestShardedRepairTag(t *testing.T) {
	forEachDriver(t, store.Drivers(), func(t *testing.T, driver string) {
		s := openSharded(t, driver, shardDSNs(t, driver, 2), shardSlots)
		ctx := context.Background()
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CreateTag(ctx, leafd.Tag{Name: "order", MaxID: 1, Step: 10}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Allocate(ctx, "order", 10); err != nil {
			t.Fatal(err)
		}
		before, err := s.LookupTag(ctx, "order")
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.RepairTag(ctx, "order")
		if leafd.ErrorCode(err) != leafd.ERangeUnsupported || !strings.Contains(leafd.ErrorMessage(err), "no high-water mark") {
			t.Fatalf("RepairTag on a sharded store: %v, want range_unsupported saying it keeps no high-water mark", err)
		}
		if after, err := s.LookupTag(ctx, "order"); err != nil || after.MaxID != before.MaxID {
			t.Fatalf("RepairTag on a sharded store changed the tag: %+v then %+v (%v)", before, after, err)
		}
		if _, err := s.RepairTag(ctx, "nope"); leafd.ErrorCode(err) != leafd.EUnknownTag {
			t.Fatalf("RepairTag of an unknown tag on a sharded store: %v, want unknown_tag", err)
		}
	})
}
