// Command leafbench measures leafd over HTTP against the ceiling of HTTP on
// the same machine.
//
// It drives servers with many concurrent keep-alive clients for a fixed time
// per scenario and reports, for each, requests/s, IDs/s, p50/p99/p999
// latency and errors, and each result as a ratio to the baseline:
//
//	baseline       GET /segment/{tag} answered by a bare gin handler that
//	               writes the constant "1\n" (no middleware, release mode):
//	               what HTTP itself costs here, the most any server can reach
//	segment        GET /segment/{tag}
//	segment_batch  GET /segment/{tag}?count=1000
//	snowflake      GET /snowflake
//
// Every answer is checked: a status other than 200, a transport error, or a
// body that is not one decimal ID per line, with the right number of lines,
// strictly ascending, counts as an error, and leafbench exits 1 if there
// was any.
//
// All scenarios use the same client in the same run. The baseline runs in
// a process of its own, as leafd does (leafbench starts itself again with a
// hidden argument). Each of -rounds rounds runs every scenario after a
// warm-up, the order rotated from round to round; the figures shown are the
// medians of the rounds, and a ratio is the median of the rounds' ratios.
// Where /proc exists it also reports the CPU time per request of the server
// process and of leafbench: a busy machine takes CPU away, which moves
// throughput, but does not make a request cost more of it.
//
// Then the half-load phase sends segment and the baseline the same fixed
// rate, half of segment's measured maximum, open loop, and reports the
// latency at that rate. Request k is due at start + k/rate, the requests
// shared out over the workers, each sleeping until its next one is due. A
// request due while its worker still waited for an earlier answer counts
// from when it was due, so that a stalled server is charged the whole delay
// (no coordinated omission); one due while its worker was idle counts from
// when it was sent, so that a late timer wake-up in leafbench is not charged
// to the server. That lateness is reported apart, as client lag.
//
// Usage:
//
//	go run ./cmd/leafbench [flags]
//	go run ./cmd/leafbench -quick                 # about 10 s, for CI
//	go run ./cmd/leafbench -duration 5s -rounds 3 -markdown bench.md -json bench.json
//	go run ./cmd/leafbench -target http://127.0.0.1:8080 -tag bench
//
// By default leafbench starts leafd itself: -leafd PATH, else, when run
// inside the leafd repository, one it builds from it with `go build
// ./cmd/leafd` (so that the numbers are the tree's own), else leafd from
// PATH. That leafd gets a fresh SQLite file in a temporary
// directory, the tag -tag with a step of 1,000,000 (segment.max_step
// 100,000,000), snowflake mode with the fixed worker id 1, and a free
// loopback port. With -target it loads a leafd that is already running; the
// tag must exist there. leafbench sends load only to loopback addresses
// unless -allow-remote is given. It stops both servers when it ends, also
// on an error or an interrupt (SIGTERM, then SIGKILL after 5 s).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/leafd/leafd"
)

// Exit codes: a run with failed requests exits 1, as does one that could
// not be carried out; bad flags exit 2.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// scenario is one kind of request to measure.
type scenario struct {
	name     string
	baseline bool // sent to the baseline server, not to leafd
	query    string
	snow     bool // GET /snowflake rather than /segment/{tag}
	ids      int  // IDs in each answer
}

// scenarios are all the scenarios, in their default order.
var scenarios = []scenario{
	{name: "baseline", baseline: true, ids: 1},
	{name: "segment", ids: 1},
	{name: "segment_batch", query: "?count=1000", ids: 1000},
	{name: "snowflake", snow: true, ids: 1},
}

// path returns the scenario's path and query for tag.
func (s scenario) path(tag string) string {
	if s.snow {
		return "/snowflake" + s.query
	}
	return "/segment/" + tag + s.query
}

// options are the command line's settings.
type options struct {
	duration, warmup time.Duration
	rounds, conns    int
	scenarios        []scenario
	jsonPath, mdPath string
	leafdPath        string
	target           string
	tag              string
	allowRemote      bool
	halfLoad         bool
}

// Bounds of the flags, so that a typo cannot start a run of days.
const (
	maxRounds   = 100
	maxConns    = 10_000
	maxDuration = time.Hour
)

// parseFlags reads the command line. Its errors are the caller's (exit 2).
func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("leafbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{}
	var names string
	var quick bool
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "measured time per scenario and round")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured load before each measurement")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds; each runs every scenario, the order rotated, and the medians are reported")
	fs.IntVar(&o.conns, "concurrency", 64, "concurrent workers, each with its own keep-alive connection")
	fs.StringVar(&names, "scenarios", "baseline,segment,segment_batch,snowflake", "comma-separated scenarios to run")
	fs.StringVar(&o.jsonPath, "json", "", "also write the results as JSON to this file")
	fs.StringVar(&o.mdPath, "markdown", "", "also write the results as Markdown tables to this file")
	fs.BoolVar(&quick, "quick", false, "a short run for CI: 1s per scenario, 250ms warm-up, 1 round (flags given explicitly win)")
	fs.StringVar(&o.leafdPath, "leafd", "", "leafd binary to start (default: built from this repository when run inside it, else leafd from PATH)")
	fs.StringVar(&o.target, "target", "", "load a leafd already running at this URL, e.g. http://127.0.0.1:8080, instead of starting one")
	fs.StringVar(&o.tag, "tag", "bench", "segment tag to request (created by leafbench when it starts leafd)")
	fs.BoolVar(&o.allowRemote, "allow-remote", false, "allow a -target that is not a loopback address (only a machine you may load)")
	fs.BoolVar(&o.halfLoad, "half-load", true, "measure latency at half of segment's maximum throughput, open loop")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: leafbench [flags]\n\nleafbench measures leafd's ID routes against a bare gin handler on the same machine.\nSee the package documentation (go doc ./cmd/leafbench) and the README.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q: leafbench takes flags only", fs.Arg(0))
	}
	if quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["duration"] {
			o.duration = time.Second
		}
		if !set["warmup"] {
			o.warmup = 250 * time.Millisecond
		}
		if !set["rounds"] {
			o.rounds = 1
		}
	}
	switch {
	case o.duration < 100*time.Millisecond || o.duration > maxDuration:
		return nil, fmt.Errorf("-duration %v: use 100ms to %v", o.duration, maxDuration)
	case o.warmup < 0 || o.warmup > maxDuration:
		return nil, fmt.Errorf("-warmup %v: use 0 to %v", o.warmup, maxDuration)
	case o.rounds < 1 || o.rounds > maxRounds:
		return nil, fmt.Errorf("-rounds %d: use 1 to %d", o.rounds, maxRounds)
	case o.conns < 1 || o.conns > maxConns:
		return nil, fmt.Errorf("-concurrency %d: use 1 to %d", o.conns, maxConns)
	case o.target != "" && o.leafdPath != "":
		return nil, errors.New("-target and -leafd exclude each other: -target loads a running leafd, -leafd starts one")
	}
	if err := leafd.ValidateTag(o.tag); err != nil {
		return nil, fmt.Errorf("-tag: %s", leafd.ErrorMessage(err))
	}
	seen := map[string]bool{}
	for name := range strings.SplitSeq(names, ",") {
		name = strings.TrimSpace(name)
		i := indexScenario(name)
		if i < 0 {
			return nil, fmt.Errorf("-scenarios: unknown scenario %q: use a comma-separated list of %s", name, scenarioNames())
		}
		if !seen[name] {
			seen[name] = true
			o.scenarios = append(o.scenarios, scenarios[i])
		}
	}
	if o.target != "" {
		t, err := checkTarget(o.target, o.allowRemote)
		if err != nil {
			return nil, err
		}
		o.target = t
	}
	return o, nil
}

func indexScenario(name string) int {
	for i, s := range scenarios {
		if s.name == name {
			return i
		}
	}
	return -1
}

func scenarioNames() string {
	names := make([]string, len(scenarios))
	for i, s := range scenarios {
		names[i] = s.name
	}
	return strings.Join(names, ", ")
}

// run executes leafbench with args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == baselineCommand {
		return serveBaseline(args[1:], stdout, stderr)
	}
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "leafbench:", err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	rep, err := bench(ctx, o, stderr)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted (%w)", err)
		}
		fmt.Fprintln(stderr, "leafbench:", err)
		return exitFailure
	}
	if err := rep.WriteText(stdout); err != nil {
		fmt.Fprintln(stderr, "leafbench:", err)
		return exitFailure
	}
	for _, out := range []struct {
		path  string
		write func(io.Writer) error
	}{{o.jsonPath, rep.WriteJSON}, {o.mdPath, rep.WriteMarkdown}} {
		if out.path == "" {
			continue
		}
		if err := writeFile(out.path, out.write); err != nil {
			fmt.Fprintln(stderr, "leafbench:", err)
			return exitFailure
		}
	}
	if !rep.OK {
		return exitFailure
	}
	return exitOK
}

// writeFile writes a report to path.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
