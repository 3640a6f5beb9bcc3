package storetest

import (
	"context"
	"strings"
	"testing"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

// An opaque tag keeps its format, domain and key fingerprint through
// creation, the lookup, the list, an update of its step and its ranges; a
// sequential tag has none; an unknown format or digits on a sequential tag are
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
	// A range carries the format of the row it came from: a server that
	// serves a tag as sequential drops one of a tag created again in
	// another format since it read the tag.
	for name, format := range map[string]string{"user": "opaque", "plain": ""} {
		a, err := s.Allocate(ctx, name, 10)
		if err != nil {
			t.Fatal(err)
		}
		if a.Format != format {
			t.Errorf("Allocate(%q) = %+v, want format %q", name, a, format)
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

// A tag deleted from leaf_alloc keeps its past: its format and the IDs it
// issued. Created again in the format, domain and key it had, it continues
// above them at once (no tag_rewound, no repair); in any other it is
// refused with tag_conflict and nothing is written. Created again by SQL,
// as a Leaf user would, it keeps its format, and the repair the
// tag_rewound message gives goes on above its mark in that format.
func testRecreateTag(t *testing.T, h *harness) {
	s := h.migrated()
	ctx := context.Background()
	const fp, otherFP = "0123456789abcdef", "fedcba9876543210"
	opaque := leafd.Tag{Name: "user", Step: 10, Format: "opaque", Digits: 9, KeyFingerprint: fp}
	create(t, s, opaque)
	h.allocate(s, "user", 10, segment.Allocation{Start: 1, End: 11, TableStep: 10, Format: "opaque"})
	h.allocate(s, "user", 10, segment.Allocation{Start: 11, End: 21, TableStep: 10, Format: "opaque"})
	h.exec("DELETE FROM leaf_alloc WHERE biz_tag = 'user'")

	refused := func(what string, tag leafd.Tag, says ...string) {
		t.Helper()
		_, err := s.CreateTag(ctx, tag)
		wantCode(t, what, err, leafd.ETagConflict)
		for _, want := range says {
			if msg := leafd.ErrorMessage(err); !strings.Contains(msg, want) {
				t.Fatalf("%s: message %q does not say %q", what, msg, want)
			}
		}
		if _, err := s.LookupTag(ctx, tag.Name); leafd.ErrorCode(err) != leafd.EUnknownTag {
			t.Fatalf("%s: LookupTag afterwards = %v, want unknown_tag (nothing written)", what, err)
		}
	}
	refused("an opaque tag created again as sequential", leafd.Tag{Name: "user", Step: 10},
		"was an opaque tag of 9 digits", `"format":"opaque","digits":9`, "pick a new name")
	refused("an opaque tag created again with other digits", leafd.Tag{Name: "user", Step: 10, Format: "opaque", Digits: 12, KeyFingerprint: fp},
		"opaque tag of 12 digits", "was an opaque tag of 9 digits")
	refused("an opaque tag created again with another key", leafd.Tag{Name: "user", Step: 10, Format: "opaque", Digits: 9, KeyFingerprint: otherFP},
		"segment.opaque_key", fp, otherFP)

	// As it was: above its mark, with the format of the store.
	got := create(t, s, opaque)
	if got.MaxID != 21 || got.Format != "opaque" || got.Digits != 9 || got.KeyFingerprint != fp {
		t.Fatalf("the opaque tag created again = %+v, want max_id 21 and its format", got)
	}
	h.allocate(s, "user", 10, segment.Allocation{Start: 21, End: 31, TableStep: 10, Format: "opaque"})

	// Created again by SQL: still opaque (its format row is kept); the
	// tag_rewound message's UPDATE goes on above the mark, still opaque.
	h.exec("DELETE FROM leaf_alloc WHERE biz_tag = 'user'")
	h.insert("user", 1, 10)
	if got, err := s.LookupTag(ctx, "user"); err != nil || got.Format != "opaque" || got.Digits != 9 {
		t.Fatalf("LookupTag of the opaque tag created again by SQL = %+v, %v, want opaque of 9 digits", got, err)
	}
	wantRewound(t, h, s, "user", 10, 31)
	h.exec("UPDATE leaf_alloc SET max_id = 31 WHERE biz_tag = 'user'")
	h.allocate(s, "user", 10, segment.Allocation{Start: 31, End: 41, TableStep: 10, Format: "opaque"})
	if tags, err := s.ListTags(ctx); err != nil || len(tags) != 1 || tags[0].Format != "opaque" {
		t.Fatalf("ListTags after the repair = %+v, %v, want the opaque tag", tags, err)
	}

	// A sequential tag that issued IDs is sequential for good.
	create(t, s, leafd.Tag{Name: "seq", Step: 10})
	h.allocate(s, "seq", 10, segment.Allocation{Start: 1, End: 11, TableStep: 10})
	h.exec("DELETE FROM leaf_alloc WHERE biz_tag = 'seq'")
	refused("a sequential tag created again as opaque", leafd.Tag{Name: "seq", Step: 10, Format: "opaque", KeyFingerprint: fp},
		"was a sequential tag", `"format":"sequential"`)
	if got := create(t, s, leafd.Tag{Name: "seq", Step: 10, MaxID: 1}); got.MaxID != 11 || got.Format != "" {
		t.Fatalf("the sequential tag created again = %+v, want max_id 11, sequential", got)
	}
	h.exec("DELETE FROM leaf_alloc WHERE biz_tag = 'seq'")
	if got := create(t, s, leafd.Tag{Name: "seq", Step: 10, MaxID: 500}); got.MaxID != 500 {
		t.Fatalf("the sequential tag created again above its mark = %+v, want max_id 500", got)
	}

	// An opaque tag never loaded keeps its format all the same; a
	// sequential one never loaded left nothing behind.
	create(t, s, leafd.Tag{Name: "idle", Step: 10, Format: "opaque", KeyFingerprint: fp})
	h.exec("DELETE FROM leaf_alloc WHERE biz_tag = 'idle'")
	refused("an opaque tag never loaded created again as sequential", leafd.Tag{Name: "idle", Step: 10}, "opaque tag below 2^53")
	// A name that differs only in letter case from a deleted tag's: its
	// own tag where names are exact; on MySQL, whose collation shares the
	// deleted tag's records with it, refused. Never an internal error.
	h.exec("DELETE FROM leaf_alloc WHERE biz_tag = 'user'")
	if _, err := s.CreateTag(ctx, leafd.Tag{Name: "USER", Step: 10, Format: "opaque", Digits: 6, KeyFingerprint: fp}); err != nil {
		wantCode(t, "CreateTag of a case twin of a deleted tag", err, leafd.ETagConflict)
	}
	create(t, s, leafd.Tag{Name: "plain", Step: 10})
	h.exec("DELETE FROM leaf_alloc WHERE biz_tag = 'plain'")
	if got := create(t, s, leafd.Tag{Name: "plain", Step: 10, Format: "opaque", KeyFingerprint: fp}); got.Format != "opaque" || got.MaxID != 1 {
		t.Fatalf("a sequential tag never loaded created again as opaque = %+v", got)
	}
}
