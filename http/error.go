package http

import (
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/leafd/leafd"
)

// ErrorStatus returns the HTTP status of err's code.
func ErrorStatus(err error) int {
	status, _ := leafd.HTTPStatus(leafd.ErrorCode(err))
	return status
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// notReadyBody is the shape of a 503 from /readyz (docs/contract.md section
// 4), which probes read: the code is its status and the message its reason.
// The fields are in the order the contract writes them.
type notReadyBody struct {
	Reason string `json:"reason"`
	Status string `json:"status"`
}

// writeError answers err in the JSON error model of the native routes, or
// in /readyz's shape for not_ready. Internal and unavailable errors are
// logged with their cause; client errors are not.
func (s *Server) writeError(c *gin.Context, err error) {
	status, code, msg := ErrorStatus(err), leafd.ErrorCode(err), leafd.ErrorMessage(err)
	s.logError(c, err, status)
	_ = c.Error(err) // counted by code in leafd_errors_total (package metrics)
	if code == leafd.ENotReady {
		c.AbortWithStatusJSON(status, notReadyBody{Reason: msg, Status: code})
		return
	}
	c.AbortWithStatusJSON(status, errorBody{Error: errorDetail{Code: code, Message: msg}})
}

// writeLeafError answers err as Meituan Leaf does on its compatible routes:
// HTTP 500 with a text body.
func (s *Server) writeLeafError(c *gin.Context, err error) {
	s.logError(c, err, ErrorStatus(err)) // a client's mistake is not logged here either
	_ = c.Error(err)                     // counted by code in leafd_errors_total (package metrics)
	c.Header("Content-Type", "text/plain; charset=utf-8")
	c.AbortWithStatus(http.StatusInternalServerError)
	_, _ = c.Writer.WriteString(leafd.ErrorCode(err) + ": " + leafd.ErrorMessage(err))
}

// logError logs a failed request. A client's mistake (4xx) is not logged,
// nor is not_ready: it answers a probe, which asks every few seconds, and
// its cause (a load or a lease renewal that fails) is logged where it
// happens.
func (s *Server) logError(c *gin.Context, err error, status int) {
	code := leafd.ErrorCode(err)
	if status < 500 || code == leafd.ENotReady {
		return
	}
	level := slog.LevelWarn
	if code == leafd.EInternal {
		level = slog.LevelError
	}
	s.log.Log(c.Request.Context(), level, "http: request failed",
		"method", c.Request.Method, "route", c.FullPath(), "status", status, "err", err)
}
