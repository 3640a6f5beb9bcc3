package storetest

import (
	"context"
	"testing"

	"github.com/leafd/leafd"
)

// An opaque tag keeps its format, domain and key fingerprint through
// creation, the lookup, the list and an update of its step; a sequential
// tag has none; an unknown format or digits on a sequential tag are
// refused.
func testTagFormat(t *testing.T, h *harness) {
	s := h.migrated()
	ctx := context.Background()
	want := leafd.Tag{Name: "user", Step: 10, Format: "opaque", Digits: 9, KeyFingerprint: "0123456789abcdef"}
	created, err := s.CreateTag(ctx, want)
	if err != nil {
		t.Fatal(err)
	}
	same := func(what string, got leafd.Tag) {
		t.Helper()
		if got.Format != want.Format || got.Digits != want.Digits || got.KeyFingerprint != want.KeyFingerprint {
			t.Fatalf("%s: %+v, want format %s, digits %d, fingerprint %s", what, got, want.Format, want.Digits, want.KeyFingerprint)
		}
	}
	same("CreateTag", created)
	got, err := s.LookupTag(ctx, "user")
	if err != nil {
		t.Fatal(err)
	}
	same("LookupTag", got)
	step := int64(20)
	old, updated, err := s.UpdateTag(ctx, "user", leafd.TagUpdate{Step: &step})
	if err != nil {
		t.Fatal(err)
	}
	same("UpdateTag's old", old)
	same("UpdateTag's new", updated)
	if _, err := s.CreateTag(ctx, leafd.Tag{Name: "plain", Step: 10}); err != nil {
		t.Fatal(err)
	}
	tags, err := s.ListTags(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tag := range tags {
		switch tag.Name {
		case "user":
			same("ListTags", tag)
		case "plain":
			if tag.Format != "" || tag.Digits != 0 || tag.KeyFingerprint != "" {
				t.Fatalf("a sequential tag listed as %+v", tag)
			}
		}
	}
	for _, bad := range []leafd.Tag{
		{Name: "a", Step: 10, Format: "secret"},
		{Name: "b", Step: 10, Digits: 9},
	} {
		if _, err := s.CreateTag(ctx, bad); leafd.ErrorCode(err) != leafd.EInvalidBody {
			t.Errorf("CreateTag(%+v): %v, want invalid_body", bad, err)
		}
	}
}
