package segment

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"

	"github.com/leafd/leafd"
)

// Opaque tags. An opaque tag takes its ranges from the store like any
// other, but each counter value c it would hand out is mapped through a
// keyed bijection of the tag's domain [1, N] to the ID it returns, so that
// IDs stay unique by construction while neither the count issued nor the
// rate can be read from them.
//
// The bijection is a balanced Feistel network over the smallest even
// number of bits that holds N, with AES-128 under the tag's key as the
// round function, and cycle walking: a value that lands at or past N is
// enciphered again until it falls inside. Every value of [0, N) maps to
// exactly one value of [0, N); c maps to perm(c-1)+1.

// Formats of a tag (leafd.Tag.Format).
const (
	FormatSequential = "sequential"
	FormatOpaque     = "opaque"
)

// DefaultOpaqueDomain is the domain of an opaque tag without Digits: IDs
// below 2^53, exact as JavaScript numbers.
const DefaultOpaqueDomain = 1<<53 - 1

// Digits bounds for an opaque tag with a decimal domain.
const (
	MinOpaqueDigits = 6
	MaxOpaqueDigits = 18
)

// feistelRounds is the number of rounds; four make a strong pseudorandom
// permutation of a balanced Feistel network (Luby–Rackoff), more add margin.
const feistelRounds = 8

// MinOpaqueKeyBytes is the shortest segment.opaque_key: 128 bits.
const MinOpaqueKeyBytes = 16

// OpaqueDomain returns N, the largest ID of an opaque tag with digits
// decimal digits (0: DefaultOpaqueDomain).
func OpaqueDomain(digits int) int64 {
	if digits == 0 {
		return DefaultOpaqueDomain
	}
	n := int64(1)
	for range digits {
		n *= 10
	}
	return n - 1
}

// ValidateDigits returns an invalid_body error unless digits is 0 or in
// MinOpaqueDigits..MaxOpaqueDigits.
func ValidateDigits(digits int) error {
	if digits != 0 && (digits < MinOpaqueDigits || digits > MaxOpaqueDigits) {
		return leafd.Errorf(leafd.EInvalidBody, "digits %d is out of range: use %d to %d, or leave it out for IDs below 2^53",
			digits, MinOpaqueDigits, MaxOpaqueDigits)
	}
	return nil
}

// TagKey derives tag's key from the master key (segment.opaque_key).
func TagKey(master []byte, tag string) []byte {
	m := hmac.New(sha256.New, master)
	m.Write([]byte("leafd opaque tag\x00"))
	m.Write([]byte(tag))
	return m.Sum(nil)[:16]
}

// KeyFingerprint returns the fingerprint of tag's key under master, which
// the store records with the tag: a server whose key gives another
// fingerprint refuses the tag. It reveals nothing of the key.
func KeyFingerprint(master []byte, tag string) string {
	sum := sha256.Sum256(append([]byte("leafd opaque fingerprint\x00"), TagKey(master, tag)...))
	return hex.EncodeToString(sum[:8])
}

// Perm is the keyed bijection of [1, N] of one opaque tag. It is safe for
// concurrent use.
type Perm struct {
	n     uint64 // the domain is [0, n) inside; IDs are [1, n]
	half  uint   // bits of each half
	mask  uint64 // (1 << half) - 1
	block cipher.Block
}

// NewPerm returns the bijection of [1, n] under key (16 bytes).
func NewPerm(key []byte, n int64) (*Perm, error) {
	if n < 1 {
		return nil, fmt.Errorf("segment: opaque domain %d is empty", n)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	width := uint(bits.Len64(uint64(n - 1)))
	width += width % 2
	if width < 2 {
		width = 2
	}
	half := width / 2
	return &Perm{n: uint64(n), half: half, mask: 1<<half - 1, block: block}, nil
}

// Max returns N, the largest ID.
func (p *Perm) Max() int64 { return int64(p.n) }

// round is the Feistel round function: AES of the round and the half.
// buf is scratch space: a buffer handed to the cipher through its
// interface escapes to the heap, so one is allocated per Map, not per
// round.
func (p *Perm) round(buf *[32]byte, i int, r uint64) uint64 {
	*buf = [32]byte{}
	buf[0] = byte(i)
	binary.BigEndian.PutUint64(buf[8:16], r)
	p.block.Encrypt(buf[16:], buf[:16])
	return binary.BigEndian.Uint64(buf[16:24]) & p.mask
}

func (p *Perm) encipher(buf *[32]byte, x uint64) uint64 {
	l, r := x>>p.half, x&p.mask
	for i := range feistelRounds {
		l, r = r, l^p.round(buf, i, r)
	}
	return l<<p.half | r
}

func (p *Perm) decipher(buf *[32]byte, x uint64) uint64 {
	l, r := x>>p.half, x&p.mask
	for i := feistelRounds - 1; i >= 0; i-- {
		l, r = r^p.round(buf, i, l), l
	}
	return l<<p.half | r
}

// Map returns the ID of counter value c, which must be in [1, N].
func (p *Perm) Map(c int64) int64 {
	buf := new([32]byte)
	x := p.encipher(buf, uint64(c-1))
	for x >= p.n { // cycle walking: at most a few steps, as 2^width < 4N
		x = p.encipher(buf, x)
	}
	return int64(x + 1)
}

// Unmap returns the counter value whose ID is id, which must be in [1, N].
func (p *Perm) Unmap(id int64) int64 {
	buf := new([32]byte)
	x := p.decipher(buf, uint64(id-1))
	for x >= p.n {
		x = p.decipher(buf, x)
	}
	return int64(x + 1)
}

// opaque is how an opaque tag maps its counters: its Perm, or the error
// that refuses the tag on this server.
type opaque struct {
	perm *Perm
	err  error
}

// tagSpec identifies what a tag row says of its format; a tag whose spec
// changes is served anew.
type tagSpec struct {
	format       string
	digits       int
	fingerprint  string
	period, zone string
	maxStep      int64
}

func specOf(t leafd.Tag) tagSpec {
	switch t.Format {
	case FormatOpaque:
		return tagSpec{format: FormatOpaque, digits: t.Digits, fingerprint: t.KeyFingerprint}
	case FormatDated:
		return tagSpec{format: FormatDated, digits: t.Digits, period: t.Period, zone: t.Zone, maxStep: t.MaxStep}
	}
	return tagSpec{}
}

// newOpaque returns how a tag of spec maps IDs under master; nil for a
// sequential tag.
func newOpaque(name string, spec tagSpec, master []byte) *opaque {
	if spec.format != FormatOpaque {
		return nil
	}
	switch {
	case len(master) == 0:
		return &opaque{err: leafd.Errorf(leafd.EOpaqueKeyMismatch,
			"tag %q is opaque and this server has no segment.opaque_key: set the key the tag was created with", name)}
	case KeyFingerprint(master, name) != spec.fingerprint:
		return &opaque{err: leafd.Errorf(leafd.EOpaqueKeyMismatch,
			"tag %q was created with another segment.opaque_key than this server's (key fingerprint %s, this server's %s): "+
				"set the same key on every server; no ID is handed out with the wrong key", name, spec.fingerprint, KeyFingerprint(master, name))}
	}
	p, err := NewPerm(TagKey(master, name), OpaqueDomain(spec.digits))
	if err != nil {
		return &opaque{err: err}
	}
	return &opaque{perm: p}
}

// id maps counter c to its ID: tag_exhausted past the domain.
func (o *opaque) id(name string, c int64) (int64, error) {
	if c > o.perm.Max() || c < 1 {
		return 0, leafd.Errorf(leafd.ETagExhausted, "tag %q is exhausted: its opaque domain holds %d IDs and all were handed out", name, o.perm.Max())
	}
	return o.perm.Map(c), nil
}

// mapRanges replaces the counter ranges rs by one range per ID, in the
// order the counters were taken, appended to dst. rs may lie in dst's
// spare capacity (NextN maps the ranges it appended): the IDs written over
// it would overwrite ranges not yet read, so several are copied first.
func (o *opaque) mapRanges(name string, dst, rs []Range) ([]Range, error) {
	if len(rs) > 1 {
		rs = slices.Clone(rs)
	}
	out := dst
	for _, r := range rs {
		step := max(r.Stride, 1)
		for c := r.Start; c < r.End; c += step {
			id, err := o.id(name, c)
			if err != nil {
				return dst, err
			}
			out = append(out, Range{Start: id, End: id + 1, Stride: 1})
		}
	}
	return out, nil
}

// ParseOpaqueKey decodes segment.opaque_key: hex, at least 128 bits.
func ParseOpaqueKey(s string) ([]byte, error) {
	if s == "" {
		return nil, nil
	}
	b, err := hex.DecodeString(s)
	switch {
	case err != nil:
		return nil, errors.New("is not hex: use at least 32 hex digits (128 bits), such as the output of openssl rand -hex 32")
	case len(b) < MinOpaqueKeyBytes:
		return nil, fmt.Errorf("has %d bits: use at least 128 (32 hex digits), such as the output of openssl rand -hex 32", 8*len(b))
	}
	return b, nil
}

// DecodeOpaque returns the position an ID of the opaque tag t was mapped
// from, under key (opaque_key).
//
// Errors: invalid_body for a tag that is not opaque; opaque_key_mismatch
// when key is not the tag's; invalid_id for an ID outside the tag's domain.
func DecodeOpaque(key []byte, t leafd.Tag, raw string) (int64, error) {
	if t.Format != FormatOpaque {
		return 0, leafd.Errorf(leafd.EInvalidBody, "tag %q is not opaque: its IDs are their own positions", t.Name)
	}
	if len(key) == 0 || KeyFingerprint(key, t.Name) != t.KeyFingerprint {
		return 0, leafd.Errorf(leafd.EOpaqueKeyMismatch, "tag %q was created with another opaque_key than this one (or none is set)", t.Name)
	}
	n := OpaqueDomain(t.Digits)
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id < 1 || id > n || raw != strconv.FormatInt(id, 10) {
		return 0, leafd.Errorf(leafd.EInvalidID, "%q is not an ID of tag %q: use a decimal integer from 1 to %d", raw, t.Name, n)
	}
	p, err := NewPerm(TagKey(key, t.Name), n)
	if err != nil {
		return 0, err
	}
	return p.Unmap(id), nil
}
