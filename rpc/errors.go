package rpc

import (
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leafd/leafd"
)

// ErrorDomain is the domain of the google.rpc.ErrorInfo that every error
// status carries; its reason is the leafd error code.
const ErrorDomain = "leafd"

// grpcCodes maps every leafd error code to its gRPC status code
// (docs/grpc.md). It is the only place where a leafd code meets a gRPC
// code. Codes that no RPC answers (the admin routes') are mapped too, so
// that the table stays whole.
var grpcCodes = map[string]codes.Code{
	leafd.EInvalidTag:           codes.InvalidArgument,
	leafd.EInvalidCount:         codes.InvalidArgument,
	leafd.EInvalidSize:          codes.InvalidArgument,
	leafd.EInvalidID:            codes.InvalidArgument,
	leafd.EInvalidBody:          codes.InvalidArgument,
	leafd.EInvalidQuery:         codes.InvalidArgument,
	leafd.EInvalidTime:          codes.InvalidArgument,
	leafd.EUnauthorized:         codes.Unauthenticated,
	leafd.EAdminDisabled:        codes.PermissionDenied,
	leafd.EUnknownTag:           codes.NotFound,
	leafd.ENotFound:             codes.NotFound,
	leafd.EModeDisabled:         codes.NotFound,
	leafd.EMethodNotAllowed:     codes.Unimplemented,
	leafd.ETagExists:            codes.AlreadyExists,
	leafd.ETagConflict:          codes.FailedPrecondition,
	leafd.ERangeUnsupported:     codes.FailedPrecondition,
	leafd.EBodyTooLarge:         codes.ResourceExhausted,
	leafd.EUnsupportedMediaType: codes.InvalidArgument,
	leafd.ESegmentUnavailable:   codes.Unavailable,
	leafd.ESnowflakeUnavailable: codes.Unavailable,
	leafd.ETagExhausted:         codes.ResourceExhausted,
	leafd.EPeriodExhausted:      codes.ResourceExhausted,
	leafd.ETagRewound:           codes.FailedPrecondition,
	leafd.EOpaqueKeyMismatch:    codes.FailedPrecondition,
	leafd.EStoreUnavailable:     codes.Unavailable,
	leafd.ENotReady:             codes.Unavailable,
	leafd.EInternal:             codes.Internal,
	leafd.ETokenRequired:        codes.Unauthenticated,
	leafd.ETokenRefused:         codes.PermissionDenied,
	leafd.EUnknownToken:         codes.NotFound,
	// Answers of the HTTP server to requests it cannot read.
	leafd.EInvalidRequest:              codes.InvalidArgument,
	leafd.EHeadersTooLarge:             codes.ResourceExhausted,
	leafd.EUnsupportedTransferEncoding: codes.Unimplemented,
	leafd.EUnsupportedHTTPVersion:      codes.Unimplemented,
}

// internalMessage is the only message an internal error shows: its cause is
// logged, never sent.
const internalMessage = "internal error; see the server log"

// Code returns the gRPC code of err's leafd code: Internal for an error
// without a code or with one the table does not know, OK for nil.
func Code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	if c, ok := grpcCodes[leafd.ErrorCode(err)]; ok {
		return c
	}
	return codes.Internal
}

// Status returns err as the gRPC status clients receive: the code of the
// table, the leafd message (a generic one for an internal error) and a
// google.rpc.ErrorInfo with Reason the leafd code and Domain "leafd".
// Nil for a nil error.
func Status(err error) *status.Status {
	if err == nil {
		return nil
	}
	code := leafd.ErrorCode(err)
	c, ok := grpcCodes[code]
	msg := leafd.ErrorMessage(err)
	if !ok || c == codes.Internal {
		code, c, msg = leafd.EInternal, codes.Internal, internalMessage
	}
	st := status.New(c, msg)
	if withInfo, err := st.WithDetails(&errdetails.ErrorInfo{Reason: code, Domain: ErrorDomain}); err == nil {
		st = withInfo
	}
	return st
}

// ErrorCode returns the leafd code of a status error received from leafd's
// gRPC API, read from its ErrorInfo: "" for nil, and "" for an error that
// carries none (one from gRPC itself, such as DEADLINE_EXCEEDED).
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	st, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == ErrorDomain {
			return info.GetReason()
		}
	}
	return ""
}
