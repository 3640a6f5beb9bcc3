package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
)

// Configuration that leafd cannot mean stops start-up with exit code 2 and
// every problem named with where its value came from. (The internal/config
// test of the repository's LEAFD_ names skips this file: it names typos on
// purpose.)
func TestConfigurationThatCannotBeMeant(t *testing.T) {
	// An engine at network addresses, and its example DSN with a password
	// (root:s3cret); with no database named, every such engine refuses it.
	server, dflt := store.FallbackDrivers()[0], store.DefaultDriver()
	withPassword := testdb.WithLogin(t, server, store.ExampleDSN(server), "root", "s3cret")
	noDatabase := testdb.WithDatabase(t, server, testdb.WithLogin(t, server, store.ExampleDSN(server), "root", "pw"), "")
	// libpq's keyword=value pairs with spaces around '=': with the
	// default driver, the engine of files would serve from a new file
	// named after the DSN.
	const spaced = "host = 127.0.0.1 port = 5432 user = leafd password = s3cret dbname = leaf"
	spacedKind := store.OtherEngine(dflt, spaced)
	if spacedKind == "" {
		t.Fatalf("%q is no other engine's DSN than the default engine's", spaced)
	}
	tests := []struct {
		name   string
		file   string // written to leafd.yaml and given with --config
		env    []string
		want   []string // in the output
		absent []string // not in the output
	}{
		{"ServerDSNWithDefaultDriver", "", []string{"LEAFD_STORE_DSN=" + withPassword},
			[]string{fmt.Sprintf("store.dsn: %q is a %s DSN but store.driver is %s (built-in default)",
				store.MaskDSN(withPassword), store.EngineName(server), dflt), "(from LEAFD_STORE_DSN)"},
			[]string{"s3cret"}},
		{"DefaultDSNWithServerDriver", "store:\n  dsn: " + store.ExampleDSN(dflt) + "\n", []string{"LEAFD_STORE_DRIVER=" + server},
			[]string{fmt.Sprintf("store.dsn: %q is a %s DSN but store.driver is %s (from LEAFD_STORE_DRIVER)",
				store.ExampleDSN(dflt), store.EngineName(dflt), server),
				"set store.dsn to a " + store.EngineName(server) + " DSN", "(in "},
			[]string{"default addr for network"}},
		{"KeywordValueWithSpacesWithDefaultDriver", "",
			[]string{"LEAFD_STORE_DSN=" + spaced},
			[]string{fmt.Sprintf("store.dsn: %q is a %s DSN but store.driver is %s (built-in default)",
				store.MaskDSN(spaced), store.EngineName(spacedKind), dflt),
				"set store.driver to " + spacedKind, "(from LEAFD_STORE_DSN)"},
			[]string{"s3cret"}},
		// The engine's own judgement of a DSN of its kind.
		{"DSNWithoutDatabaseInFile", fmt.Sprintf("store:\n  driver: %s\n  dsn: %q\n", server, noDatabase), nil,
			[]string{"store.dsn: the " + store.EngineName(server) + " DSN names no database", "(in "}, []string{"root:pw"}},
		// A short token stops start-up, named, and is never repeated.
		{"ShortAdminToken", "", []string{"LEAFD_ADMIN_TOKEN=hunter2\n"},
			[]string{"admin.token: is 7 characters, too short", "(from LEAFD_ADMIN_TOKEN)"}, []string{"hunter2"}},
		{"BadTrustedProxy", "http:\n  trusted_proxies: [proxy.internal]\n", nil,
			[]string{`http.trusted_proxies[0]: "proxy.internal" is neither an IP address nor a CIDR range`}, nil},
		{"WorkersWithFixedWorkerID", "", []string{"LEAFD_SNOWFLAKE_ENABLED=true", "LEAFD_SNOWFLAKE_WORKERS=3", "LEAFD_SNOWFLAKE_WORKER_ID=5"},
			[]string{"snowflake.workers: 3 needs snowflake.worker_id: auto, not the fixed 5", "(from LEAFD_SNOWFLAKE_WORKERS)"}, nil},
		{"UnknownVariable", "", []string{"LEAFD_HTTPADDR=:9"},
			[]string{"LEAFD_HTTPADDR: unknown environment variable (did you mean LEAFD_HTTP_ADDR?)"}, nil},
		{"DSNWithoutDatabaseWithTheOthers", "log:\n  level: loud\n",
			[]string{"LEAFD_STORE_DRIVER=" + server, "LEAFD_STORE_DSN=" + noDatabase, "LEAFD_SEGMENT_MAX_BATCH=0"},
			[]string{"log.level: ", "(in ", "segment.max_batch: ", "(from LEAFD_SEGMENT_MAX_BATCH)",
				"store.dsn: the " + store.EngineName(server) + " DSN names no database", "(from LEAFD_STORE_DSN)"},
			[]string{"root:pw"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			args := []string{"serve"}
			if tt.file != "" {
				path := filepath.Join(dir, "leafd.yaml")
				if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", path)
			}
			code, out := runLeafd(t, dir, tt.env, args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2; output %q", code, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output %q\ndoes not say %q", out, w)
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(out, a) {
					t.Errorf("output %q\nsays %q", out, a)
				}
			}
			// Nothing was created: no SQLite file, no directory named
			// after a MySQL address.
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if e.Name() != "leafd.yaml" {
					t.Errorf("start-up that failed left %s in its directory", e.Name())
				}
			}
		})
	}
	t.Run("ReservedVariablesAreAllowed", func(t *testing.T) {
		env := []string{"LEAFD_TEST_ANYTHING=1", "LEAFD_E2E=x", "LEAFD_BENCH_LARGE=1", "LEAFD_DASHBOARD_PNG=/tmp/x.png"}
		if code, out := runLeafd(t, t.TempDir(), env, "decode", "1"); code != 0 {
			t.Fatalf("exit %d, output %q", code, out)
		}
	})
}

// Both modes off is allowed, but start-up says loudly that the server will
// issue no IDs.
func TestBothModesOffWarns(t *testing.T) {
	// baseEnv switches snowflake off.
	p := startLeafd(t, "LEAFD_SEGMENT_ENABLED=false", "LEAFD_STORE_DSN=file:"+filepath.Join(t.TempDir(), "leafd.db"))
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
	found := false
	for _, line := range strings.Split(p.Output(), "\n") {
		var rec struct{ Level, Msg string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Level == "WARN" &&
			strings.Contains(rec.Msg, "segment.enabled and snowflake.enabled are both false") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no WARN naming segment.enabled and snowflake.enabled:\n%s", p.Output())
	}
	t.Run("NotWhenOneIsOn", func(t *testing.T) {
		p := startLeafd(t, "LEAFD_STORE_DSN=file:"+filepath.Join(t.TempDir(), "leafd.db"))
		p.stop(t)
		if strings.Contains(p.Output(), "both false") {
			t.Fatalf("warned with segment mode on:\n%s", p.Output())
		}
	})
}
