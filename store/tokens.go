package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"slices"
	"strings"
	"time"

	"github.com/leafd/leafd"
)

// Access tokens of the ID routes (segment.require_token,
// snowflake.require_token) live in leafd's own table, leafd_token
// (store/*/migrations/00006_tokens.sql): one row per live token, deleted when it
// is revoked. A token is shown once, when it is made; the table keeps only
// its SHA-256.

// TokenPrefix starts every access token, so that a secret pasted where it
// should not be is recognised (by a reviewer or a secret scanner).
const TokenPrefix = "leafd_"

// Token limits.
const (
	// MaxTokenTags is the most patterns one token may list.
	MaxTokenTags = 64
	// tokenIDLen is the length of a token's id, 16 hex digits.
	tokenIDLen = 16
	// tokenSecretLen is the length of the base64url text of the token's
	// 32 random bytes.
	tokenSecretLen = 43
)

// Token is an access token as the store keeps it: never its secret.
type Token struct {
	// ID names the token in lists and revocations. It is part of the token
	// text, and not secret.
	ID string
	// Hash is the hex SHA-256 of the whole token text.
	Hash string
	// Tags are the patterns the token allows: tag names, or a prefix
	// followed by "*" ("pay*", and "*" for every tag).
	Tags        []string
	Description string
	Created     time.Time
}

// The SQL of the tokens.
const (
	tokenColumns     = `SELECT id, token_hash, tags, description, created_ms FROM leafd_token`
	insertTokenSQL   = `INSERT INTO leafd_token (id, token_hash, tags, description, created_ms) VALUES (?, ?, ?, ?, ?)`
	deleteTokenSQL   = `DELETE FROM leafd_token WHERE id = ?`
	tokenTagsSep     = ","
	tokenPatternHint = `a tag name such as "order", or a prefix followed by one "*" such as "pay*" ("*" alone allows every tag)`
)

type tokenRow struct {
	ID          string `db:"id"`
	Hash        string `db:"token_hash"`
	Tags        string `db:"tags"`
	Description string `db:"description"`
	CreatedMs   int64  `db:"created_ms"`
}

func (r tokenRow) token() Token {
	var tags []string
	if r.Tags != "" {
		tags = strings.Split(r.Tags, tokenTagsSep)
	}
	return Token{ID: r.ID, Hash: r.Hash, Tags: tags, Description: r.Description, Created: time.UnixMilli(r.CreatedMs).UTC()}
}

// ValidateTokenTags checks the patterns of a token to make and returns them
// sorted without duplicates. Each is a valid tag name (leafd.ValidateTag),
// or a prefix of tag characters followed by a single trailing "*".
//
// Errors: invalid_body naming the first bad pattern, or for an empty list
// or one longer than MaxTokenTags.
func ValidateTokenTags(tags []string) ([]string, error) {
	if len(tags) == 0 {
		return nil, leafd.Errorf(leafd.EInvalidBody, "a token needs at least one tag pattern: %s", tokenPatternHint)
	}
	if len(tags) > MaxTokenTags {
		return nil, leafd.Errorf(leafd.EInvalidBody, "a token lists %d tag patterns: at most %d are allowed", len(tags), MaxTokenTags)
	}
	for _, p := range tags {
		if err := validateTokenPattern(p); err != nil {
			return nil, err
		}
	}
	return slices.Compact(slices.Sorted(slices.Values(tags))), nil
}

func validateTokenPattern(p string) error {
	name := p
	if prefix, wild := strings.CutSuffix(p, "*"); wild {
		name = prefix + "a" // a valid prefix is one that a tag can begin with
	}
	if leafd.ValidateTag(name) != nil {
		return leafd.Errorf(leafd.EInvalidBody, "the tag pattern %q is not valid: use %s", truncate(p), tokenPatternHint)
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// HashToken returns the hex SHA-256 of a token's text, as the store keeps
// it.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// TokenID returns the id a token's text carries, and false when the text
// does not have a token's shape (TokenPrefix, 16 hex digits, "_", 43
// base64url characters).
func TokenID(token string) (string, bool) {
	rest, ok := strings.CutPrefix(token, TokenPrefix)
	if !ok || len(rest) != tokenIDLen+1+tokenSecretLen || rest[tokenIDLen] != '_' {
		return "", false
	}
	id := rest[:tokenIDLen]
	if _, err := hex.DecodeString(id); err != nil {
		return "", false
	}
	return id, true
}

// newTokenText returns a fresh id and token text: TokenPrefix, the id, "_"
// and 32 random bytes in base64url.
func newTokenText() (id, text string) {
	var idb [tokenIDLen / 2]byte
	var secret [32]byte
	_, _ = rand.Read(idb[:]) // crypto/rand.Read never fails
	_, _ = rand.Read(secret[:])
	id = hex.EncodeToString(idb[:])
	return id, TokenPrefix + id + "_" + base64.RawURLEncoding.EncodeToString(secret[:])
}

// CreateToken makes an access token allowing tags (see ValidateTokenTags)
// and stores its hash. It returns the token as stored and its text, which
// is shown once and kept nowhere.
//
// Errors: invalid_body for bad patterns or a description over 256
// characters or not UTF-8; store_unavailable when the database cannot be
// reached; an error without a code otherwise (the table missing among
// them: see MissingTable).
func (s *db) CreateToken(ctx context.Context, tags []string, description string) (Token, string, error) {
	tags, err := ValidateTokenTags(tags)
	if err != nil {
		return Token{}, "", err
	}
	if err := leafd.ValidateDescription(description); err != nil {
		return Token{}, "", err
	}
	id, text := newTokenText()
	t := Token{ID: id, Hash: HashToken(text), Tags: tags, Description: description, Created: time.Now().UTC().Truncate(time.Millisecond)}
	err = s.write(ctx, func(ctx context.Context) error {
		_, err := s.x.ExecContext(ctx, s.q(insertTokenSQL), t.ID, t.Hash, strings.Join(t.Tags, tokenTagsSep), t.Description, t.Created.UnixMilli())
		return err
	})
	if err != nil {
		return Token{}, "", s.Wrap(err, "create a token")
	}
	return t, text, nil
}

// ListTokens returns every live token, oldest first, with its hash (for
// the servers' check) but never its text.
//
// Errors: store_unavailable when the database cannot be reached; an error
// without a code otherwise (the table missing among them).
func (s *db) ListTokens(ctx context.Context) ([]Token, error) {
	var rows []tokenRow
	if err := s.x.SelectContext(ctx, &rows, tokenColumns+` ORDER BY created_ms, id`); err != nil {
		return nil, s.Wrap(err, "list tokens")
	}
	out := make([]Token, len(rows))
	for i, r := range rows {
		out[i] = r.token()
	}
	return out, nil
}

// RevokeToken deletes the token of that id: every server refuses it from
// its next reading of the tokens.
//
// Errors: unknown_token when no token has that id; store_unavailable when
// the database cannot be reached; an error without a code otherwise.
func (s *db) RevokeToken(ctx context.Context, id string) error {
	var n int64
	err := s.write(ctx, func(ctx context.Context) (err error) {
		n, err = affected(s.x.ExecContext(ctx, s.q(deleteTokenSQL), id))
		return err
	})
	if err != nil {
		return s.Wrap(err, "revoke a token")
	}
	if n == 0 {
		return UnknownTokenError(id)
	}
	return nil
}

// UnknownTokenError is the unknown_token error for an id no token has.
func UnknownTokenError(id string) error {
	return leafd.Errorf(leafd.EUnknownToken, "no token has the id %q: list the tokens with GET /api/tokens or leafd token list", truncate(id))
}
