package http

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/leafd/leafd"
)

// Tags is what the admin routes need of the store; store.MySQL and
// store.SQLite implement it.
type Tags interface {
	ListTags(ctx context.Context) ([]leafd.Tag, error)
	CreateTag(ctx context.Context, t leafd.Tag) (leafd.Tag, error)
	UpdateTag(ctx context.Context, name string, u leafd.TagUpdate) (old, updated leafd.Tag, err error)
}

// Admin request limits and defaults (SPEC section 3).
const (
	maxBodyBytes       = 64 << 10
	defaultStep        = 1000
	defaultMaxStep     = 1_000_000
	tokenHint          = "send the header Authorization: Bearer TOKEN, where TOKEN is admin.token"
	adminDisabledHint  = "the admin routes are switched off: set admin.token (LEAFD_ADMIN_TOKEN) to use them"
	maxIDImmutableHint = "max_id cannot be changed: lowering it would hand out IDs again, raising it is done by SQL if you must"
)

// requireAdmin lets a request through only with the right bearer token. No
// token configured: 403 admin_disabled. A missing or wrong token: 401
// unauthorized. The comparison takes the same time whatever the token.
func (s *Server) requireAdmin(c *gin.Context) {
	s.checkToken(c, false)
}

// requireDashboard guards the dashboard and /api/state when
// admin.protect_dashboard is on. A browser cannot send a bearer token when
// it opens a page, so HTTP Basic with the token as the password (any user
// name) is accepted too, and a refusal asks the browser for it; the page's
// own requests then carry the same credentials.
func (s *Server) requireDashboard(c *gin.Context) {
	s.checkToken(c, true)
}

func (s *Server) checkToken(c *gin.Context, basic bool) {
	if s.adminToken == nil {
		s.writeError(c, leafd.Errorf(leafd.EAdminDisabled, adminDisabledHint))
		return
	}
	var token string
	scheme, rest, _ := strings.Cut(strings.TrimSpace(c.GetHeader("Authorization")), " ")
	switch {
	case strings.EqualFold(scheme, "Bearer"):
		token = strings.TrimSpace(rest)
	case basic && strings.EqualFold(scheme, "Basic"):
		_, token, _ = c.Request.BasicAuth()
	}
	sum := sha256.Sum256([]byte(token))
	if token == "" || subtle.ConstantTimeCompare(sum[:], s.adminToken) != 1 {
		c.Header("WWW-Authenticate", `Bearer realm="leafd"`)
		if basic {
			c.Header("WWW-Authenticate", `Basic realm="leafd dashboard: any user, the admin token as password", charset="UTF-8"`)
		}
		s.writeError(c, leafd.Errorf(leafd.EUnauthorized, "missing or wrong admin token: %s", tokenHint))
		return
	}
	c.Next()
}

// tagJSON is a tag as the admin routes answer it. max_id is a string: it
// may pass 2^53.
type tagJSON struct {
	Tag         string `json:"tag"`
	MaxID       string `json:"max_id"`
	Step        int64  `json:"step"`
	Description string `json:"description"`
	UpdateTime  string `json:"update_time"`
}

func toJSON(t leafd.Tag) tagJSON {
	return tagJSON{Tag: t.Name, MaxID: strconv.FormatInt(t.MaxID, 10), Step: t.Step,
		Description: t.Description, UpdateTime: t.UpdateTime.UTC().Format(time.RFC3339)}
}

// listTags answers GET /api/tags.
func (s *Server) listTags(c *gin.Context) {
	tags, err := s.tags.ListTags(c.Request.Context())
	if err != nil {
		s.writeError(c, err)
		return
	}
	out := make([]tagJSON, len(tags))
	for i, t := range tags {
		out[i] = toJSON(t)
	}
	c.JSON(http.StatusOK, gin.H{"tags": out})
}

// CreateTagRequest is the body of POST /api/tags.
type CreateTagRequest struct {
	Tag         *string  `json:"tag"`
	Step        *int64   `json:"step"`
	MaxID       *Integer `json:"max_id"`
	Description *string  `json:"description"`
}

// UpdateTagRequest is the body of PATCH /api/tags/{tag}. MaxID is there to
// be refused with a reason.
type UpdateTagRequest struct {
	Step        *int64          `json:"step"`
	Description *string         `json:"description"`
	MaxID       json.RawMessage `json:"max_id"`
}

// Integer is a JSON integer given as a number or as a decimal string, as
// the API itself writes IDs.
type Integer int64

// UnmarshalJSON accepts 123 or "123".
func (n *Integer) UnmarshalJSON(b []byte) error {
	s := string(bytes.Trim(b, `"`))
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%s is not a whole number below 2^63", b)
	}
	*n = Integer(v)
	return nil
}

// ParseCreateTag decodes and checks a POST /api/tags body against maxStep
// and returns the tag to create, defaults filled in.
//
// Errors: invalid_body for a body that is not one JSON object of the known
// fields or a bad value; invalid_tag for a missing or bad tag name;
// body_too_large past 64 KiB.
func ParseCreateTag(body io.Reader, maxStep int64) (leafd.Tag, error) {
	var req CreateTagRequest
	if err := decodeJSON(body, &req); err != nil {
		return leafd.Tag{}, err
	}
	if req.Tag == nil {
		return leafd.Tag{}, leafd.Errorf(leafd.EInvalidTag, `the body names no tag: send {"tag":"order","step":1000}`)
	}
	t := leafd.Tag{Name: *req.Tag, Step: defaultStep, MaxID: 1}
	if err := leafd.ValidateTag(t.Name); err != nil {
		return leafd.Tag{}, err
	}
	if req.Step != nil {
		t.Step = *req.Step
	}
	if err := leafd.ValidateStep(t.Step, maxStep); err != nil {
		return leafd.Tag{}, err
	}
	if req.MaxID != nil {
		t.MaxID = int64(*req.MaxID)
	}
	if t.MaxID < 1 || t.MaxID > leafd.MaxID-t.Step {
		return leafd.Tag{}, leafd.Errorf(leafd.EInvalidBody, "max_id %d is out of range: use 1 to %d (2^63-1 less the step)", t.MaxID, leafd.MaxID-t.Step)
	}
	if req.Description != nil {
		t.Description = *req.Description
		if err := leafd.ValidateDescription(t.Description); err != nil {
			return leafd.Tag{}, err
		}
	}
	return t, nil
}

// ParseUpdateTag decodes and checks a PATCH /api/tags/{tag} body against
// maxStep.
//
// Errors: those of ParseCreateTag, and invalid_body for a body that changes
// nothing or names max_id.
func ParseUpdateTag(body io.Reader, maxStep int64) (leafd.TagUpdate, error) {
	var req UpdateTagRequest
	if err := decodeJSON(body, &req); err != nil {
		return leafd.TagUpdate{}, err
	}
	if req.MaxID != nil {
		return leafd.TagUpdate{}, leafd.Errorf(leafd.EInvalidBody, maxIDImmutableHint)
	}
	if req.Step == nil && req.Description == nil {
		return leafd.TagUpdate{}, leafd.Errorf(leafd.EInvalidBody, `nothing to change: send {"step":2000}, {"description":"…"} or both`)
	}
	if req.Step != nil {
		if err := leafd.ValidateStep(*req.Step, maxStep); err != nil {
			return leafd.TagUpdate{}, err
		}
	}
	if req.Description != nil {
		if err := leafd.ValidateDescription(*req.Description); err != nil {
			return leafd.TagUpdate{}, err
		}
	}
	return leafd.TagUpdate{Step: req.Step, Description: req.Description}, nil
}

// decodeJSON reads exactly one JSON object of dst's fields from body, at
// most 64 KiB.
func decodeJSON(body io.Reader, dst any) error {
	lr := &io.LimitedReader{R: body, N: maxBodyBytes + 1}
	dec := json.NewDecoder(lr)
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	if lr.N <= 0 {
		return leafd.Errorf(leafd.EBodyTooLarge, "the body is over %d KiB", maxBodyBytes>>10)
	}
	if err == nil && dec.Decode(&json.RawMessage{}) != io.EOF {
		err = errors.New("more than one JSON value")
	}
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "json: ")
		if errors.Is(err, io.EOF) {
			msg = "the body is empty"
		}
		return leafd.Errorf(leafd.EInvalidBody, "the body is not valid: %s; send one JSON object", msg)
	}
	return nil
}

// createTag answers POST /api/tags.
func (s *Server) createTag(c *gin.Context) {
	t, err := ParseCreateTag(c.Request.Body, s.maxStep)
	if err != nil {
		s.writeError(c, err)
		return
	}
	created, err := s.tags.CreateTag(c.Request.Context(), t)
	if err != nil {
		s.writeError(c, err)
		return
	}
	if s.seg != nil {
		s.seg.Upsert(created.Name, created.Step)
	}
	s.log.Info("admin: tag created", "tag", created.Name, "step", created.Step, "max_id", created.MaxID,
		"description", created.Description, "by", c.ClientIP())
	c.JSON(http.StatusCreated, toJSON(created))
}

// updateTag answers PATCH /api/tags/{tag}.
func (s *Server) updateTag(c *gin.Context) {
	name := c.Param("tag")
	if err := leafd.ValidateTag(name); err != nil {
		s.writeError(c, err)
		return
	}
	u, err := ParseUpdateTag(c.Request.Body, s.maxStep)
	if err != nil {
		s.writeError(c, err)
		return
	}
	old, updated, err := s.tags.UpdateTag(c.Request.Context(), name, u)
	if err != nil {
		s.writeError(c, err)
		return
	}
	if s.seg != nil {
		s.seg.Upsert(updated.Name, updated.Step)
	}
	s.log.Info("admin: tag changed", "tag", name, "old_step", old.Step, "step", updated.Step,
		"old_description", old.Description, "description", updated.Description, "by", c.ClientIP())
	c.JSON(http.StatusOK, toJSON(updated))
}
