package http_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/leafd/leafd"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
)

// allowed are the only codes a bad admin body may produce: never internal.
var allowed = map[string]bool{leafd.EInvalidBody: true, leafd.EInvalidTag: true, leafd.EBodyTooLarge: true}

// strictSeeds are bodies of each kind the strict reading refuses (keys in
// another case, a key twice, a signed max_id string, a NUL, unpaired
// surrogates, bytes that are not UTF-8), for every fuzz target.
var strictSeeds = []string{
	`{"TAG":"x"}`, `{"tag":"x","Step":5}`, `{"Step":5}`, `{"ſtep":5}`, `{"tag":"x","tag":"y"}`, `{"step":5,"step":6}`,
	`{"tag":"x","max_id":"+7"}`, `{"tag":"x","max_id":" 7"}`, `{"tag":"x","max_id":"\u0037"}`,
	`{"tag":"x","description":"\u0000"}`, `{"description":"a\ud800"}`, `{"description":"\udc00\ud800"}`,
	`{"description":"\ud83d\ude00"}`, `{"description":"\\u0000"}`, "{\"description\":\"\xff\"}",
	"{\"st\xffep\":5}", `{"step\u0000":5}`, `{"tags":["a","b\u0000"]}`, `{"tags":["a"],"Tags":["b"]}`, `{"tags":["\ud800"]}`,
}

// oldInteger, oldCreate, oldUpdate and oldToken decode the admin bodies as leafd did
// before it read them strictly: keys without case, the last of a repeated
// key, max_id's string with its quotes trimmed and parsed leniently.
type oldInteger int64

func (n *oldInteger) UnmarshalJSON(b []byte) error {
	v, err := strconv.ParseInt(string(bytes.Trim(b, `"`)), 10, 64)
	*n = oldInteger(v)
	return err
}

type oldCreate struct {
	Tag         *string     `json:"tag"`
	Step        *int64      `json:"step"`
	MaxID       *oldInteger `json:"max_id"`
	Description *string     `json:"description"`
	Format      *string     `json:"format"`
	Digits      *int        `json:"digits"`
	Period      *string     `json:"period"`
	Zone        *string     `json:"zone"`
	MaxStep     *int64      `json:"max_step"`
}

type oldUpdate struct {
	Step        *int64          `json:"step"`
	Description *string         `json:"description"`
	MaxID       json.RawMessage `json:"max_id"`
}

type oldToken struct {
	Tags        *[]string `json:"tags"`
	Description *string   `json:"description"`
}

// oldDecode decodes body into dst as encoding/json does, one object of
// dst's fields and nothing after it.
func oldDecode(body string, dst any) error {
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return err
	}
	if dec.Decode(&json.RawMessage{}) != io.EOF {
		return errors.New("more than one value")
	}
	return nil
}

// strictlyValid checks what a body an admin route accepted must be: UTF-8,
// of dst's keys exactly, each once (counted by a walk of its tokens).
func strictlyValid(t *testing.T, body string, dst any) {
	t.Helper()
	if !utf8.ValidString(body) {
		t.Fatalf("body %q accepted with bytes that are not UTF-8", body)
	}
	var keys map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &keys); err != nil {
		t.Fatalf("body %q accepted, but is not one object: %v", body, err)
	}
	names := map[string]bool{}
	for i := range reflect.TypeOf(dst).Elem().NumField() {
		name, _, _ := strings.Cut(reflect.TypeOf(dst).Elem().Field(i).Tag.Get("json"), ",")
		names[name] = true
	}
	for k := range keys {
		if !names[k] {
			t.Fatalf("body %q accepted with the key %q", body, k)
		}
	}
	dec := json.NewDecoder(strings.NewReader(body))
	n := 0
	_, err := dec.Token()
	for ; err == nil && dec.More(); n++ {
		var v json.RawMessage
		if _, err = dec.Token(); err == nil {
			err = dec.Decode(&v)
		}
	}
	if err != nil {
		t.Fatalf("body %q accepted, but its keys do not read: %v", body, err)
	}
	if n != len(keys) {
		t.Fatalf("body %q accepted with %d keys, %d of them different", body, n, len(keys))
	}
}

// cleanText checks strings an admin route accepted: no NUL, and a U+FFFD
// only where the body wrote one, never one put in place of an unpaired
// surrogate or a byte that is not UTF-8.
func cleanText(t *testing.T, body string, texts ...string) {
	t.Helper()
	for _, s := range texts {
		if strings.ContainsRune(s, 0) {
			t.Fatalf("body %q accepted with a NUL in %q", body, s)
		}
		if strings.ContainsRune(s, utf8.RuneError) && !strings.ContainsRune(body, utf8.RuneError) && !strings.Contains(strings.ToLower(body), `\ufffd`) {
			t.Fatalf("body %q accepted with U+FFFD in %q, which it does not write", body, s)
		}
	}
}

// FuzzParseCreateTag feeds arbitrary bodies to the POST /api/tags decoder:
// it never panics, refuses with a client error code, and whatever it
// accepts is a tag the store can hold and serve, a body read strictly, and
// decoded as leafd always decoded it. The seed corpus (testdata/fuzz) runs
// with the ordinary tests.
func FuzzParseCreateTag(f *testing.F) {
	for _, s := range []string{
		`{"tag":"order"}`, `{"tag":"order","step":1000,"max_id":1,"description":"x"}`,
		`{"tag":"a","max_id":"9223372036854774807","step":1000}`, `{"tag":"a","max_id":"9223372036854774808","step":1000}`,
		`{"tag":"a b"}`, `{}`, `[]`, `null`, ``, `{"tag":"a"} {}`, `{"tag":"a","extra":1}`, `{"tag":"a","step":-1}`,
		`{"tag":"a","step":1e3}`, `{"tag":"a","description":"` + strings.Repeat("é", 300) + `"}`, `{"tag":"\u0000"}`,
		`{"tag":"o","format":"dated","period":"day","zone":"Asia/Shanghai","digits":6,"max_step":1}`,
		`{"tag":"o","format":"dated","period":"year","digits":14}`, `{"tag":"o","format":"dated","period":"day","digits":11}`,
		`{"tag":"o","format":"dated"}`, `{"tag":"o","period":"month"}`, `{"tag":"o","format":"dated","period":"day","zone":"Local"}`,
	} {
		f.Add(s)
	}
	for _, s := range strictSeeds {
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
		strictlyValid(t, body, &leafhttp.CreateTagRequest{})
		var raw struct {
			MaxID json.RawMessage `json:"max_id"`
		}
		if json.Unmarshal([]byte(body), &raw) == nil && strings.HasPrefix(string(raw.MaxID), `"`) &&
			strings.Trim(string(raw.MaxID), `"0123456789`) != "" {
			t.Fatalf("body %q accepted with max_id %s, not digits alone", body, raw.MaxID)
		}
		cleanText(t, body, tag.Name, tag.Description, tag.Zone)
		var old oldCreate
		if err := oldDecode(body, &old); err != nil {
			t.Fatalf("body %q accepted, but leafd refused it before: %v", body, err)
		}
		want := leafd.Tag{Step: 1000, MaxID: 1}
		if old.Tag != nil {
			want.Name = *old.Tag
		}
		if old.Step != nil {
			want.Step = *old.Step
		}
		if old.MaxID != nil {
			want.MaxID = int64(*old.MaxID)
		}
		if old.Description != nil {
			want.Description = *old.Description
		}
		if old.Format != nil && *old.Format != segment.FormatSequential {
			want.Format = *old.Format
		}
		if want.Format == segment.FormatDated {
			want.Digits = segment.DefaultDatedDigits
			if err := segment.ValidateDated(tag.Period, tag.Zone, tag.Digits); err != nil || tag.MaxStep < 0 || tag.MaxStep > 5000 {
				t.Fatalf("body %q accepted as a dated tag that cannot be served: %+v", body, tag)
			}
		}
		if old.Digits != nil {
			want.Digits = *old.Digits
		}
		if old.Period != nil {
			want.Period = *old.Period
		}
		if old.Zone != nil {
			want.Zone = *old.Zone
		}
		if old.MaxStep != nil {
			want.MaxStep = *old.MaxStep
		}
		if !reflect.DeepEqual(tag, want) {
			t.Fatalf("body %q accepted as %+v, but leafd read it before as %+v", body, tag, want)
		}
	})
}

// FuzzParseUpdateTag does the same for PATCH /api/tags/{tag}.
func FuzzParseUpdateTag(f *testing.F) {
	for _, s := range append([]string{`{"step":10}`, `{"description":""}`, `{"step":10,"description":"d"}`, `{}`,
		`{"max_id":"1"}`, `{"max_id":null}`, `{"step":0}`, `{"step":"10"}`, `{"tag":"x"}`, `null`, `{"step":10}x`}, strictSeeds...) {
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
		strictlyValid(t, body, &leafhttp.UpdateTagRequest{})
		if u.Description != nil {
			cleanText(t, body, *u.Description)
		}
		var old oldUpdate
		if err := oldDecode(body, &old); err != nil {
			t.Fatalf("body %q accepted, but leafd refused it before: %v", body, err)
		}
		if old.MaxID != nil || !reflect.DeepEqual(u, leafd.TagUpdate{Step: old.Step, Description: old.Description}) {
			t.Fatalf("body %q accepted as %+v, but leafd read it before as %+v", body, u, old)
		}
	})
}

// FuzzParseCreateToken does the same for POST /api/tokens, whose tags are
// strings inside an array.
func FuzzParseCreateToken(f *testing.F) {
	for _, s := range append([]string{`{"tags":["order","pay*"],"description":"billing"}`, `{"tags":["*"]}`, `{"tags":[]}`,
		`{"tags":"order"}`, `{"tags":["a b"]}`, `{"tags":["a"],"secret":1}`, `{"tags":["a"]}{}`}, strictSeeds...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		tags, description, err := leafhttp.ParseCreateToken(strings.NewReader(body))
		if err != nil {
			if !allowed[leafd.ErrorCode(err)] || leafd.ErrorMessage(err) == "" {
				t.Fatalf("body %q: error %v with code %q", body, err, leafd.ErrorCode(err))
			}
			return
		}
		strictlyValid(t, body, &leafhttp.CreateTokenRequest{})
		cleanText(t, body, append(tags, description)...)
		var old oldToken
		if err := oldDecode(body, &old); err != nil {
			t.Fatalf("body %q accepted, but leafd refused it before: %v", body, err)
		}
		var oldTags []string
		if old.Tags != nil {
			oldTags, _ = store.ValidateTokenTags(*old.Tags)
		}
		if !reflect.DeepEqual(tags, oldTags) {
			t.Fatalf("body %q accepted with tags %q, but leafd read it before as %+v", body, tags, old)
		}
		if old.Description != nil && *old.Description != description || old.Description == nil && description != "" {
			t.Fatalf("body %q accepted with description %q, but leafd read it before as %+v", body, description, old)
		}
	})
}
