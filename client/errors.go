package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/leafd/leafd"
)

// Error is an error answer of a leafd server: its HTTP status and the code
// and message of leafd's JSON error model,
// {"error":{"code":"unknown_tag","message":"…"}}. Match on Code (with
// errors.Is and the sentinels below, or IsCode); Message is for people and
// says what to do.
//
// An answer that is not in leafd's error model (a proxy's 502 page, say)
// has an empty Code and, as Message, the start of the body or the status
// text.
type Error struct {
	Status  int
	Code    string
	Message string
}

// Error returns "leafd: CODE (HTTP STATUS): MESSAGE".
func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("leafd: HTTP %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("leafd: %s (HTTP %d): %s", e.Code, e.Status, e.Message)
}

// Is reports whether target is an *Error with the same Code (and the same
// Status, when target's Status is not 0), so that
// errors.Is(err, client.ErrUnknownTag) matches any unknown_tag answer.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code != "" && t.Code == e.Code && (t.Status == 0 || t.Status == e.Status)
}

// Sentinels for the codes the ID routes answer (docs/contract.md section 4), for
// errors.Is. Only Code is set, so they match an answer of any status.
var (
	ErrInvalidTag           = &Error{Code: leafd.EInvalidTag}
	ErrInvalidCount         = &Error{Code: leafd.EInvalidCount}
	ErrUnknownTag           = &Error{Code: leafd.EUnknownTag}
	ErrNotFound             = &Error{Code: leafd.ENotFound}
	ErrModeDisabled         = &Error{Code: leafd.EModeDisabled}
	ErrSegmentUnavailable   = &Error{Code: leafd.ESegmentUnavailable}
	ErrSnowflakeUnavailable = &Error{Code: leafd.ESnowflakeUnavailable}
	ErrTagExhausted         = &Error{Code: leafd.ETagExhausted}
	ErrInvalidSize          = &Error{Code: leafd.EInvalidSize}
	ErrRangeUnsupported     = &Error{Code: leafd.ERangeUnsupported}
	ErrInternal             = &Error{Code: leafd.EInternal}
)

// ErrClosed is returned by every method of a Client after Close.
var ErrClosed = errors.New("leafd client: closed")

// Code returns the code of the first *Error in err's chain, or "" when
// there is none (a network error, a deadline, ErrClosed).
func Code(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// IsCode reports whether err carries a leafd error answer with the given
// code, such as "unknown_tag" (the constants of package
// github.com/leafd/leafd, leafd.EUnknownTag).
func IsCode(err error, code string) bool {
	return code != "" && Code(err) == code
}

// definite reports whether an error answer would be the same from any
// server of the fleet, so that asking the next base URL is pointless. Every
// 4xx is (the request itself is wrong, or the tag or mode is not there),
// and so is tag_exhausted (the shared table's end). Other 5xx answers are
// about the server that gave them: another one may have IDs buffered, a
// worker id leased, or no bug.
func (e *Error) definite() bool {
	return e.Status < 500 || e.Code == leafd.ETagExhausted
}

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// parseError turns a non-200 answer into an *Error.
func parseError(status int, body []byte) *Error {
	var m struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &m) == nil && m.Error != nil && m.Error.Code != "" {
		return &Error{Status: status, Code: m.Error.Code, Message: m.Error.Message}
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		msg = msg[:200]
		for !utf8.ValidString(msg) {
			msg = msg[:len(msg)-1]
		}
		msg += "…"
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &Error{Status: status, Message: msg}
}

// localError is an error the client finds before asking a server, in the
// shape the server would have answered it.
func localError(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}
