package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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
//
// Over gRPC (NewGRPC) an error status is the same Error: Code is the
// reason of its google.rpc.ErrorInfo of domain "leafd", Message the
// status's message, and Status the HTTP status the HTTP API answers for
// that code (404 for unknown_tag), so that an error compares, matches and
// fails over the same on both transports. GRPCCode is the gRPC code
// received. A status without leafd's ErrorInfo comes from gRPC itself or
// a proxy (UNAVAILABLE for a connection that cannot be made): its Code is
// empty, as for a proxy's page over HTTP, and its Status the HTTP status
// of its gRPC code (UNAVAILABLE 503, DEADLINE_EXCEEDED 504, INTERNAL 500,
// INVALID_ARGUMENT 400, …), which decides whether the next address is
// asked. UNIMPLEMENTED, a server without the method, is not_found (404),
// as the HTTP API answers for a route it does not have.
type Error struct {
	Status  int
	Code    string
	Message string
	// GRPCCode is the gRPC status code of an error received over gRPC;
	// codes.OK (0) over HTTP.
	GRPCCode codes.Code
}

// Error returns "leafd: CODE (HTTP STATUS): MESSAGE", or
// "leafd: CODE (gRPC CODE): MESSAGE" for an error received over gRPC.
func (e *Error) Error() string {
	switch {
	case e.GRPCCode != codes.OK && e.Code == "":
		return fmt.Sprintf("leafd: gRPC %s: %s", e.GRPCCode, e.Message)
	case e.GRPCCode != codes.OK:
		return fmt.Sprintf("leafd: %s (gRPC %s): %s", e.Code, e.GRPCCode, e.Message)
	case e.Code == "":
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
	ErrPeriodExhausted      = &Error{Code: leafd.EPeriodExhausted}
	ErrInvalidSize          = &Error{Code: leafd.EInvalidSize}
	ErrRangeUnsupported     = &Error{Code: leafd.ERangeUnsupported}
	ErrTokenRequired        = &Error{Code: leafd.ETokenRequired}
	ErrTokenRefused         = &Error{Code: leafd.ETokenRefused}
	ErrTagRewound           = &Error{Code: leafd.ETagRewound}
	ErrTagConflict          = &Error{Code: leafd.ETagConflict}
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
// and so are tag_exhausted (the shared table's end) and period_exhausted
// (a dated tag's period used up for the whole fleet). Other 5xx answers are
// about the server that gave them: another one may have IDs buffered, a
// worker id leased, or no bug. Over gRPC, Status is the HTTP status of
// the error's leafd code, or of its gRPC code without one (see Error), so
// the same rule holds.
func (e *Error) definite() bool {
	return e.Status < 500 || e.Code == leafd.ETagExhausted || e.Code == leafd.EPeriodExhausted
}

// grpcHTTPStatuses is the HTTP status of a gRPC code, for statuses
// without a leafd code (google.rpc.Code's mapping). Codes not here are 500.
var grpcHTTPStatuses = map[codes.Code]int{
	codes.Canceled:           499,
	codes.InvalidArgument:    http.StatusBadRequest,
	codes.DeadlineExceeded:   http.StatusGatewayTimeout,
	codes.NotFound:           http.StatusNotFound,
	codes.AlreadyExists:      http.StatusConflict,
	codes.PermissionDenied:   http.StatusForbidden,
	codes.Unauthenticated:    http.StatusUnauthorized,
	codes.ResourceExhausted:  http.StatusTooManyRequests,
	codes.FailedPrecondition: http.StatusBadRequest,
	codes.Aborted:            http.StatusConflict,
	codes.OutOfRange:         http.StatusBadRequest,
	codes.Unimplemented:      http.StatusNotImplemented,
	codes.Unavailable:        http.StatusServiceUnavailable,
}

// statusError turns a gRPC status into an *Error (see Error).
func statusError(st *status.Status) *Error {
	e := &Error{Code: statusReason(st), Message: st.Message(), GRPCCode: st.Code()}
	if e.Code == "" && e.GRPCCode == codes.Unimplemented {
		e.Code = leafd.ENotFound
	}
	var ok bool
	if e.Status, ok = leafd.HTTPStatus(e.Code); !ok {
		if e.Status, ok = grpcHTTPStatuses[e.GRPCCode]; !ok {
			e.Status = http.StatusInternalServerError
		}
	}
	if e.Message == "" {
		e.Message = e.GRPCCode.String()
	}
	return e
}

// statusReason returns the reason of st's google.rpc.ErrorInfo of domain
// "leafd": leafd's error code, "" without one.
func statusReason(st *status.Status) string {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == grpcErrorDomain {
			return info.GetReason()
		}
	}
	return ""
}

// grpcErrorDomain is the domain of the ErrorInfo of leafd's statuses.
const grpcErrorDomain = "leafd"

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
