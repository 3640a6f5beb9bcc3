package main

import (
	"strconv"
	"strings"
	"testing"
)

func TestCheckIDs(t *testing.T) {
	ids := func(xs ...int64) string {
		var b strings.Builder
		for _, x := range xs {
			b.WriteString(strconv.FormatInt(x, 10) + "\n")
		}
		return b.String()
	}
	batch := make([]int64, 1000)
	for i := range batch {
		batch[i] = 1_000_001 + int64(i)
	}

	good := []struct {
		name string
		body string
		want int
	}{
		{"Baseline", "1\n", 1},
		{"One", "7340032\n", 1},
		{"Batch", ids(batch...), 1000},
		{"Gaps", ids(3, 10, 11, 2000), 4},
		{"MaxInt64", "9223372036854775806\n9223372036854775807\n", 2},
		{"Snowflake", "1993720349868498944\n", 1},
	}
	for _, c := range good {
		t.Run(c.name, func(t *testing.T) {
			if err := checkIDs([]byte(c.body), c.want); err != nil {
				t.Fatalf("checkIDs(%.40q, %d) = %v, want nil", c.body, c.want, err)
			}
		})
	}

	bad := []struct {
		name string
		body string
		want int
		says string // part of the message
	}{
		{"Empty", "", 1, "empty body"},
		{"NoNewline", "42", 1, "does not end in a newline"},
		{"LastNoNewline", "1\n2", 2, "line 2 does not end in a newline"},
		{"EmptyLine", "1\n\n", 2, "line 2 is empty"},
		{"Zero", "0\n", 1, "ID 0"},
		{"LeadingZero", "012\n", 1, "leading zero"},
		{"Negative", "-5\n", 1, "not a decimal digit"},
		{"Plus", "+5\n", 1, "not a decimal digit"},
		{"JSON", `{"ids":["1"]}` + "\n", 1, "not a decimal digit"},
		{"CRLF", "5\r\n", 1, "not a decimal digit"},
		{"Space", "5 \n", 1, "not a decimal digit"},
		{"AboveInt64", "9223372036854775808\n", 1, "above 2^63-1"},
		{"TwentyDigits", "10000000000000000000\n", 1, "more than 19 digits"},
		{"Wrapped", "18446744073709551615\n", 1, "more than 19 digits"},
		{"Descending", ids(5, 4), 2, "not above"},
		{"Duplicate", ids(5, 5), 2, "not above"},
		{"TooFew", ids(batch[:999]...), 1000, "999 ID(s), want 1000"},
		{"TooMany", ids(1, 2), 1, "more than the 1 ID(s)"},
		{"ErrorBody", `{"error":{"code":"unknown_tag"}}`, 1, "not a decimal digit"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			err := checkIDs([]byte(c.body), c.want)
			if err == nil {
				t.Fatalf("checkIDs(%.40q, %d) = nil, want an error", c.body, c.want)
			}
			if !strings.Contains(err.Error(), c.says) {
				t.Fatalf("checkIDs(%.40q, %d) = %q, want it to say %q", c.body, c.want, err, c.says)
			}
		})
	}
}

func TestCheckIDsAllocatesNothing(t *testing.T) {
	var body []byte
	for i := range 1000 {
		body = strconv.AppendInt(body, int64(1_000_000_000+i), 10)
		body = append(body, '\n')
	}
	if n := testing.AllocsPerRun(100, func() {
		if err := checkIDs(body, 1000); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("checkIDs allocates %v times on a good body", n)
	}
}
