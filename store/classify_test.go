package store

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leafd/leafd/store/internal/engine"
)

// The error table as docs/compatibility.md prints it, between these
// markers. LEAFD_TEST_UPDATE_DOCS=1 go test ./store -run TestErrorTableDocumented
// writes it there.
const (
	docFile        = "../docs/compatibility.md"
	docTableBegin  = "<!-- error table: generated from the engines' rows in store/ by TestErrorTableDocumented; do not edit -->"
	docTableEnd    = "<!-- end of the error table -->"
	docEngineTitle = "| engine | code | sent by | what it is | what leafd does | what the error says |"
)

// errorRow is one row of the error table: the engine it is of, and its
// columns.
type errorRow struct {
	engine string
	engine.Rule
}

// errorRows is the error table (docs/compatibility.md prints it): every
// engine's rows, engines in Drivers order.
func errorRows() []errorRow {
	var rows []errorRow
	for _, name := range Drivers() {
		for _, r := range lookup(name).Rows {
			rows = append(rows, errorRow{name, r})
		}
	}
	return rows
}

// doesWords says in the documentation what leafd does with a row's class.
var doesWords = map[engine.Class]string{
	engine.ClassRetry:       "**retry**: the whole transaction again, from BEGIN",
	engine.ClassUnavailable: "**move on**: to the next address, else `store_unavailable`",
	engine.ClassLocked:      "**give up**: `store_unavailable` (a locked row)",
	engine.ClassDuplicate:   "duplicate key: `tag_exists`, or a worker id's claim starts again",
	engine.ClassOther:       "**give up**: an internal error with the server's message",
}

// errorTableMarkdown is the error table as a Markdown table.
func errorTableMarkdown() string {
	var b strings.Builder
	b.WriteString(docEngineTitle + "\n|---|---|---|---|---|---|\n")
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	for _, r := range errorRows() {
		code := "`" + r.Code + "`"
		if r.Match != "" {
			code += fmt.Sprintf(" (message holds `%s`)", r.Match)
		}
		says := ""
		switch r.Class {
		case engine.ClassRetry, engine.ClassUnavailable, engine.ClassLocked:
			says = r.Cause + "; " + r.Hint
			if r.Class == engine.ClassRetry {
				says = r.Cause + "; retried N times in D; " + r.Hint
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", EngineName(r.engine), code, cell(r.From), cell(r.Name),
			doesWords[r.Class], cell(says))
	}
	return b.String()
}

// TestErrorTableDocumented: docs/compatibility.md prints the error table
// as it is.
func TestErrorTableDocumented(t *testing.T) {
	doc, err := os.ReadFile(docFile)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	before, rest, ok := strings.Cut(text, docTableBegin+"\n")
	_, after, ok2 := strings.Cut(rest, docTableEnd)
	if !ok || !ok2 {
		t.Fatalf("%s has no %q … %q section", docFile, docTableBegin, docTableEnd)
	}
	want := before + docTableBegin + "\n" + errorTableMarkdown() + docTableEnd + after
	if text == want {
		return
	}
	if os.Getenv("LEAFD_TEST_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(docFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote the error table into %s", filepath.Clean(docFile))
		return
	}
	t.Fatalf("the error table in %s is not the engines' rows in store/: run LEAFD_TEST_UPDATE_DOCS=1 go test ./store -run TestErrorTableDocumented", docFile)
}

// TestErrorTable: every row says what it must. (Each engine's tests check
// that its rows are found by the errors they describe.)
func TestErrorTable(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range errorRows() {
		key := r.engine + " " + r.Code + " " + r.Match
		if seen[key] {
			t.Errorf("%s: two rows", key)
		}
		seen[key] = true
		if doesWords[r.Class] == "" || r.From == "" || r.Name == "" {
			t.Errorf("%s: class, sender or meaning missing", key)
		}
		worded := r.Class == engine.ClassRetry || r.Class == engine.ClassUnavailable || r.Class == engine.ClassLocked
		if worded != (r.Cause != "" && r.Hint != "") {
			t.Errorf("%s: a row of class %d has cause %q and hint %q", key, r.Class, r.Cause, r.Hint)
		}
	}
}
