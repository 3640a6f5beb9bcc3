package storetest

import (
	"strings"
	"testing"

	"github.com/leafd/leafd"
)

// Password is the password of the DSNs that the tests of store_unavailable
// open stores with: no message may show it.
const Password = "s3cret-Pa55word"

// WantUnavailable fails t unless err is store_unavailable and its
// message, and its whole text with the cause, hold every one of want and
// neither Password nor the serving path's words: each message names the
// cause and the next step, and says nothing of buffers, which is the
// serving path's to say.
func WantUnavailable(t *testing.T, err error, want ...string) {
	t.Helper()
	if code := leafd.ErrorCode(err); code != leafd.EStoreUnavailable {
		t.Fatalf("error %v: code %q, want store_unavailable", err, code)
	}
	msg := leafd.ErrorMessage(err)
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("message %q does not say %q", msg, w)
		}
	}
	for _, text := range []string{msg, err.Error()} {
		if strings.Contains(text, Password) {
			t.Errorf("%q shows the password", text)
		}
		if strings.Contains(text, "buffers") {
			t.Errorf("%q speaks of buffers", text)
		}
	}
}
