package store

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
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

// doesWords says in the documentation what leafd does with a row's class.
var doesWords = map[errClass]string{
	classRetry:       "**retry**: the whole transaction again, from BEGIN",
	classUnavailable: "**move on**: to the next address, else `store_unavailable`",
	classLocked:      "**give up**: `store_unavailable` (a locked row)",
	classDuplicate:   "duplicate key: `tag_exists`, or a worker id's claim starts again",
	classOther:       "**give up**: an internal error with the server's message",
}

var engineNames = map[string]string{"mysql": "MySQL family", "postgres": "PostgreSQL", "sqlite": "SQLite"}

// errorTableMarkdown is the error table as a Markdown table.
func errorTableMarkdown() string {
	var b strings.Builder
	b.WriteString(docEngineTitle + "\n|---|---|---|---|---|---|\n")
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	for _, r := range errorRows() {
		code := "`" + r.code + "`"
		if r.match != "" {
			code += fmt.Sprintf(" (message holds `%s`)", r.match)
		}
		says := ""
		switch r.class {
		case classRetry, classUnavailable, classLocked:
			says = r.cause + "; " + r.hint
			if r.class == classRetry {
				says = r.cause + "; retried N times in D; " + r.hint
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", engineNames[r.engine], code, cell(r.from), cell(r.name),
			doesWords[r.class], cell(says))
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

// TestErrorTable: every row can be found by the error it describes, and
// words what it must.
func TestErrorTable(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range errorRows() {
		key := r.engine + " " + r.code + " " + r.match
		if seen[key] {
			t.Errorf("%s: two rows", key)
		}
		seen[key] = true
		if doesWords[r.class] == "" || r.from == "" || r.name == "" {
			t.Errorf("%s: class, sender or meaning missing", key)
		}
		worded := r.class == classRetry || r.class == classUnavailable || r.class == classLocked
		if worded != (r.cause != "" && r.hint != "") {
			t.Errorf("%s: a row of class %d has cause %q and hint %q", key, r.class, r.cause, r.hint)
		}
		msg := "injected: " + r.match + " " + r.name
		var got *errorRule
		switch r.engine {
		case "mysql":
			continue // TestErrorTableAllocate runs every MySQL row through a store
		case "postgres":
			code := strings.Replace(r.code, "*", "006", 1)
			got = postgresRule(code, msg)
			if v := classifyPostgres(&pgconn.PgError{Code: code, Message: msg}); v.class != r.class {
				t.Errorf("%s: classified %d, want %d", key, v.class, r.class)
			}
		case "sqlite":
			got = sqliteRule(sqliteCodes[r.code], msg)
		}
		if got == nil || got.code != r.code || got.match != r.match {
			t.Errorf("%s: the table finds %+v for it", key, got)
		}
	}
	// An extended SQLite code without a row of its own takes its primary
	// code's row; a constraint other than a key's is nobody's.
	if r := sqliteRule(5|2<<8, "database is locked"); r == nil || r.code != "SQLITE_BUSY" { // SQLITE_BUSY_SNAPSHOT
		t.Errorf("SQLITE_BUSY_SNAPSHOT: row %+v, want SQLITE_BUSY's", r)
	}
	if r := sqliteRule(19|3<<8, "FOREIGN KEY constraint failed"); r != nil { // SQLITE_CONSTRAINT_FOREIGNKEY
		t.Errorf("SQLITE_CONSTRAINT_FOREIGNKEY: row %+v, want none", r)
	}
	// The placeholders are filled.
	v := mysqlRule(mysqlErr(1049, "42000", "Unknown database 'leaf-d'")).verdict("Unknown database 'leaf-d'", "leaf-d", quoteIdent("leaf-d"), mysqlMaxOpen)
	if v.cause != "database leaf-d does not exist" || !strings.Contains(v.hint, "CREATE DATABASE `leaf-d`") {
		t.Errorf("1049 worded %+v", v)
	}
	v = mysqlRule(mysqlErr(1040, "08004", "Too many connections")).verdict("Too many connections", "", "", mysqlMaxOpen)
	if !strings.Contains(v.hint, fmt.Sprintf("at most %d", mysqlMaxOpen)) || strings.Contains(v.hint+v.cause, "{") {
		t.Errorf("1040 worded %+v", v)
	}
}
