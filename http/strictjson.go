package http

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// checkStrictJSON says what is wrong, "" if nothing, with what encoding/json
// would let through in an admin body meant for the struct dst points to:
//
//   - a top-level key that is not exactly one of dst's JSON names
//     (encoding/json matches them without case);
//   - a key given twice (encoding/json keeps the last);
//   - a string, key or value at any depth, holding \u0000, an escaped
//     UTF-16 surrogate without its pair, or bytes that are not UTF-8
//     (encoding/json stores the NUL and turns the others into U+FFFD).
//
// A body that is not a JSON object, or not valid JSON, passes: the decoder
// that runs next refuses it in its own words. It decodes everything this
// check accepts as it always did.
func checkStrictJSON(body []byte, dst any) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	names := fieldNames(reflect.TypeOf(dst).Elem())
	seen := make(map[string]bool, len(names))
	for dec.More() {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		key, _ := tok.(string)
		raw := bytes.TrimLeft(body[start:dec.InputOffset()], " \t\r\n,")
		if problem := badStrings(raw); problem != "" {
			return "a key of the body holds " + problem
		}
		if !names[key] {
			return unknownKey(key, dst)
		}
		if seen[key] {
			return fmt.Sprintf("the key %q is given twice: give it once", key)
		}
		seen[key] = true
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return ""
		}
		if problem := badStrings(value); problem != "" {
			return key + " holds " + problem
		}
	}
	return ""
}

// unknownKey is the refusal of a key that is not one of dst's JSON names:
// with the name it differs from in letter case alone, if there is one.
func unknownKey(key string, dst any) string {
	for name := range fieldNames(reflect.TypeOf(dst).Elem()) {
		if strings.EqualFold(key, name) {
			return fmt.Sprintf("unknown field %q: did you mean %q? keys are matched exactly", truncate(key), name)
		}
	}
	return fmt.Sprintf("the body has an unknown field %q: the fields are %s", truncate(key), jsonFields(dst))
}

var fieldNamesCache sync.Map // reflect.Type → map[string]bool

// fieldNames is the set of the JSON names of struct type t's fields, as
// encoding/json names them: the json tag's name, else the Go name; fields
// tagged "-" and unexported ones have none.
func fieldNames(t reflect.Type) map[string]bool {
	if names, ok := fieldNamesCache.Load(t); ok {
		return names.(map[string]bool)
	}
	names := make(map[string]bool, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		names[name] = true
	}
	fieldNamesCache.Store(t, names)
	return names
}

// badStrings looks through the string literals of v, one valid JSON value
// or key as it stands in the body, and says what the first bad one holds,
// and what to do: "" when they are all good.
func badStrings(v []byte) string {
	in := false
	for i := 0; i < len(v); {
		c := v[i]
		switch {
		case !in:
			in = c == '"'
			i++
		case c == '"':
			in = false
			i++
		case c == '\\' && i+1 < len(v) && v[i+1] == 'u':
			r, ok := hex4(v[i+2:])
			if !ok {
				return "" // not JSON: the decoder says so
			}
			switch {
			case r == 0:
				return `a NUL character (\u0000): remove it`
			case r >= 0xDC00 && r <= 0xDFFF:
				return unpaired(r)
			case r >= 0xD800 && r <= 0xDBFF:
				low, ok := rune(0), false
				if i+12 <= len(v) && v[i+6] == '\\' && v[i+7] == 'u' {
					low, ok = hex4(v[i+8:])
				}
				if !ok || low < 0xDC00 || low > 0xDFFF {
					return unpaired(r)
				}
				i += 6
			}
			i += 6
		case c == '\\':
			i += 2
		case c < utf8.RuneSelf:
			i++
		default:
			r, n := utf8.DecodeRune(v[i:])
			if r == utf8.RuneError && n == 1 {
				return fmt.Sprintf("the byte 0x%02x, which is not UTF-8: encode the text as UTF-8", c)
			}
			i += n
		}
	}
	return ""
}

func unpaired(r rune) string {
	return fmt.Sprintf(`an unpaired UTF-16 surrogate \u%04x: write the character itself, or as a high surrogate (\ud800-\udbff) followed by a low one (\udc00-\udfff)`, r)
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[:4]), 16, 32)
	return rune(v), err == nil
}
