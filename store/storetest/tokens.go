package storetest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/store"
)

// testTokens: a token made is listed by another store on the same database
// with its hash (never its text), its patterns sorted and deduplicated, its
// description and creation time; revoked, it is gone, and a second
// revocation or an unknown id is unknown_token.
func testTokens(t *testing.T, h *harness) {
	s, other := h.migrated(), h.open()
	ctx := context.Background()
	before := time.Now().Add(-time.Second)
	tok, text, err := s.CreateToken(ctx, []string{"pay*", "order", "order"}, "billing service")
	if err != nil {
		t.Fatalf("CreateToken: %v", err)
	}
	if !strings.HasPrefix(text, store.TokenPrefix) || strings.Contains(text, tok.Hash) {
		t.Fatalf("token text %q: want the prefix %q", text, store.TokenPrefix)
	}
	if id, ok := store.TokenID(text); !ok || id != tok.ID {
		t.Fatalf("TokenID(text) = %q, %v; want %q", id, ok, tok.ID)
	}
	if tok.Hash != store.HashToken(text) || strings.Contains(text, tok.Hash) {
		t.Fatalf("hash %q is not the SHA-256 of the text", tok.Hash)
	}
	_, text2, err := s.CreateToken(ctx, []string{"*"}, "")
	if err != nil {
		t.Fatalf("CreateToken(*): %v", err)
	}
	if text2 == text {
		t.Fatal("two tokens have the same text")
	}
	list, err := other.ListTokens(ctx)
	if err != nil {
		t.Fatalf("ListTokens: %v", err)
	}
	if len(list) != 2 {
		t.Fatalf("ListTokens = %+v, want 2 tokens", list)
	}
	got := list[0]
	if got.ID != tok.ID && list[1].ID == tok.ID {
		got = list[1]
	}
	if got.ID != tok.ID || got.Hash != tok.Hash || !slices.Equal(got.Tags, []string{"order", "pay*"}) ||
		got.Description != "billing service" || got.Created.Before(before) || got.Created.After(time.Now().Add(time.Second)) {
		t.Fatalf("listed %+v, want %+v", got, tok)
	}
	if err := other.RevokeToken(ctx, tok.ID); err != nil {
		t.Fatalf("RevokeToken: %v", err)
	}
	wantCode(t, "RevokeToken again", other.RevokeToken(ctx, tok.ID), leafd.EUnknownToken)
	wantCode(t, "RevokeToken of an unknown id", s.RevokeToken(ctx, "nope"), leafd.EUnknownToken)
	list, err = s.ListTokens(ctx)
	if err != nil || len(list) != 1 || list[0].ID == tok.ID || !slices.Equal(list[0].Tags, []string{"*"}) {
		t.Fatalf("ListTokens after the revocation = %+v, %v; want the other token alone", list, err)
	}
}

// testTokenInvalid: bad patterns and descriptions are refused before
// anything is written.
func testTokenInvalid(t *testing.T, h *harness) {
	s := h.migrated()
	for name, tags := range map[string][]string{
		"None":          nil,
		"Empty":         {""},
		"Space":         {"a b"},
		"Middle":        {"a*b"},
		"Two":           {"a**"},
		"Leading":       {"*a"},
		"Dots":          {".."},
		"Comma":         {"a,b"},
		"TooMany":       slices.Repeat([]string{"a"}, store.MaxTokenTags+1),
		"PrefixTooLong": {strings.Repeat("a", 128) + "*"},
	} {
		_, _, err := s.CreateToken(context.Background(), tags, "")
		wantCode(t, "CreateToken "+name, err, leafd.EInvalidBody)
	}
	_, _, err := s.CreateToken(context.Background(), []string{"a"}, strings.Repeat("é", 257))
	wantCode(t, "CreateToken with a long description", err, leafd.EInvalidBody)
	if list, err := s.ListTokens(context.Background()); err != nil || len(list) != 0 {
		t.Fatalf("ListTokens = %v, %v; want none", list, err)
	}
}
