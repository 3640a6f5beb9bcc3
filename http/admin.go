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
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
)

// Tags is what the admin routes need of the store; every store.Store
// implements it.
type Tags interface {
	ListTags(ctx context.Context) ([]leafd.Tag, error)
	LookupTag(ctx context.Context, name string) (leafd.Tag, error)
	CreateTag(ctx context.Context, t leafd.Tag) (leafd.Tag, error)
	UpdateTag(ctx context.Context, name string, u leafd.TagUpdate) (old, updated leafd.Tag, err error)
	// RepairTag raises a rewound tag's max_id to its high-water mark
	// (POST /api/tags/{tag}/repair).
	RepairTag(ctx context.Context, name string) (store.Repair, error)
}

var _ Tags = store.Store(nil)

// Admin request limits and defaults (docs/contract.md section 4).
const (
	maxBodyBytes       = 64 << 10
	defaultStep        = 1000
	defaultMaxStep     = segment.DefaultMaxStep
	tokenHint          = "send the header Authorization: Bearer TOKEN, where TOKEN is admin.token"
	adminDisabledHint  = "the admin routes are switched off: set admin.token (LEAFD_ADMIN_TOKEN) to use them"
	maxIDImmutableHint = "max_id cannot be changed: lowering it would hand out IDs again; a rewound tag is raised to its high-water mark by POST /api/tags/{tag}/repair"
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
// may pass 2^53. The fields of a format are left out of other formats'
// tags, and so are a dated tag's zone when it is UTC ("") and max_step
// when it is segment.max_step (0).
type tagJSON struct {
	Tag         string `json:"tag"`
	MaxID       string `json:"max_id"`
	Step        int64  `json:"step"`
	Description string `json:"description"`
	UpdateTime  string `json:"update_time"`
	Format      string `json:"format"`
	Digits      int    `json:"digits,omitempty"`
	Period      string `json:"period,omitempty"`
	Zone        string `json:"zone,omitempty"`
	MaxStep     int64  `json:"max_step,omitempty"`
}

func toJSON(t leafd.Tag) tagJSON {
	format := t.Format
	if format == "" {
		format = segment.FormatSequential
	}
	return tagJSON{Tag: t.Name, MaxID: strconv.FormatInt(t.MaxID, 10), Step: t.Step,
		Description: t.Description, UpdateTime: t.UpdateTime.UTC().Format(time.RFC3339), Format: format, Digits: t.Digits,
		Period: t.Period, Zone: t.Zone, MaxStep: t.MaxStep}
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
	Format      *string  `json:"format"`
	Digits      *int     `json:"digits"`
	Period      *string  `json:"period"`
	Zone        *string  `json:"zone"`
	MaxStep     *int64   `json:"max_step"`
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

// UnmarshalJSON accepts 123 or "123": a string holds digits alone, no
// sign, space or escape.
func (n *Integer) UnmarshalJSON(b []byte) error {
	s := b
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' {
		s = b[1 : len(b)-1]
		if len(s) == 0 || bytes.ContainsFunc(s, func(r rune) bool { return r < '0' || r > '9' }) {
			return integerError{value: string(b), notDigits: true}
		}
	}
	v, err := strconv.ParseInt(string(s), 10, 64)
	if err != nil {
		return integerError{value: string(b)}
	}
	*n = Integer(v)
	return nil
}

// integerError is the JSON value that an Integer refused; notDigits when
// it is a string of something else than digits.
type integerError struct {
	value     string
	notDigits bool
}

func (e integerError) Error() string { return e.value + " is not a whole number below 2^63" }

// ParseCreateTag decodes and checks a POST /api/tags body against maxStep
// and returns the tag to create, defaults filled in.
//
// Errors: invalid_body for a body that is not one JSON object of the known
// fields, a bad value, or fields of another format than the tag's;
// invalid_tag for a missing or bad tag name; body_too_large past 64 KiB.
func ParseCreateTag(body io.Reader, maxStep int64) (leafd.Tag, error) {
	var req CreateTagRequest
	if err := decodeJSON(body, &req, maxStep, `{"tag":"order","step":1000}`); err != nil {
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
	if req.Format != nil {
		switch *req.Format {
		case segment.FormatSequential:
		case segment.FormatOpaque, segment.FormatDated:
			t.Format = *req.Format
		default:
			return leafd.Tag{}, leafd.Errorf(leafd.EInvalidBody, "format %q is not known: use sequential (the default), opaque or dated", *req.Format)
		}
	}
	if t.Format != segment.FormatDated && (req.Period != nil || req.Zone != nil || req.MaxStep != nil) {
		return leafd.Tag{}, leafd.Errorf(leafd.EInvalidBody, `period, zone and max_step apply to a dated tag only: add "format":"dated" or leave them out`)
	}
	switch t.Format {
	case segment.FormatOpaque:
		if req.Digits != nil {
			if err := segment.ValidateDigits(*req.Digits); err != nil {
				return leafd.Tag{}, err
			}
			t.Digits = *req.Digits
		}
	case segment.FormatDated:
		if err := datedTag(&t, req, maxStep); err != nil {
			return leafd.Tag{}, err
		}
	default:
		if req.Digits != nil {
			return leafd.Tag{}, leafd.Errorf(leafd.EInvalidBody, `digits apply to an opaque or dated tag only: add "format":"opaque" or "format":"dated", or leave digits out`)
		}
	}
	return t, nil
}

// datedTag sets the period, zone, digits (DefaultDatedDigits when not
// given) and max_step of a dated tag from req, and checks them against
// maxStep.
func datedTag(t *leafd.Tag, req CreateTagRequest, maxStep int64) error {
	if req.Period == nil {
		return leafd.Errorf(leafd.EInvalidBody, `a dated tag needs a period: add "period":"day", "month" or "year"`)
	}
	t.Period, t.Digits = *req.Period, segment.DefaultDatedDigits
	if req.Zone != nil {
		t.Zone = *req.Zone
	}
	if req.Digits != nil {
		t.Digits = *req.Digits
	}
	if err := segment.ValidateDated(t.Period, t.Zone, t.Digits); err != nil {
		return err
	}
	if req.MaxStep != nil {
		if *req.MaxStep < 1 || *req.MaxStep > maxStep {
			return leafd.Errorf(leafd.EInvalidBody,
				"max_step %d is out of range: use 1 to %d (segment.max_step), or leave it out to cap the step at segment.max_step", *req.MaxStep, maxStep)
		}
		t.MaxStep = *req.MaxStep
	}
	return nil
}

// ParseUpdateTag decodes and checks a PATCH /api/tags/{tag} body against
// maxStep.
//
// Errors: those of ParseCreateTag, and invalid_body for a body that changes
// nothing or names max_id.
func ParseUpdateTag(body io.Reader, maxStep int64) (leafd.TagUpdate, error) {
	var req UpdateTagRequest
	if err := decodeJSON(body, &req, maxStep, `{"step":2000}`); err != nil {
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
// most 64 KiB. A body it refuses is told in the API's terms: which field
// wants what (a step from 1 to maxStep), or where the JSON breaks, never
// the Go types behind them; example is a body that would do. Keys match
// exactly and once, and strings hold no NUL, unpaired surrogate or bytes
// that are not UTF-8 (checkStrictJSON).
func decodeJSON(body io.Reader, dst any, maxStep int64, example string) error {
	// The whole body is read before it is judged: an object in the first
	// 64 KiB padded with a megabyte of spaces is too large, not one object.
	lr := &io.LimitedReader{R: body, N: maxBodyBytes + 1}
	b, err := io.ReadAll(lr)
	var tooLarge *http.MaxBytesError // http.MaxBytesReader's, on the admin routes
	if lr.N <= 0 || errors.As(err, &tooLarge) {
		return leafd.Errorf(leafd.EBodyTooLarge, "the body is over %d KiB", maxBodyBytes>>10)
	}
	if err != nil {
		return leafd.Errorf(leafd.EInvalidBody, "the body could not be read to its end: send it again")
	}
	if msg := checkStrictJSON(b, dst); msg != "" {
		return leafd.Errorf(leafd.EInvalidBody, "%s; send one JSON object, such as %s", msg, example)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err = dec.Decode(dst)
	if err == nil && dec.Decode(&json.RawMessage{}) != io.EOF {
		return leafd.Errorf(leafd.EInvalidBody, "the body holds more than one JSON value: send one object, such as %s", example)
	}
	if err == nil {
		return nil
	}
	var (
		syntax  *json.SyntaxError
		typ     *json.UnmarshalTypeError
		integer integerError
		msg     string
	)
	switch {
	case errors.Is(err, io.EOF):
		msg = "the body is empty"
	case errors.Is(err, io.ErrUnexpectedEOF):
		msg = "the body ends before its JSON does"
	case errors.As(err, &syntax):
		msg = fmt.Sprintf("the body is not valid JSON at byte %d", syntax.Offset)
	case errors.As(err, &typ) && typ.Field == "":
		msg = "the body is " + jsonKind(typ.Value) + ", not a JSON object"
	case errors.As(err, &typ):
		msg = fieldRule(typ.Field, maxStep) + ", not " + jsonKind(typ.Value)
	case errors.As(err, &integer) && integer.notDigits:
		msg = fieldRule("max_id", maxStep) + ", not " + truncate(integer.value) + `: write digits only, e.g. "7" or 7`
	case errors.As(err, &integer):
		msg = fieldRule("max_id", maxStep) + ", not " + truncate(integer.value)
	default:
		// The decoder's only other error is an unknown field, which it
		// does not export: its text is matched.
		name, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
		if !ok {
			msg = "the body is not valid"
			break
		}
		msg = fmt.Sprintf("the body has an unknown field %s: the fields are %s", name, jsonFields(dst))
	}
	return leafd.Errorf(leafd.EInvalidBody, "%s; send one JSON object, such as %s", msg, example)
}

// fieldRule says what a field of the admin bodies must hold.
func fieldRule(field string, maxStep int64) string {
	switch field {
	case "tag":
		return `"tag" must be a string: the tag's name, such as "order"`
	case "step":
		return fmt.Sprintf(`"step" must be a whole number from 1 to %d`, maxStep)
	case "max_id":
		return `"max_id" must be a whole number from 1 to 2^63-1 less the step, as a number or a decimal string`
	case "description":
		return fmt.Sprintf(`"description" must be a string of at most %d characters`, leafd.MaxDescriptionLen)
	case "format":
		return `"format" must be a string: sequential, opaque or dated`
	case "period":
		return `"period" must be a string: day, month or year`
	case "zone":
		return `"zone" must be a string: an IANA time zone such as Asia/Shanghai`
	case "max_step":
		return fmt.Sprintf(`"max_step" must be a whole number from 1 to %d`, maxStep)
	}
	return fmt.Sprintf("%q has the wrong type", field)
}

// jsonKind names the kind of JSON value the decoder reports ("string",
// "number 1.5", "bool", "array", "object") as a sentence would.
func jsonKind(v string) string {
	switch v {
	case "string", "number":
		return "a " + v
	case "array", "object":
		return "an " + v
	case "bool":
		return "true or false"
	}
	if n, ok := strings.CutPrefix(v, "number "); ok {
		return truncate(n)
	}
	return v
}

// jsonFields lists the JSON names of the fields of the struct dst points
// to, for a body that named another. A field kept raw is there to be
// refused with a reason (PATCH's max_id), and is not offered.
func jsonFields(dst any) string {
	t := reflect.TypeOf(dst).Elem()
	names := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type == reflect.TypeFor[json.RawMessage]() {
			continue
		}
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			names = append(names, strconv.Quote(name))
		}
	}
	return strings.Join(names, ", ")
}

// adminBody returns the body of an admin POST or PATCH, capped at 64 KiB as
// a whole (net/http stops reading past it and closes the connection), or
// unsupported_media_type for a Content-Type other than application/json. A
// request without a Content-Type is read as JSON, as the API has always
// done.
func adminBody(c *gin.Context) (io.Reader, error) {
	if ct := c.Request.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return nil, leafd.Errorf(leafd.EUnsupportedMediaType,
				"the body's Content-Type is %q: send JSON with the header Content-Type: application/json", truncate(ct))
		}
	}
	return http.MaxBytesReader(c.Writer, c.Request.Body, maxBodyBytes), nil
}

// caller is what the admin log records as the client: the socket's peer,
// unless that is a trusted proxy (http.trusted_proxies) that named another.
func caller(c *gin.Context) []any {
	by, peer := c.ClientIP(), c.RemoteIP()
	if by == peer {
		return []any{"by", by}
	}
	return []any{"by", by, "via", peer}
}

// createTag answers POST /api/tags.
func (s *Server) createTag(c *gin.Context) {
	body, err := adminBody(c)
	if err != nil {
		s.writeError(c, err)
		return
	}
	t, err := ParseCreateTag(body, s.maxStep)
	if err != nil {
		s.writeError(c, err)
		return
	}
	if t.Format == segment.FormatOpaque {
		if s.opaqueKey == nil {
			s.writeError(c, leafd.Errorf(leafd.EInvalidBody, "this server has no segment.opaque_key: set it (the same on every server) to create opaque tags"))
			return
		}
		t.KeyFingerprint = segment.KeyFingerprint(s.opaqueKey, t.Name)
	}
	created, err := s.tags.CreateTag(c.Request.Context(), t)
	if err != nil {
		s.writeError(c, err)
		return
	}
	if s.seg != nil {
		s.seg.Upsert(created)
	}
	s.log.Info("admin: tag created", append([]any{"tag", created.Name, "step", created.Step, "max_id", created.MaxID,
		"description", created.Description}, caller(c)...)...)
	c.JSON(http.StatusCreated, toJSON(created))
}

// updateTag answers PATCH /api/tags/{tag}.
func (s *Server) updateTag(c *gin.Context) {
	name := c.Param("tag")
	if err := leafd.ValidateTag(name); err != nil {
		s.writeError(c, err)
		return
	}
	body, err := adminBody(c)
	if err != nil {
		s.writeError(c, err)
		return
	}
	u, err := ParseUpdateTag(body, s.maxStep)
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
		s.seg.Upsert(updated)
	}
	s.log.Info("admin: tag changed", append([]any{"tag", name, "old_step", old.Step, "step", updated.Step,
		"old_description", old.Description, "description", updated.Description}, caller(c)...)...)
	c.JSON(http.StatusOK, toJSON(updated))
}

// decodeJSONOpaque is the answer of GET /api/tags/{tag}/decode/{id}.
type decodeOpaqueJSON struct {
	Tag      string `json:"tag"`
	ID       string `json:"id"`
	Position string `json:"position"`
}

// decodeOpaque answers GET /api/tags/{tag}/decode/{id}: the counter value
// (position, 1 for the tag's first ID) an opaque tag's ID was mapped from,
// for support.
func (s *Server) decodeOpaque(c *gin.Context) {
	name := c.Param("tag")
	if err := leafd.ValidateTag(name); err != nil {
		s.writeError(c, err)
		return
	}
	t, err := s.tags.LookupTag(c.Request.Context(), name)
	if err != nil {
		s.writeError(c, err)
		return
	}
	pos, err := segment.DecodeOpaque(s.opaqueKey, t, c.Param("id"))
	if err != nil {
		s.writeError(c, err)
		return
	}
	c.JSON(http.StatusOK, decodeOpaqueJSON{Tag: name, ID: c.Param("id"), Position: strconv.FormatInt(pos, 10)})
}
