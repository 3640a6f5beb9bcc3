package leafd_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/leafd/leafd"
)

var tagPattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)

func TestValidateTag(t *testing.T) {
	for _, ok := range []string{"a", "order", "Order.v2:pay-in_CN", strings.Repeat("z", 128)} {
		if err := leafd.ValidateTag(ok); err != nil {
			t.Errorf("ValidateTag(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", " ", "a b", "a/b", "ä", "a\x00", strings.Repeat("z", 129), "tag?x=1", "%41"} {
		if err := leafd.ValidateTag(bad); leafd.ErrorCode(err) != leafd.EInvalidTag {
			t.Errorf("ValidateTag(%q) = %v, want invalid_tag", bad, err)
		}
	}
}

// FuzzValidateTag checks ValidateTag against the pattern of SPEC section 3.
// The seed corpus (testdata/fuzz) runs with the ordinary tests.
func FuzzValidateTag(f *testing.F) {
	for _, s := range []string{"order", "", "a b", strings.Repeat("x", 128), strings.Repeat("x", 129), "é", "a:b.c-d_e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := leafd.ValidateTag(s)
		if want := tagPattern.MatchString(s); (err == nil) != want {
			t.Fatalf("ValidateTag(%q) = %v; the pattern says valid=%v", s, err, want)
		}
		if err != nil && (leafd.ErrorCode(err) != leafd.EInvalidTag || leafd.ErrorMessage(err) == "") {
			t.Fatalf("ValidateTag(%q) = %v: want an invalid_tag error with a message", s, err)
		}
	})
}

func TestValidateDescription(t *testing.T) {
	if err := leafd.ValidateDescription(strings.Repeat("订", 256)); err != nil {
		t.Fatalf("256 characters: %v", err)
	}
	for _, bad := range []string{strings.Repeat("a", 257), "\xff"} {
		if err := leafd.ValidateDescription(bad); leafd.ErrorCode(err) != leafd.EInvalidBody {
			t.Fatalf("ValidateDescription(%.20q) = %v, want invalid_body", bad, err)
		}
	}
}
