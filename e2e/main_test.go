package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/testenv"
)

// profile sizes a run: how many servers and clients, how long each phase
// lasts and how many times a fault is repeated.
type profile struct {
	name string
	// servers is the size of a cluster; clients the load clients per
	// server.
	servers, clients int
	// phase is one stretch of steady load between faults.
	phase time.Duration
	// shortOutage is shorter than a buffer's life; longOutage drains the
	// buffers.
	shortOutage, longOutage time.Duration
	// kills is how many kill -9 / restart cycles scenario 1 runs;
	// dbRestarts how many database restarts scenario 4 simulates;
	// workerCycles how many kill -9 / restart cycles of a snowflake server
	// scenario 5 runs.
	kills, dbRestarts, workerCycles int
	// badRounds is how many rounds of bad input scenario 6 sends after
	// its warm-up round.
	badRounds int
	// slowlorisTimeout waits for leafd's ReadHeaderTimeout (10s) to close
	// connections that never finish their headers.
	slowlorisTimeout bool
	// poolRequests is how many snowflake requests scenario 5c sends at
	// least, its phases lengthened until they have; 0: the phases alone.
	poolRequests int64
}

var profiles = map[string]profile{
	"short": {name: "short", servers: 3, clients: 4, phase: 1500 * time.Millisecond,
		shortOutage: time.Second, longOutage: 3 * time.Second,
		kills: 1, dbRestarts: 2, workerCycles: 1, badRounds: 3},
	"long": {name: "long", servers: 4, clients: 8, phase: 8 * time.Second,
		shortOutage: 2 * time.Second, longOutage: 10 * time.Second,
		kills: 5, dbRestarts: 8, workerCycles: 5, badRounds: 30, slowlorisTimeout: true,
		poolRequests: 1_300_000},
}

// prof is the profile of this run; nil when the suite is off.
var prof *profile

// leafdBin is the binary under test, built once by TestMain.
var leafdBin string

// skipped is what a run without LEAFD_E2E says.
const skipped = "e2e: skipped: set LEAFD_E2E=short or long to run the fault-injection suite"

const howToRun = "the end-to-end suite is off: run it with LEAFD_E2E=short go test -count=1 ./e2e/ " +
	"(or LEAFD_E2E=long; LEAFD_E2E_RACE=1 builds leafd with the race detector; see e2e/doc.go)"

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	switch name := os.Getenv("LEAFD_E2E"); name {
	case "":
		flag.Parse()
		if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
			return m.Run() // go test -list: the names, no test runs
		}
		// go test shows nothing of a package that passes but its summary
		// line, so the skip is said twice: in a line of its own (seen with
		// -v) and by the warning go test turns into "[no tests to run]"
		// after "ok", rather than an "ok" that reads as a passed suite.
		fmt.Println(skipped)
		fmt.Println("testing: warning: no tests to run")
		return 0
	default:
		p, ok := profiles[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "LEAFD_E2E=%q: use short or long\n", name)
			return 2
		}
		prof = &p
	}
	// Asking for the suite and getting skips for want of a database would
	// pass silently.
	os.Setenv("LEAFD_TEST_REQUIRE_MYSQL", "1")
	os.Setenv("LEAFD_TEST_REQUIRE_POSTGRES", "1")
	if leafdBin = os.Getenv("LEAFD_E2E_BIN"); leafdBin == "" {
		built := &testenv.Binary{Race: raceBinary(), Output: os.Stderr}
		defer built.Remove()
		var err error
		if leafdBin, err = built.Path(); err != nil {
			fmt.Fprintln(os.Stderr, "building leafd:", err)
			return 1
		}
	}
	began := time.Now()
	code := m.Run()
	stopGalera(code != 0)
	if err := writeReport(time.Since(began)); err != nil {
		fmt.Fprintln(os.Stderr, "e2e report:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

func raceBinary() bool { return os.Getenv("LEAFD_E2E_RACE") == "1" }

// enabled skips the test unless the suite is on.
func enabled(t *testing.T) {
	t.Helper()
	if prof == nil {
		t.Skip(howToRun)
	}
}

// row is one line of the results table.
type row struct {
	scenario   string
	ids        int64
	failed     int64
	waits      int64
	maxLatency time.Duration
	verdict    string
	notes      string
}

var report struct {
	mu   sync.Mutex
	rows []row
}

func addRow(r row) {
	report.mu.Lock()
	defer report.mu.Unlock()
	report.rows = append(report.rows, r)
}

// table renders rows as a Markdown table.
func table(rows []row) string {
	var b strings.Builder
	b.WriteString("| scenario | IDs issued | failed requests | waits | max latency | verdict | notes |\n")
	b.WriteString("|---|---:|---:|---:|---:|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %s | %s | %s |\n", r.scenario, r.ids, r.failed, r.waits,
			r.maxLatency.Round(time.Millisecond), r.verdict, r.notes)
	}
	return b.String()
}

// writeReport writes the table of this run to LEAFD_E2E_REPORT, if set.
func writeReport(took time.Duration) error {
	path := os.Getenv("LEAFD_E2E_REPORT")
	report.mu.Lock()
	rows := append([]row(nil), report.rows...)
	report.mu.Unlock()
	if path == "" || len(rows) == 0 {
		return nil
	}
	// Scenarios are named by number: list them in that order, not the
	// order the tests ran in.
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].scenario < rows[j].scenario })
	race := "off"
	if raceBinary() {
		race = "on"
	}
	head := fmt.Sprintf("leafd end-to-end suite, profile %s, %s, race detector %s, %d CPUs (%s %s/%s), %v in all\n\n",
		prof.name, time.Now().UTC().Format(time.RFC3339), race, runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH,
		took.Round(time.Second))
	return os.WriteFile(path, []byte(head+table(rows)), 0o644)
}

// Without LEAFD_E2E the package runs nothing and says so, in go test's
// summary line and, with -v, in words.
func TestSkippedWithoutProfile(t *testing.T) {
	enabled(t)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LEAFD_E2E=") {
			env = append(env, kv)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"test", "-count=1", "."}, "[no tests to run]"},
		{[]string{"test", "-count=1", "-v", "."}, skipped},
	} {
		cmd := exec.Command("go", c.args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), c.want) || strings.Contains(string(out), "--- ") {
			t.Errorf("go %s without LEAFD_E2E: %v, output %q; want %q and no test run", strings.Join(c.args, " "), err, out, c.want)
		}
	}
}
