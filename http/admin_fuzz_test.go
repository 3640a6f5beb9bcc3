package http_test

import (
	"strings"
	"testing"

	"github.com/leafd/leafd"
	leafhttp "github.com/leafd/leafd/http"
)

// allowed are the only codes a bad admin body may produce: never internal.
var allowed = map[string]bool{leafd.EInvalidBody: true, leafd.EInvalidTag: true, leafd.EBodyTooLarge: true}

// FuzzParseCreateTag feeds arbitrary bodies to the POST /api/tags decoder:
// it never panics, refuses with a client error code, and whatever it
// accepts is a tag the store can hold and serve. The seed corpus
// (testdata/fuzz) runs with the ordinary tests.
func FuzzParseCreateTag(f *testing.F) {
	for _, s := range []string{
		`{"tag":"order"}`, `{"tag":"order","step":1000,"max_id":1,"description":"x"}`,
		`{"tag":"a","max_id":"9223372036854774807","step":1000}`, `{"tag":"a","max_id":"9223372036854774808","step":1000}`,
		`{"tag":"a b"}`, `{}`, `[]`, `null`, ``, `{"tag":"a"} {}`, `{"tag":"a","extra":1}`, `{"tag":"a","step":-1}`,
		`{"tag":"a","step":1e3}`, `{"tag":"a","description":"` + strings.Repeat("é", 300) + `"}`, `{"tag":"\u0000"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		tag, err := leafhttp.ParseCreateTag(strings.NewReader(body), 5000)
		if err != nil {
			if !allowed[leafd.ErrorCode(err)] || leafd.ErrorMessage(err) == "" {
				t.Fatalf("body %q: error %v with code %q", body, err, leafd.ErrorCode(err))
			}
			return
		}
		if leafd.ValidateTag(tag.Name) != nil || tag.Step < 1 || tag.Step > 5000 || tag.MaxID < 1 ||
			tag.MaxID > leafd.MaxID-tag.Step || leafd.ValidateDescription(tag.Description) != nil {
			t.Fatalf("body %q accepted as %+v", body, tag)
		}
	})
}

// FuzzParseUpdateTag does the same for PATCH /api/tags/{tag}.
func FuzzParseUpdateTag(f *testing.F) {
	for _, s := range []string{`{"step":10}`, `{"description":""}`, `{"step":10,"description":"d"}`, `{}`,
		`{"max_id":"1"}`, `{"max_id":null}`, `{"step":0}`, `{"step":"10"}`, `{"tag":"x"}`, `null`, `{"step":10}x`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		u, err := leafhttp.ParseUpdateTag(strings.NewReader(body), 5000)
		if err != nil {
			if !allowed[leafd.ErrorCode(err)] || leafd.ErrorMessage(err) == "" {
				t.Fatalf("body %q: error %v with code %q", body, err, leafd.ErrorCode(err))
			}
			return
		}
		if u.Step == nil && u.Description == nil {
			t.Fatalf("body %q accepted as an update that changes nothing", body)
		}
		if u.Step != nil && (*u.Step < 1 || *u.Step > 5000) {
			t.Fatalf("body %q accepted with step %d", body, *u.Step)
		}
		if u.Description != nil && leafd.ValidateDescription(*u.Description) != nil {
			t.Fatalf("body %q accepted with description %q", body, *u.Description)
		}
	})
}
