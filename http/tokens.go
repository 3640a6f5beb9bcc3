package http

import (
	"context"
	"io"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/store"
)

// Tokens is what the token routes need of the store; every store.Store
// implements it. The ID routes' check is package access's.
type Tokens interface {
	CreateToken(ctx context.Context, tags []string, description string) (store.Token, string, error)
	ListTokens(ctx context.Context) ([]store.Token, error)
	RevokeToken(ctx context.Context, id string) error
}

var _ Tokens = store.Store(nil)

// guard returns h behind the token check of its mode when that mode
// requires tokens. leaf routes take the token from ?token= as well (as
// Tinyid clients send it) and answer a refusal in their text shape.
func (s *Server) guard(snowflake, leaf bool, h gin.HandlerFunc) []gin.HandlerFunc {
	if !s.access.Required(snowflake) {
		return []gin.HandlerFunc{h}
	}
	return []gin.HandlerFunc{func(c *gin.Context) { s.checkIDToken(c, snowflake, leaf) }, h}
}

// checkIDToken lets an ID request through only with a token allowed for
// its tag (the name snowflake on the snowflake routes).
func (s *Server) checkIDToken(c *gin.Context, snowflake, leaf bool) {
	tag := c.Param("tag")
	if !snowflake && leafd.ValidateTag(tag) != nil {
		c.Next() // the handler answers invalid_tag
		return
	}
	var text string
	scheme, rest, _ := strings.Cut(strings.TrimSpace(c.GetHeader("Authorization")), " ")
	if strings.EqualFold(scheme, "Bearer") {
		text = strings.TrimSpace(rest)
	}
	var err error
	switch {
	case text == "":
		var q query
		err = tokenQuery.read(c.Request.URL.RawQuery, &q)
		token, _ := q.get("token")
		text = strings.TrimSpace(token)
		if !leaf && (err != nil || text != "") {
			// A token in the URL of a native route is refused as the
			// handler would refuse it, rather than answered
			// token_required: the caller learns where the token goes.
			s.writeError(c, unknownParam("token", nil))
			return
		}
	}
	if err == nil { // else a malformed query: not a refusal
		err = s.access.Check(text, tag, snowflake)
	}
	if err == nil {
		c.Next()
		return
	}
	if leafd.ErrorCode(err) == leafd.ETokenRequired {
		c.Header("WWW-Authenticate", `Bearer realm="leafd"`)
	}
	if !leaf {
		s.writeError(c, err)
		return
	}
	code := leafd.ErrorCode(err)
	if code != leafd.ETokenRequired && code != leafd.ETokenRefused {
		s.writeLeafError(c, err) // 500, as every other error of these routes
		return
	}
	// The Leaf route's text shape, with the refusal's own status: a
	// client without a token must not read it as a server failure.
	status := ErrorStatus(err)
	_ = c.Error(err)
	c.Header("Content-Type", textPlain)
	c.AbortWithStatus(status)
	_, _ = c.Writer.WriteString(code + ": " + leafd.ErrorMessage(err))
}

// tokenJSON is a token as the admin routes answer it: never its hash. The
// text is there only in the answer to its creation.
type tokenJSON struct {
	ID          string   `json:"id"`
	Token       string   `json:"token,omitempty"`
	Tags        []string `json:"tags"`
	Description string   `json:"description"`
	Created     string   `json:"created"`
}

func tokenToJSON(t store.Token, text string) tokenJSON {
	tags := t.Tags
	if tags == nil {
		tags = []string{}
	}
	return tokenJSON{ID: t.ID, Token: text, Tags: tags, Description: t.Description,
		Created: t.Created.UTC().Format(rfc3339Milli)}
}

// CreateTokenRequest is the body of POST /api/tokens.
type CreateTokenRequest struct {
	Tags        *[]string `json:"tags"`
	Description *string   `json:"description"`
}

// ParseCreateToken decodes and checks a POST /api/tokens body.
//
// Errors: invalid_body for a body that is not one JSON object of the known
// fields, no tags, a bad pattern or description; body_too_large past 64
// KiB.
func ParseCreateToken(body io.Reader) (tags []string, description string, err error) {
	const example = `{"tags":["order","pay*"],"description":"billing"}`
	var req CreateTokenRequest
	if err := decodeJSON(body, &req, defaultMaxStep, example); err != nil {
		return nil, "", err
	}
	if req.Tags == nil {
		return nil, "", leafd.Errorf(leafd.EInvalidBody, "the body names no tags: send %s", example)
	}
	if tags, err = store.ValidateTokenTags(*req.Tags); err != nil {
		return nil, "", err
	}
	if req.Description != nil {
		description = *req.Description
		if err := leafd.ValidateDescription(description); err != nil {
			return nil, "", err
		}
	}
	return tags, description, nil
}

func (s *Server) tokensDisabled(c *gin.Context) bool {
	if s.tokenStore == nil {
		s.writeError(c, leafd.Errorf(leafd.EAdminDisabled, "this server has no store for tokens"))
		return true
	}
	return false
}

// listTokens answers GET /api/tokens.
func (s *Server) listTokens(c *gin.Context) {
	if s.tokensDisabled(c) {
		return
	}
	tokens, err := s.tokenStore.ListTokens(c.Request.Context())
	if err != nil {
		s.writeError(c, err)
		return
	}
	out := make([]tokenJSON, len(tokens))
	for i, t := range tokens {
		out[i] = tokenToJSON(t, "")
	}
	c.JSON(http.StatusOK, gin.H{"tokens": out})
}

// createToken answers POST /api/tokens: 201 with the token's text, shown
// this once.
func (s *Server) createToken(c *gin.Context) {
	if s.tokensDisabled(c) {
		return
	}
	body, err := adminBody(c)
	if err != nil {
		s.writeError(c, err)
		return
	}
	tags, desc, err := ParseCreateToken(body)
	if err != nil {
		s.writeError(c, err)
		return
	}
	t, text, err := s.tokenStore.CreateToken(c.Request.Context(), tags, desc)
	if err != nil {
		s.writeError(c, err)
		return
	}
	s.access.Reload(context.WithoutCancel(c.Request.Context()))
	s.log.Info("admin: token created", append([]any{"id", t.ID, "tags", strings.Join(t.Tags, ","),
		"description", t.Description}, caller(c)...)...)
	c.JSON(http.StatusCreated, tokenToJSON(t, text))
}

// revokeToken answers DELETE /api/tokens/{id}: 204.
func (s *Server) revokeToken(c *gin.Context) {
	if s.tokensDisabled(c) {
		return
	}
	id := c.Param("id")
	if err := s.tokenStore.RevokeToken(c.Request.Context(), id); err != nil {
		s.writeError(c, err)
		return
	}
	s.access.Reload(context.WithoutCancel(c.Request.Context()))
	s.log.Info("admin: token revoked", append([]any{"id", id}, caller(c)...)...)
	c.Status(http.StatusNoContent)
}
