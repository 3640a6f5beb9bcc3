package main

import (
	"fmt"
	"math"
)

// maxDigits is the length of 2^63-1 in decimal, the longest ID there is.
const maxDigits = 19

// checkIDs reports whether body is what leafd's plain-text ID routes promise
// (docs/contract.md section 4): exactly want lines, each a decimal ID from 1 to 2^63-1
// without sign or leading zero and ending in '\n', strictly ascending. The
// baseline's constant "1\n" passes with want = 1. It allocates only to
// describe a failure.
func checkIDs(body []byte, want int) error {
	if len(body) == 0 {
		return fmt.Errorf("empty body, want %d ID(s)", want)
	}
	var prev uint64 // IDs start at 1, so the first one is always above it
	n := 0
	for i := 0; i < len(body); {
		n++
		if n > want {
			return fmt.Errorf("more than the %d ID(s) asked for", want)
		}
		var v uint64
		j := i
		for ; j < len(body) && body[j] != '\n'; j++ {
			c := body[j]
			if c < '0' || c > '9' {
				return fmt.Errorf("line %d: %q is not a decimal digit", n, c)
			}
			if j-i == maxDigits {
				return fmt.Errorf("line %d: more than %d digits, not a 63-bit ID", n, maxDigits)
			}
			v = v*10 + uint64(c-'0') // 19 digits fit in a uint64
		}
		switch {
		case j == len(body):
			return fmt.Errorf("line %d does not end in a newline", n)
		case j == i:
			return fmt.Errorf("line %d is empty", n)
		case v == 0:
			return fmt.Errorf("line %d: ID 0 is never valid", n)
		case body[i] == '0':
			return fmt.Errorf("line %d: leading zero in %q", n, body[i:j])
		case v > math.MaxInt64:
			return fmt.Errorf("line %d: %s is above 2^63-1", n, body[i:j])
		case v <= prev:
			return fmt.Errorf("line %d: ID %d is not above the one before it, %d", n, v, prev)
		}
		prev = v
		i = j + 1
	}
	if n != want {
		return fmt.Errorf("%d ID(s), want %d", n, want)
	}
	return nil
}
