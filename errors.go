// Package leafd holds the domain types shared by every part of leafd: the
// error codes of the HTTP contract (docs/contract.md section 4) and the tag
// record. It imports nothing but the standard library, so that segment,
// snowflake, store and http can all depend on it without depending on each
// other.
package leafd

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
)

// Error codes. Each one is part of the external contract: HTTPStatus maps
// it to a status, clients match on it.
const (
	EInvalidTag           = "invalid_tag"
	EInvalidCount         = "invalid_count"
	EInvalidSize          = "invalid_size" // a range size that is not a whole number in 1..segment.max_range
	EInvalidID            = "invalid_id"
	EInvalidBody          = "invalid_body"
	EInvalidQuery         = "invalid_query" // a query that does not parse, a repeated parameter, or a bad /api/state parameter
	EInvalidTime          = "invalid_time"  // a time to compose snowflake IDs of that does not parse or is outside the layout
	EUnauthorized         = "unauthorized"
	EAdminDisabled        = "admin_disabled"
	EUnknownTag           = "unknown_tag"
	ENotFound             = "not_found"
	EModeDisabled         = "mode_disabled"
	EMethodNotAllowed     = "method_not_allowed"
	ETagExists            = "tag_exists"
	ETagConflict          = "tag_conflict"      // a tag whose records disagree: created again in another format than it had, or defined differently by databases of store.shards
	ERangeUnsupported     = "range_unsupported" // a range of a tag whose IDs are not consecutive: opaque, or in a sharded store
	EBodyTooLarge         = "body_too_large"
	EUnsupportedMediaType = "unsupported_media_type" // an admin body whose Content-Type is not application/json
	ESegmentUnavailable   = "segment_unavailable"
	ESnowflakeUnavailable = "snowflake_unavailable"
	ETagExhausted         = "tag_exhausted"
	ETagRewound           = "tag_rewound"         // a range below IDs already issued: max_id lowered, or the tag deleted and created again
	EPeriodExhausted      = "period_exhausted"    // a dated tag whose counter has used every number of the current period
	EOpaqueKeyMismatch    = "opaque_key_mismatch" // an opaque tag created with another segment.opaque_key than this server's, or none
	EStoreUnavailable     = "store_unavailable"
	ENotReady             = "not_ready"
	// EInternal is every error that carries no code of its own. Its message
	// is never shown to a client.
	EInternal = "internal"
)

// Error codes of the access tokens of the ID routes (segment.require_token,
// snowflake.require_token) and of their admin routes, /api/tokens.
const (
	ETokenRequired = "token_required" // an ID route that needs a token, asked without one
	ETokenRefused  = "token_refused"  // a token that is unknown, revoked, or not allowed for the tag
	EUnknownToken  = "unknown_token"  // DELETE /api/tokens/{id} of an id that no token has
)

// Error codes of the requests that net/http cannot read, which it refuses
// before any handler runs (a path with a malformed %-escape, a header with a
// control character, headers too large, an unknown Transfer-Encoding, an
// HTTP version it does not speak); the http package gives them the JSON
// error shape (http/rawerrors.go).
const (
	EInvalidRequest              = "invalid_request"               // 400: a request line, path, header or Content-Length that does not parse
	EHeadersTooLarge             = "headers_too_large"             // 431: headers over http's MaxHeaderBytes
	EUnsupportedTransferEncoding = "unsupported_transfer_encoding" // 501: a Transfer-Encoding other than chunked
	EUnsupportedHTTPVersion      = "unsupported_http_version"      // 505: an HTTP version other than 1.x
)

// Error is an error with a code from the list above and a message meant for
// the client: it says what went wrong and what to do about it.
type Error struct {
	Code    string
	Message string
	// Err is the underlying cause, if any. It is logged, never sent.
	Err error
}

// Error returns the message, followed by the cause when there is one.
func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error with the given code and message whose cause is err.
func Wrap(code string, err error, message string) *Error {
	return &Error{Code: code, Message: message, Err: err}
}

// ErrorCode returns the code of the first *Error in err's chain, "" for a
// nil error and EInternal for an error without a code.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	return EInternal
}

// ErrorMessage returns the client-facing message of err. Errors without a
// code get a generic message, so that internal details never reach a client.
func ErrorMessage(err error) string {
	if err == nil {
		return ""
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Message
	}
	return "internal error; see the server log"
}

// statuses maps every error code to its HTTP status (docs/contract.md section 4). It is
// the only place where a code meets a status: the HTTP server answers it,
// and the Go client gives it to the errors it receives over gRPC.
var statuses = map[string]int{
	EInvalidTag:           http.StatusBadRequest,
	EInvalidCount:         http.StatusBadRequest,
	EInvalidSize:          http.StatusBadRequest,
	EInvalidID:            http.StatusBadRequest,
	EInvalidBody:          http.StatusBadRequest,
	EInvalidQuery:         http.StatusBadRequest,
	EInvalidTime:          http.StatusBadRequest,
	EUnauthorized:         http.StatusUnauthorized,
	EAdminDisabled:        http.StatusForbidden,
	EUnknownTag:           http.StatusNotFound,
	ENotFound:             http.StatusNotFound,
	EModeDisabled:         http.StatusNotFound,
	EMethodNotAllowed:     http.StatusMethodNotAllowed,
	ETagExists:            http.StatusConflict,
	ETagConflict:          http.StatusConflict,
	ERangeUnsupported:     http.StatusConflict,
	EBodyTooLarge:         http.StatusRequestEntityTooLarge,
	EUnsupportedMediaType: http.StatusUnsupportedMediaType,
	ESegmentUnavailable:   http.StatusServiceUnavailable,
	ESnowflakeUnavailable: http.StatusServiceUnavailable,
	ETagExhausted:         http.StatusServiceUnavailable,
	ETagRewound:           http.StatusServiceUnavailable,
	EPeriodExhausted:      http.StatusServiceUnavailable,
	EOpaqueKeyMismatch:    http.StatusServiceUnavailable,
	EStoreUnavailable:     http.StatusServiceUnavailable,
	ENotReady:             http.StatusServiceUnavailable,
	EInternal:             http.StatusInternalServerError,
	ETokenRequired:        http.StatusUnauthorized,
	ETokenRefused:         http.StatusForbidden,
	EUnknownToken:         http.StatusNotFound,

	EInvalidRequest:              http.StatusBadRequest,
	EHeadersTooLarge:             http.StatusRequestHeaderFieldsTooLarge,
	EUnsupportedTransferEncoding: http.StatusNotImplemented,
	EUnsupportedHTTPVersion:      http.StatusHTTPVersionNotSupported,
}

// HTTPStatus returns the HTTP status of code, and whether code is one of
// the list above: 500 and false for any other.
func HTTPStatus(code string) (int, bool) {
	if s, ok := statuses[code]; ok {
		return s, true
	}
	return http.StatusInternalServerError, false
}

// Codes returns every error code of the list above, sorted.
func Codes() []string {
	return slices.Sorted(maps.Keys(statuses))
}
