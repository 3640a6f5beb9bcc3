// Command leafbench measures leafd over HTTP and gRPC against the ceiling of
// each protocol on the same machine.
//
// It drives servers with many concurrent clients for a fixed time per
// scenario and reports, for each, requests/s, IDs/s, p50/p99/p999 latency
// and errors, and each result as a ratio to baselines: bare servers on the
// same machine that answer the same requests without issuing an ID.
//
//	baseline                  GET /segment/{tag} answered by a bare gin
//	                          handler that writes the constant "1\n" (release
//	                          mode, no middleware) behind a net/http.Server
//	                          with ReadHeaderTimeout 10 s and IdleTimeout
//	                          2 min only: what HTTP itself costs here
//	baseline_timeouts         the same handler behind a net/http.Server with
//	                          leafd's default limits: ReadHeaderTimeout,
//	                          ReadTimeout, WriteTimeout and IdleTimeout (the
//	                          Default* constants of package http) and
//	                          MaxHeaderBytes 64 KiB
//	baseline_batch            GET /segment/{tag}?count=1000 answered, behind
//	                          the same limits, with a body of 1000 IDs of 10
//	                          digits formatted once at start-up: what
//	                          delivering those bytes over HTTP costs
//	baseline_batch_snowflake  GET /snowflake?count=1000, the same with 1000
//	                          IDs of 19 digits, as snowflakes are
//	segment                   GET /segment/{tag}
//	segment_batch             GET /segment/{tag}?count=1000
//	snowflake                 GET /snowflake
//	snowflake_batch           GET /snowflake?count=1000
//	grpc_baseline             leafd.v1.IDService/NextSegment(tag, count 1)
//	                          answered by a bare gRPC server whose
//	                          NextSegment returns an atomic counter: the
//	                          ceiling of gRPC, as baseline is HTTP's
//	grpc_segment              leafd.v1.IDService/NextSegment(tag, count 1)
//	grpc_segment_batch        leafd.v1.IDService/NextSegment(tag, count 1000)
//	client_range              the Go client (package client) with range
//	                          leases (WithRanges): Next called in a loop by
//	                          -range-callers goroutines, one call counted as
//	                          one request
//
// baseline, segment, segment_batch, snowflake and snowflake_batch run by
// default; -scenarios names others, or all; -compare runs baseline,
// baseline_timeouts, segment, snowflake, baseline_batch, segment_batch,
// baseline_batch_snowflake, snowflake_batch, grpc_baseline and
// grpc_segment: the comparison table of docs/performance.md. A run has 3
// rounds by default, 5 with -compare, baseline_timeouts or a batch
// baseline; -rounds (or -quick) says otherwise.
//
// The baselines each scenario is divided by, when they ran: segment,
// snowflake and client_range by baseline and by baseline_timeouts;
// segment_batch by baseline_batch and snowflake_batch by
// baseline_batch_snowflake (by baseline when that did not run); the gRPC
// scenarios by grpc_baseline; baseline_timeouts by baseline (what the
// timeouts cost) and by itself. The main table shows the ratios to the
// first of those that ran; the comparison table shows requests/s, IDs/s,
// server CPU per request, and the ratios of server CPU per request and of
// requests/s to every baseline, a column for each.
//
// Every answer is checked: a status other than 200 (gRPC: OK), a transport
// error, or an answer that is not the right number of IDs, each from 1 to
// 2^63-1, strictly ascending (HTTP: one decimal per line), counts as an
// error, and leafbench exits 1 if there was any. client_range checks that
// the IDs each goroutine gets are strictly ascending.
//
// All HTTP scenarios use the same client in the same run, and all gRPC
// scenarios the same -grpc-connections connections. Each baseline server
// runs in a process of its own, as leafd does (leafbench starts itself
// again with a hidden argument), only when one of its scenarios runs. Each
// of -rounds rounds runs every scenario after a warm-up, the order rotated
// from round to round. The figures shown are the medians of the rounds, and
// a ratio is the median of the rounds' ratios: each round's requests/s,
// IDs/s and server CPU per request divided by the same baseline's in that
// round. From 5 rounds on, the comparison table gives each CPU ratio with
// an interval that holds its median with 95% confidence (94% for 5
// rounds): a ratio whose interval holds 1 is within the machine's noise
// of the baseline. Where /proc exists it also reports the CPU time per request of the
// server process and of leafbench: a busy machine takes CPU away, which
// moves throughput a lot, and the CPU cost of a request much less (though
// some: a server that answers fewer requests per second handles fewer of
// them per system call and wake-up, gRPC's HTTP/2 framing most of all).
//
// Then the half-load phase sends segment and the baseline the same fixed
// rate, half of segment's measured maximum, open loop, and reports the
// latency and the server CPU per request at that rate; and so for
// grpc_segment and grpc_baseline when grpc_segment runs. At the same rate
// both servers see the same arrivals, so their CPU per request compares
// their work alone, whichever would have reached more throughput. A
// request's latency counts from when it was due if its worker was still
// busy then, so that a stalled server is charged the whole delay (no
// coordinated omission), else from when it was sent; how late an idle
// worker sent is reported apart, as client lag.
//
// Usage:
//
//	go run ./cmd/leafbench [flags]
//	go run ./cmd/leafbench -quick                 # about 10 s, for CI
//	go run ./cmd/leafbench -compare -markdown bench.md -json bench.json   # every baseline, 5 rounds, about 7 min
//	go run ./cmd/leafbench -duration 5s -rounds 3 -markdown bench.md -json bench.json
//	go run ./cmd/leafbench -target http://127.0.0.1:8080 -tag bench
//	go run ./cmd/leafbench -scenarios grpc_baseline,grpc_segment,grpc_segment_batch,client_range
//	go run ./cmd/leafbench -scenarios baseline,snowflake_batch -snowflake-workers 1 -snowflake-borrow 0
//
// By default leafbench starts leafd itself: -leafd PATH, else, when run
// inside the leafd repository, one it builds from it with `go build
// ./cmd/leafd` (so that the numbers are the tree's own), else leafd from
// PATH. That leafd gets a fresh SQLite file in a temporary directory, the
// tag -tag with a step of 1,000,000 (segment.max_step 100,000,000),
// snowflake mode with worker ids leased from that database
// (snowflake.worker_id auto), -snowflake-workers of them
// (snowflake.workers, default 3) and -snowflake-borrow of borrowing
// (snowflake.max_borrow, default 5ms; 0 is off), and a free loopback port,
// and a second one for gRPC (grpc.addr) when a gRPC scenario runs. One
// worker id issues at most 4,096 IDs a millisecond (4,096,000 a second)
// with the default layout: -snowflake-workers 1 shows snowflake_batch
// against that limit, the default 3 what a server leasing several worker
// ids reaches. With -target (and -target-grpc for the gRPC scenarios) it
// loads a leafd that is already running; the tag must exist there, and its
// snowflake settings are its own (-snowflake-workers and -snowflake-borrow
// are refused with -target). leafbench sends load only to loopback
// addresses unless -allow-remote is given. It stops the servers when it
// ends, also on an error or an interrupt (SIGTERM, then SIGKILL after 5 s).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
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

// protocol is how a scenario asks for IDs.
type protocol int

const (
	protoHTTP   protocol = iota // GET requests, one per keep-alive connection at a time
	protoGRPC                   // unary RPCs of leafd.v1.IDService
	protoClient                 // calls of the Go client's Next, with range leases
)

// scenario is one kind of request to measure.
type scenario struct {
	name     string
	proto    protocol
	baseline bool // sent to a bare server, not to leafd
	// server is the server it is sent to.
	server serverKind
	// label names a baseline in the comparison table's columns: "vs
	// label". Baselines that answer alike share one.
	label string
	// bases are the baselines its ratios are to, each a column of the
	// comparison table when it ran; the first of them that ran is the one
	// of the main table (baseline, ratio_requests…). fallback is the main
	// table's when none of bases ran.
	bases    []string
	fallback string
	// pattern is the path and query of its requests, {tag} standing for
	// the tag: the HTTP request's, or the gRPC method's (its HTTP/2
	// :path); for client_range the route of its leases.
	pattern string
	ids     int // IDs in each answer
}

// The baselines' names.
const (
	httpBaseline      = "baseline"
	timeoutsBaseline  = "baseline_timeouts"
	batchBaseline     = "baseline_batch"
	snowBatchBaseline = "baseline_batch_snowflake"
	grpcBaseline      = "grpc_baseline"
)

// The baselines' labels in the comparison table.
const (
	bareLabel     = "bare gin"
	timeoutsLabel = "gin with timeouts"
	batchLabel    = "1000 pre-formatted IDs"
	grpcLabel     = "bare gRPC"
)

// singleBases are the baselines of a single-ID request over HTTP.
var singleBases = []string{httpBaseline, timeoutsBaseline}

// scenarios are all the scenarios, in their order under -scenarios all.
var scenarios = []scenario{
	{name: httpBaseline, baseline: true, server: bareServer, label: bareLabel, bases: []string{httpBaseline},
		pattern: "/segment/{tag}", ids: 1},
	{name: timeoutsBaseline, baseline: true, server: timeoutsServer, label: timeoutsLabel,
		bases: []string{timeoutsBaseline, httpBaseline}, pattern: "/segment/{tag}", ids: 1},
	{name: batchBaseline, baseline: true, server: batchServer, label: batchLabel,
		bases: []string{batchBaseline}, pattern: "/segment/{tag}?count=1000", ids: batchIDs},
	{name: snowBatchBaseline, baseline: true, server: batchServer, label: batchLabel,
		bases: []string{snowBatchBaseline}, pattern: "/snowflake?count=1000", ids: batchIDs},
	{name: "segment", bases: singleBases, pattern: "/segment/{tag}", ids: 1},
	{name: "segment_batch", bases: []string{batchBaseline}, fallback: httpBaseline, pattern: "/segment/{tag}?count=1000", ids: batchIDs},
	{name: "snowflake", bases: singleBases, pattern: "/snowflake", ids: 1},
	{name: "snowflake_batch", bases: []string{snowBatchBaseline}, fallback: httpBaseline, pattern: "/snowflake?count=1000", ids: batchIDs},
	{name: grpcBaseline, proto: protoGRPC, baseline: true, server: grpcServer, label: grpcLabel, bases: []string{grpcBaseline},
		pattern: "/" + grpcMethodNextSegment, ids: 1},
	{name: "grpc_segment", proto: protoGRPC, bases: []string{grpcBaseline}, pattern: "/" + grpcMethodNextSegment, ids: 1},
	{name: "grpc_segment_batch", proto: protoGRPC, bases: []string{grpcBaseline}, pattern: "/" + grpcMethodNextSegment, ids: batchIDs},
	{name: "client_range", proto: protoClient, bases: singleBases, pattern: "/segment/{tag}/range", ids: 1},
}

// defaultScenarios are the scenarios run without -scenarios.
const defaultScenarios = "baseline,segment,segment_batch,snowflake,snowflake_batch"

// compareScenarios are the scenarios of -compare: every baseline that
// leafd's ID routes over HTTP and gRPC are divided by, and those routes.
const compareScenarios = "baseline,baseline_timeouts,segment,snowflake,baseline_batch,segment_batch," +
	"baseline_batch_snowflake,snowflake_batch,grpc_baseline,grpc_segment"

// Rounds: 3 by default, compareRounds with -compare or any of the
// baselines that only a comparison needs, 1 with -quick.
const (
	defaultRounds = 3
	compareRounds = 5
)

// path returns the scenario's path and query for tag.
func (s scenario) path(tag string) string { return strings.Replace(s.pattern, "{tag}", tag, 1) }

// route describes the scenario's request for the reports.
func (s scenario) route(o *options) string {
	switch s.proto {
	case protoGRPC:
		return fmt.Sprintf("gRPC NextSegment(%s, count %d)", o.tag, s.ids)
	case protoClient:
		return fmt.Sprintf("client.Next(%s), WithRanges(%d, %g)", o.tag, o.rangeSize, o.rangeRefill)
	}
	return "GET " + s.path(o.tag)
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
	// targetGRPC is the gRPC address (host:port) of the -target leafd.
	targetGRPC string
	// grpcConns is the number of gRPC connections the gRPC scenarios'
	// workers share.
	grpcConns int
	// rangeSize and rangeRefill are client_range's WithRanges arguments;
	// rangeCallers its goroutines.
	rangeSize    int64
	rangeRefill  float64
	rangeCallers int
	// snowflake is the snowflake settings of the leafd leafbench starts.
	snowflake snowflakeSettings
}

// needs reports whether any scenario of the run satisfies f.
func (o *options) needs(f func(scenario) bool) bool {
	return slices.ContainsFunc(o.scenarios, f)
}

// Bounds of the flags, so that a typo cannot start a run of days.
const (
	maxRounds   = 100
	maxConns    = 10_000
	maxDuration = time.Hour
	// maxRangeSize is the largest -range-size: leafd's largest
	// segment.max_range (its default is 1,000,000).
	maxRangeSize = 1_000_000_000
	// maxSnowflakeWorkers and maxSnowflakeBorrow are leafd's largest
	// snowflake.workers and snowflake.max_borrow.
	maxSnowflakeWorkers = 16
	maxSnowflakeBorrow  = time.Second
)

// parseFlags reads the command line. Its errors are the caller's (exit 2).
func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("leafbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{}
	var names string
	var quick, compare bool
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "measured time per scenario and round")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "unmeasured load before each measurement")
	fs.IntVar(&o.rounds, "rounds", defaultRounds, fmt.Sprintf("rounds; each runs every scenario, the order rotated, and the medians are reported "+
		"(%d with -compare or with baseline_timeouts, baseline_batch or baseline_batch_snowflake)", compareRounds))
	fs.IntVar(&o.conns, "concurrency", 64, "concurrent workers, each with its own keep-alive connection")
	fs.StringVar(&names, "scenarios", defaultScenarios, "comma-separated scenarios to run ("+scenarioNames()+"), or all")
	fs.StringVar(&o.jsonPath, "json", "", "also write the results as JSON to this file")
	fs.StringVar(&o.mdPath, "markdown", "", "also write the results as Markdown tables to this file")
	fs.BoolVar(&quick, "quick", false, "a short run for CI: 1s per scenario, 250ms warm-up, 1 round (flags given explicitly win)")
	fs.BoolVar(&compare, "compare", false, "run every baseline beside leafd's routes ("+compareScenarios+"), "+
		fmt.Sprint(compareRounds)+" rounds unless -rounds or -quick says otherwise: the comparison table of docs/performance.md")
	fs.StringVar(&o.leafdPath, "leafd", "", "leafd binary to start (default: built from this repository when run inside it, else leafd from PATH)")
	fs.StringVar(&o.target, "target", "", "load a leafd already running at this URL, e.g. http://127.0.0.1:8080, instead of starting one")
	fs.StringVar(&o.tag, "tag", "bench", "segment tag to request (created by leafbench when it starts leafd)")
	fs.BoolVar(&o.allowRemote, "allow-remote", false, "allow a -target that is not a loopback address (only a machine you may load)")
	fs.BoolVar(&o.halfLoad, "half-load", true, "measure latency and server CPU at half of segment's (and grpc_segment's) maximum throughput, open loop")
	fs.StringVar(&o.targetGRPC, "target-grpc", "", "with -target: the gRPC address (host:port, its grpc.addr) of that leafd, for the gRPC scenarios")
	fs.IntVar(&o.grpcConns, "grpc-connections", 1, "gRPC connections (HTTP/2) that the gRPC scenarios' -concurrency workers share, round robin")
	fs.Int64Var(&o.rangeSize, "range-size", 100_000, "client_range: IDs per range lease (at most leafd's segment.max_range, default 1,000,000)")
	fs.Float64Var(&o.rangeRefill, "range-refill", 0.5, "client_range: fetch the next lease when this fraction of the current one is left, in [0, 1)")
	fs.IntVar(&o.rangeCallers, "range-callers", 8, "client_range: goroutines calling Next")
	fs.IntVar(&o.snowflake.workers, "snowflake-workers", 3, "snowflake.workers of the leafd leafbench starts (worker ids leased with worker_id auto), 1 to 16")
	fs.DurationVar(&o.snowflake.borrow, "snowflake-borrow", 5*time.Millisecond, "snowflake.max_borrow of the leafd leafbench starts, 0 (off) to 1s")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: leafbench [flags]\n\nleafbench measures leafd's ID routes against bare servers on the same machine: bare gin,\n"+
			"gin with leafd's timeouts, gin answering 1000 pre-formatted IDs, bare gRPC.\n"+
			"  leafbench -compare    the comparison table (every baseline, 5 rounds)\n"+
			"  leafbench -quick      a short run for CI\n"+
			"See the package documentation (go doc ./cmd/leafbench) and docs/performance.md.\n\nflags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q: leafbench takes flags only", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if compare {
		if set["scenarios"] {
			return nil, errors.New("-compare runs its own scenarios (" + compareScenarios + "): leave -scenarios out")
		}
		names = compareScenarios
	}
	if quick {
		for name, value := range map[string]string{"duration": "1s", "warmup": "250ms", "rounds": "1"} {
			if !set[name] {
				_ = fs.Set(name, value) // valid values: no error
			}
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
	case o.target != "" && (set["snowflake-workers"] || set["snowflake-borrow"]):
		return nil, errors.New("-snowflake-workers and -snowflake-borrow set the leafd that leafbench starts: with -target, that leafd's own settings apply")
	case o.target != "" && o.leafdPath != "":
		return nil, errors.New("-target and -leafd exclude each other: -target loads a running leafd, -leafd starts one")
	case o.targetGRPC != "" && o.target == "":
		return nil, errors.New("-target-grpc goes with -target: it names the gRPC address of the leafd at -target")
	case o.grpcConns < 1 || o.grpcConns > maxConns:
		return nil, fmt.Errorf("-grpc-connections %d: use 1 to %d", o.grpcConns, maxConns)
	case o.rangeSize < 1 || o.rangeSize > maxRangeSize:
		return nil, fmt.Errorf("-range-size %d: use 1 to %d (and at most leafd's segment.max_range)", o.rangeSize, maxRangeSize)
	case !(o.rangeRefill >= 0 && o.rangeRefill < 1):
		return nil, fmt.Errorf("-range-refill %v: use a fraction in [0, 1)", o.rangeRefill)
	case o.rangeCallers < 1 || o.rangeCallers > maxConns:
		return nil, fmt.Errorf("-range-callers %d: use 1 to %d", o.rangeCallers, maxConns)
	case o.snowflake.workers < 1 || o.snowflake.workers > maxSnowflakeWorkers:
		return nil, fmt.Errorf("-snowflake-workers %d: use 1 to %d", o.snowflake.workers, maxSnowflakeWorkers)
	case o.snowflake.borrow < 0 || o.snowflake.borrow > maxSnowflakeBorrow:
		return nil, fmt.Errorf("-snowflake-borrow %v: use 0 (off) to %v", o.snowflake.borrow, maxSnowflakeBorrow)
	}
	if err := leafd.ValidateTag(o.tag); err != nil {
		return nil, fmt.Errorf("-tag: %s", leafd.ErrorMessage(err))
	}
	if strings.TrimSpace(names) == "all" {
		names = scenarioNames()
	}
	for name := range strings.SplitSeq(names, ",") {
		name = strings.TrimSpace(name)
		i := indexIn(scenarios, name)
		if i < 0 {
			return nil, fmt.Errorf("-scenarios: unknown scenario %q: use all, or a comma-separated list of %s", name, scenarioNames())
		}
		if indexIn(o.scenarios, name) < 0 {
			o.scenarios = append(o.scenarios, scenarios[i])
		}
	}
	if !set["rounds"] && !quick && o.needs(func(s scenario) bool { return s.baseline && s.server != bareServer && s.proto == protoHTTP }) {
		o.rounds = compareRounds
	}
	if o.target != "" {
		t, err := checkTarget(o.target, o.allowRemote)
		if err != nil {
			return nil, err
		}
		o.target = t
		if o.needs(func(s scenario) bool { return s.proto == protoGRPC && !s.baseline }) {
			if o.targetGRPC == "" {
				return nil, errors.New("-target with a gRPC scenario needs -target-grpc host:port, the gRPC address of that leafd")
			}
			if o.targetGRPC, err = checkGRPCTarget(o.targetGRPC, o.allowRemote); err != nil {
				return nil, err
			}
		}
	}
	return o, nil
}

// scenarioNames returns every scenario's name, comma-separated.
func scenarioNames() string {
	names := make([]string, len(scenarios))
	for i, s := range scenarios {
		names[i] = s.name
	}
	return strings.Join(names, ",")
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
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("interrupted (%w)", err)
	}
	if err == nil {
		err = rep.WriteText(stdout)
	}
	for _, out := range []struct {
		path  string
		write func(io.Writer) error
	}{{o.jsonPath, rep.WriteJSON}, {o.mdPath, rep.WriteMarkdown}} {
		if err == nil && out.path != "" {
			err = writeFile(out.path, out.write)
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "leafbench:", err)
		return exitFailure
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
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
