package http_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
)

// strictServer is a server with the admin routes for tags and tokens over
// a SQLite store, holding the tag "order" (step 1000, description
// "orders") and no token.
func strictServer(t *testing.T) (string, store.Store) {
	t.Helper()
	s, err := store.Open(store.DefaultDriver(), testdb.DSN(t, store.DefaultDriver()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	a := startAllocator(t, s, segment.Config{MaxStep: 100, WaitTimeout: time.Second, TagRefresh: time.Hour, Logger: quiet})
	srv := leafhttp.New(leafhttp.Config{Segment: a, Tags: s, Tokens: s, AdminToken: token, MaxStep: 5000, Logger: quiet})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	if r := authed(t, "POST", ts.URL+"/api/tags", `{"tag":"order","description":"orders"}`); r.status != 201 {
		t.Fatalf("setup: %d %q", r.status, r.body)
	}
	return ts.URL, s
}

// The admin bodies are read strictly: keys exactly as the contract names
// them and once each, max_id's string as digits alone, and no string, at
// any depth, with a NUL, an unpaired surrogate or bytes that are not
// UTF-8. encoding/json lets each of these through (matching keys without
// case, keeping the last of a repeated key, storing the NUL, turning the
// others into U+FFFD): each is 400 invalid_body with a message naming the
// key and what to send, and changes nothing.
func TestAdminStrictJSON(t *testing.T) {
	url, s := strictServer(t)
	const (
		nul      = `holds a NUL character (\u0000): remove it`
		surr     = `holds an unpaired UTF-16 surrogate `
		notUTF8  = `which is not UTF-8: encode the text as UTF-8`
		inexact  = `? keys are matched exactly`
		twice    = `is given twice: give it once`
		digits   = `write digits only, e.g. "7" or 7`
		postTags = "/api/tags"
		patch    = "/api/tags/order"
		tokens   = "/api/tokens"
	)
	for _, c := range []struct {
		name, method, path, body string
		want                     []string
	}{
		// Keys match exactly.
		{"UpperTag", "POST", postTags, `{"TAG":"x"}`, []string{`unknown field "TAG": did you mean "tag"` + inexact}},
		{"TitleStep", "POST", postTags, `{"tag":"x","Step":5}`, []string{`unknown field "Step": did you mean "step"` + inexact}},
		{"MixedMaxID", "POST", postTags, `{"tag":"x","Max_ID":5}`, []string{`did you mean "max_id"`}},
		{"UpperDescription", "POST", postTags, `{"tag":"x","DESCRIPTION":"d"}`, []string{`did you mean "description"`}},
		{"UnicodeFold", "POST", postTags, `{"tag":"x","ſtep":5}`, []string{`unknown field "ſtep": did you mean "step"`}}, // ſ folds to s
		{"PatchUpperStep", "PATCH", patch, `{"STEP":5}`, []string{`unknown field "STEP": did you mean "step"` + inexact}},
		{"PatchUpperDescription", "PATCH", patch, `{"Description":"d"}`, []string{`did you mean "description"`}},
		{"PatchUpperMaxID", "PATCH", patch, `{"MAX_ID":"1"}`, []string{`did you mean "max_id"`}},
		{"TokenUpperTags", "POST", tokens, `{"TAGS":["order"]}`, []string{`unknown field "TAGS": did you mean "tags"` + inexact}},
		{"TokenLongS", "POST", tokens, `{"tagſ":["order"]}`, []string{`unknown field "tagſ": did you mean "tags"`}},
		{"TokenUpperDescription", "POST", tokens, `{"tags":["order"],"Description":"d"}`, []string{`did you mean "description"`}},
		// Each key once.
		{"TwoTags", "POST", postTags, `{"tag":"x","tag":"y"}`, []string{`the key "tag" ` + twice}},
		{"TwoSteps", "POST", postTags, `{"tag":"x","step":5,"step":5}`, []string{`the key "step" ` + twice}},
		{"TwoStepsApart", "POST", postTags, `{"step":5, "tag":"x" ,"max_id":3,  "step" :6}`, []string{`the key "step" ` + twice}},
		{"TwoCasesOfTag", "POST", postTags, `{"tag":"x","Tag":"y"}`, []string{`did you mean "tag"`}},
		{"PatchTwoSteps", "PATCH", patch, `{"step":5,"step":6}`, []string{`the key "step" ` + twice}},
		{"PatchTwoDescriptions", "PATCH", patch, `{"description":"a","description":"b"}`, []string{`the key "description" ` + twice}},
		{"TokenTwoTags", "POST", tokens, `{"tags":["a"],"tags":["b"]}`, []string{`the key "tags" ` + twice}},
		// max_id: a number, or a string of digits.
		{"MaxIDPlus", "POST", postTags, `{"tag":"x","max_id":"+7"}`, []string{`max_id`, `not "+7": ` + digits}},
		{"MaxIDSpace", "POST", postTags, `{"tag":"x","max_id":" 7"}`, []string{`not " 7": ` + digits}},
		{"MaxIDEmpty", "POST", postTags, `{"tag":"x","max_id":""}`, []string{`not "": ` + digits}},
		{"MaxIDEscaped", "POST", postTags, `{"tag":"x","max_id":"\u0037"}`, []string{digits}},
		{"MaxIDExponent", "POST", postTags, `{"tag":"x","max_id":"7e0"}`, []string{digits}},
		// No NUL.
		{"DescriptionNUL", "POST", postTags, `{"tag":"x","description":"a\u0000b"}`, []string{`description ` + nul}},
		{"TagNUL", "POST", postTags, `{"tag":"x\u0000"}`, []string{`tag ` + nul}},
		{"KeyNUL", "POST", postTags, `{"tag":"x","step\u0000":5}`, []string{`a key of the body ` + nul}},
		{"PatchDescriptionNUL", "PATCH", patch, `{"description":"\u0000"}`, []string{`description ` + nul}},
		{"TokenTagsNUL", "POST", tokens, `{"tags":["order","pay\u0000*"]}`, []string{`tags ` + nul}},
		{"TokenDescriptionNUL", "POST", tokens, `{"tags":["order"],"description":"\u0000"}`, []string{`description ` + nul}},
		// No unpaired surrogate.
		{"LoneHigh", "POST", postTags, `{"tag":"x","description":"a\ud800"}`, []string{`description ` + surr + `\ud800`}},
		{"LoneHighUpper", "POST", postTags, `{"tag":"x","description":"\uDBFFz"}`, []string{`description ` + surr + `\udbff`}},
		{"LoneLow", "POST", postTags, `{"tag":"x","description":"\udc00"}`, []string{surr + `\udc00`}},
		{"Reversed", "POST", postTags, `{"tag":"x","description":"\udc00\ud800"}`, []string{surr + `\udc00`}},
		{"HighThenLetter", "POST", postTags, `{"tag":"x","description":"\ud800\u0041"}`, []string{surr + `\ud800`}},
		{"TwoHighs", "POST", postTags, `{"tag":"x","description":"\ud800\ud800\udc00"}`, []string{surr + `\ud800`}},
		{"PatchLoneHigh", "PATCH", patch, `{"description":"\ud83d"}`, []string{`description ` + surr + `\ud83d`}},
		{"TokenTagsLoneHigh", "POST", tokens, `{"tags":["a","\ud800"]}`, []string{`tags ` + surr + `\ud800`}},
		// No bytes that are not UTF-8.
		{"RawFF", "POST", postTags, "{\"tag\":\"x\",\"description\":\"a\xffb\"}", []string{`description holds the byte 0xff, ` + notUTF8}},
		{"RawSurrogate", "POST", postTags, "{\"tag\":\"x\",\"description\":\"\xed\xa0\x80\"}", []string{`description holds the byte 0xed, ` + notUTF8}},
		{"Overlong", "POST", postTags, "{\"tag\":\"x\",\"description\":\"\xc0\xaf\"}", []string{`description holds the byte 0xc0, ` + notUTF8}},
		{"Truncated", "POST", postTags, "{\"tag\":\"x\",\"description\":\"\xc3\"}", []string{`description holds the byte 0xc3, ` + notUTF8}},
		{"KeyNotUTF8", "POST", postTags, "{\"tag\":\"x\",\"st\xffep\":5}", []string{`a key of the body holds the byte 0xff`}},
		{"PatchNotUTF8", "PATCH", patch, "{\"description\":\"\xfe\"}", []string{`description holds the byte 0xfe`}},
		{"TokenTagsNotUTF8", "POST", tokens, "{\"tags\":[\"a\",\"b\xff\"]}", []string{`tags holds the byte 0xff`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := authed(t, c.method, url+c.path, c.body)
			if r.status != 400 || errorCode(t, r) != leafd.EInvalidBody {
				t.Fatalf("%s %s %q = %d %q, want 400 invalid_body", c.method, c.path, c.body, r.status, r.body)
			}
			msg := errorMessage(t, r)
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%s: message %q does not say %q", c.body, msg, w)
				}
			}
		})
	}
	// Nothing of the above changed the store.
	tags, err := s.ListTags(context.Background())
	if err != nil || len(tags) != 1 || tags[0].Name != "order" || tags[0].Step != 1000 || tags[0].MaxID != 1 || tags[0].Description != "orders" {
		t.Fatalf("tags after the refused bodies: %+v, %v", tags, err)
	}
	if toks, err := s.ListTokens(context.Background()); err != nil || len(toks) != 0 {
		t.Fatalf("tokens after the refused bodies: %+v, %v", toks, err)
	}
}

// What was valid stays valid and means the same: max_id as a number or a
// string of digits, escaped characters (a surrogate pair among them), text
// in UTF-8, and an escaped backslash before "u0000", which is text.
func TestAdminStrictJSONValid(t *testing.T) {
	url, s := strictServer(t)
	for _, c := range []struct {
		name, body, tag, description string
		maxID                        int64
	}{
		{"MaxIDNumber", `{"tag":"n","max_id":7}`, "n", "", 7},
		{"MaxIDString", `{"tag":"s","max_id":"7"}`, "s", "", 7},
		{"MaxIDLeadingZeros", `{"tag":"z","max_id":"007"}`, "z", "", 7},
		{"MaxIDBig", `{"tag":"big","max_id":"9223372036854774807"}`, "big", "", 9223372036854774807},
		{"Pair", `{"tag":"pair","description":"a\ud83d\ude00b"}`, "pair", "a😀b", 1},
		{"PairUpper", `{"tag":"pairu","description":"\uD83D\uDE00"}`, "pairu", "😀", 1},
		{"UTF8", `{"tag":"utf8","description":"café 😀 ￿"}`, "utf8", "café 😀 ￿", 1},
		{"EscapedBackslash", `{"tag":"bs","description":"\\u0000 \\ud800"}`, "bs", `\u0000 \ud800`, 1},
		{"Escapes", `{"tag":"esc","description":"\"\/\b\f\n\r\t\u0001\u00e9"}`, "esc", "\"/\b\f\n\r\t\x01é", 1},
		{"Spaces", " {\n\t\"tag\" : \"sp\" ,\r\n \"step\" : 5 } ", "sp", "", 1},
		{"NullMaxID", `{"tag":"null","max_id":null}`, "null", "", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := authed(t, "POST", url+"/api/tags", c.body)
			if r.status != 201 {
				t.Fatalf("POST %q = %d %q, want 201", c.body, r.status, r.body)
			}
			got, err := s.LookupTag(context.Background(), c.tag)
			if err != nil || got.MaxID != c.maxID || got.Description != c.description {
				t.Fatalf("POST %q stored %+v (description %q), %v; want max_id %d, description %q", c.body, got, got.Description, err, c.maxID, c.description)
			}
		})
	}
	for _, c := range []struct{ body, description string }{
		{`{"step":2000}`, "orders"},
		{`{"description":"\ud83d\ude00"}`, "😀"},
		{`{"step":3000,"description":"new"}`, "new"},
	} {
		if r := authed(t, "PATCH", url+"/api/tags/order", c.body); r.status != 200 {
			t.Fatalf("PATCH %q = %d %q, want 200", c.body, r.status, r.body)
		}
		if got, err := s.LookupTag(context.Background(), "order"); err != nil || got.Description != c.description {
			t.Fatalf("PATCH %q stored %+v, %v", c.body, got, err)
		}
	}
	for _, body := range []string{`{"tags":["order","pay*"]}`, `{"tags":["order"],"description":"caf\u00e9 \ud83d\ude00"}`} {
		if r := authed(t, "POST", url+"/api/tokens", body); r.status != 201 {
			t.Fatalf("POST /api/tokens %q = %d %q, want 201", body, r.status, r.body)
		}
	}
	toks, err := s.ListTokens(context.Background())
	if err != nil || len(toks) != 2 || toks[0].Description+toks[1].Description != "café 😀" {
		t.Fatalf("tokens: %+v, %v", toks, err)
	}
}

// errorMessage is the message of the JSON error r holds.
func errorMessage(t *testing.T, r response) string {
	t.Helper()
	var body struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal([]byte(r.body), &body); err != nil {
		t.Fatalf("body %q is not the JSON error model (%v)", r.body, err)
	}
	return body.Error.Message
}
