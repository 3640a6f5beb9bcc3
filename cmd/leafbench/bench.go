package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/leafd/leafd/client"
	"github.com/leafd/leafd/internal/testkit/testenv"
)

// servers are the running servers of a run, and the clients that load
// them.
type servers struct {
	// urls (http://host:port) and pids are the servers', by kind; a pid is
	// 0 (absent) when leafbench did not start the server.
	urls map[serverKind]string
	pids map[serverKind]int
	// procs are the servers leafbench started, to check that they still
	// run and to stop them.
	procs []*process

	http *http.Client
	// grpc are the gRPC scenarios' connections, by kind of server.
	grpc map[serverKind][]*grpc.ClientConn
	// ranges is client_range's client, and leases counts its requests.
	ranges *client.Client
	leases *countingTransport
}

// target returns what scenario sc loads.
func (s *servers) target(sc scenario, tag string) target {
	switch sc.proto {
	case protoGRPC:
		return grpcTarget{conns: s.grpc[sc.server], tag: tag, count: sc.ids}
	case protoClient:
		return rangeTarget{c: s.ranges, tag: tag, leases: &s.leases.n}
	}
	return httpTarget{client: s.http, url: s.urls[sc.server] + sc.path(tag), ids: sc.ids}
}

// close closes the clients and stops the servers leafbench started.
func (s *servers) close() {
	if s.ranges != nil {
		s.ranges.Close()
	}
	for _, conns := range s.grpc {
		for _, c := range conns {
			c.Close()
		}
	}
	for _, p := range s.procs {
		p.Stop()
	}
}

// alive returns an error naming a started server that has exited.
func (s *servers) alive() error {
	for _, p := range s.procs {
		if p.Exited() {
			return fmt.Errorf("%s exited during the run (%v); its last output:\n%s", p.Name(), p.State(), p.lastOutput())
		}
	}
	return nil
}

// bench carries out the run: starts the servers, measures, stops them.
func bench(ctx context.Context, o *options, stderr io.Writer) (*Report, error) {
	rep := &Report{
		Machine: describeMachine(),
		Settings: Settings{Duration: o.duration.String(), Warmup: o.warmup.String(), Rounds: o.rounds,
			Concurrency: o.conns, Tag: o.tag},
	}
	client := newClient(o.conns, o.allowRemote)
	defer client.CloseIdleConnections()

	dir, err := os.MkdirTemp("", "leafbench-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)

	srv := servers{http: client, urls: map[serverKind]string{}, pids: map[serverKind]int{}, grpc: map[serverKind][]*grpc.ClientConn{}}
	defer srv.close() // runs before RemoveAll: leafd's database is in dir
	for _, kind := range append(baselineKinds, grpcServer) {
		if !o.needs(func(s scenario) bool { return s.baseline && s.server == kind }) {
			continue
		}
		p, err := startBaseline(ctx, kind, client)
		if err != nil {
			return nil, err
		}
		srv.procs = append(srv.procs, p)
		srv.urls[kind], srv.pids[kind] = p.url, p.Pid()
		if kind == grpcServer {
			if srv.grpc[kind], err = dialGRPC(ctx, strings.TrimPrefix(p.url, "http://"), o.grpcConns, o.allowRemote); err != nil {
				return nil, err
			}
		}
	}
	if o.needs(func(s scenario) bool { return !s.baseline }) {
		grpcAddr, err := startTarget(ctx, o, dir, client, &srv, &rep.Settings, stderr)
		if err != nil {
			return nil, err
		}
		if grpcAddr != "" {
			if srv.grpc[leafdServer], err = dialGRPC(ctx, grpcAddr, o.grpcConns, o.allowRemote); err != nil {
				return nil, err
			}
		}
	}
	if o.needs(func(s scenario) bool { return s.proto == protoClient }) {
		if srv.ranges, srv.leases, err = newRangeClient(srv.urls[leafdServer], client, o.rangeSize, o.rangeRefill); err != nil {
			return nil, fmt.Errorf("client_range: %w", err)
		}
	}
	for _, s := range o.scenarios {
		if err := probe(ctx, srv.target(s, o.tag), s, o.tag); err != nil {
			return nil, err
		}
	}

	results, err := srv.measure(ctx, o, o.scenarios, 0, func(r, pos int, s scenario, st Stats) {
		fmt.Fprintf(stderr, "leafbench: round %d/%d #%d %-24s %12s req/s %14s IDs/s  p99 %-9s server CPU/req %-9s errors %d\n",
			r+1, o.rounds, pos+1, s.name, count(st.RequestsPerS), count(st.IDsPerS), latency(st.P99us), cpu(st.ServerCPUus), st.Errors)
	})
	if err != nil {
		return nil, err
	}
	rep.Scenarios = summarize(o, results, &rep.OK)

	if o.halfLoad {
		for i, dst := range []**HalfLoad{&rep.HalfLoad, &rep.HalfLoadGRPC} {
			h, err := halfLoad(ctx, o, &srv, rep.Scenarios, halfLoadGroups[i], stderr)
			if err != nil {
				return nil, err
			}
			*dst = h
			rep.OK = rep.OK && (h == nil || !slices.ContainsFunc(h.Results, func(x HalfLoadResult) bool { return x.Errors > 0 }))
		}
	}
	rep.Machine.LoadEnd = loadAverage()
	return rep, nil
}

// startTarget starts leafd, or checks the -target, records it in srv and
// settings, and returns its gRPC address when a gRPC scenario runs.
func startTarget(ctx context.Context, o *options, dir string, client *http.Client, srv *servers, settings *Settings, stderr io.Writer) (string, error) {
	grpc := o.needs(func(s scenario) bool { return s.proto == protoGRPC && !s.baseline })
	if o.target != "" {
		if err := testenv.WaitReady(ctx, client, o.target, readyTimeout, nil); err != nil {
			return "", fmt.Errorf("-target: %w; is leafd running there?", err)
		}
		srv.urls[leafdServer] = o.target
		settings.Target = o.target + " (a running leafd)"
		if !grpc {
			return "", nil
		}
		settings.Target += ", gRPC at " + o.targetGRPC
		return o.targetGRPC, nil
	}
	bin, built, err := findLeafd(ctx, o.leafdPath, dir, stderr)
	if err != nil {
		return "", err
	}
	settings.Leafd = leafdVersion(ctx, bin)
	p, err := startLeafd(ctx, bin, dir, o.tag, grpc, o.snowflake, client)
	if err != nil {
		return "", err
	}
	srv.procs = append(srv.procs, p)
	srv.urls[leafdServer], srv.pids[leafdServer] = p.url, p.Pid()
	how := bin
	if built {
		how = "leafd built from this repository"
	}
	settings.Target = how + ", started by leafbench on a fresh SQLite file, " + o.snowflake.String()
	return p.grpcAddr, nil
}

// probe makes one call of scenario sc and fails with the reason when its
// answer is not good, before any load is sent.
func probe(ctx context.Context, t target, sc scenario, tag string) error {
	ctx, cancel := context.WithTimeout(ctx, requestGrace)
	defer cancel()
	if rt, ok := t.(rangeTarget); ok {
		return probeRange(ctx, rt)
	}
	do, err := t.newCall(ctx, 0)
	if err != nil {
		return err
	}
	what := "GET " + sc.path(tag)
	if sc.proto == protoGRPC {
		what = fmt.Sprintf("%s %s (tag %q, count %d)", sc.name, grpcMethodNextSegment, tag, sc.ids)
	}
	ok, _, msg := do()
	switch {
	case ok:
		return nil
	case strings.Contains(msg, "unknown_tag"):
		return fmt.Errorf("%s: %s\ncreate the tag on that server, e.g. leafd tag add NAME --step 1000000, or name another with -tag", what, msg)
	default:
		return fmt.Errorf("%s: %s", what, msg)
	}
}

// measure runs every scenario of runs for o.duration in each of o.rounds
// rounds, after a warm-up, the order rotated from round to round: closed
// loop, or with a rate, open loop at that rate. It shows each measurement
// and returns them all, [scenario][round].
func (srv *servers) measure(ctx context.Context, o *options, runs []scenario, rate float64,
	show func(round, pos int, s scenario, st Stats)) ([][]*phase, error) {
	phases := make([][]*phase, len(runs))
	for r := range o.rounds {
		for pos := range runs {
			i := (pos + r) % len(runs) // round r starts with scenario r mod n
			s, t, n := runs[i], srv.target(runs[i], o.tag), o.conns
			if s.proto == protoClient {
				n = o.rangeCallers
			}
			load := func(d time.Duration) (*phase, error) {
				if rate > 0 {
					return openLoop(ctx, t, n, d, rate)
				}
				return closedLoop(ctx, t, n, d)
			}
			if o.warmup > 0 {
				if _, err := load(o.warmup); err != nil {
					return nil, err
				}
			}
			var leases0 uint64
			if s.proto == protoClient {
				leases0 = srv.leases.n.Load()
			}
			meter := startCPU(srv.pids[s.server])
			p, err := load(o.duration)
			if err != nil {
				return nil, err
			}
			meter.stop(p)
			if s.proto == protoClient {
				p.Leases = srv.leases.n.Load() - leases0
			}
			if err := srv.alive(); err != nil {
				return nil, err
			}
			phases[i] = append(phases[i], p)
			show(r, pos, s, stats(p, s.ids))
		}
	}
	return phases, nil
}

// summarize turns the phases of every scenario and round into results,
// with ratios to the baselines of the same round. ok is set to whether no
// request failed.
func summarize(o *options, results [][]*phase, ok *bool) []ScenarioResult {
	*ok = true
	n := len(o.scenarios)
	out := make([]ScenarioResult, n)
	for i, s := range o.scenarios {
		var rounds []RoundStats
		for r, p := range results[i] {
			// Round r ran scenario i at the place pos where i = (pos + r) mod n.
			rounds = append(rounds, RoundStats{Round: r + 1, Position: (i-r%n+n)%n + 1, Stats: stats(p, s.ids)})
		}
		res := ScenarioResult{Name: s.name, Path: s.path(o.tag), Route: s.route(o), IDsPerRequest: s.ids, Stats: medians(rounds), Rounds: rounds}
		for _, name := range s.bases {
			if b := indexIn(o.scenarios, name); b >= 0 {
				res.Ratios = append(res.Ratios, pairedRatio(o.scenarios[b], results[b], s, results[i]))
			}
		}
		main := res.Ratios
		if b := indexIn(o.scenarios, s.fallback); len(main) == 0 && b >= 0 {
			main = []BaselineRatio{pairedRatio(o.scenarios[b], results[b], s, results[i])}
		}
		if len(main) > 0 {
			res.Baseline, res.RatioRequests, res.RatioIDs, res.RatioServerCPU = main[0].Baseline, main[0].Requests, main[0].IDs, main[0].ServerCPU
		}
		res.ErrorsByKind, res.FirstErrors = errorDetail(results[i])
		*ok = *ok && res.Errors == 0
		out[i] = res
	}
	return out
}

// pairedRatio divides scenario s's figures by baseline base's, round by
// round (rounds[r] by baseRounds[r], both measured in round r), and
// returns the median of each kind of ratio. A ratio is absent when the
// baseline had no throughput, or either had no CPU figure, in every round.
func pairedRatio(base scenario, baseRounds []*phase, s scenario, rounds []*phase) BaselineRatio {
	var reqRatios, idRatios, cpuRatios []float64
	for r, p := range rounds {
		if r >= len(baseRounds) {
			break
		}
		st, b := stats(p, s.ids), stats(baseRounds[r], base.ids)
		if b.RequestsPerS > 0 {
			reqRatios = append(reqRatios, st.RequestsPerS/b.RequestsPerS)
			idRatios = append(idRatios, st.IDsPerS/b.IDsPerS)
		}
		if b.ServerCPUus > 0 && st.ServerCPUus > 0 {
			cpuRatios = append(cpuRatios, st.ServerCPUus/b.ServerCPUus)
		}
	}
	out := BaselineRatio{Baseline: base.name, Label: base.label}
	if len(reqRatios) > 0 {
		rr, ir := median(reqRatios), median(idRatios)
		out.Requests, out.IDs = &rr, &ir
	}
	if len(cpuRatios) > 0 {
		cr := median(cpuRatios)
		out.ServerCPU = &cr
		if lo, hi, ok := medianInterval(cpuRatios); ok && s.name != base.name { // a baseline's to itself is 1 each round
			out.ServerCPULow, out.ServerCPUHigh = &lo, &hi
		}
	}
	return out
}

// halfLoadFraction is the share of segment's (grpc_segment's) maximum
// throughput at which latency is measured.
const halfLoadFraction = 0.5

// halfLoadGroup is a scenario of leafd and the baseline it is compared with
// at the same fixed rate.
type halfLoadGroup struct {
	of   string // the leafd scenario whose maximum sets the rate
	base string
}

// halfLoadGroups are the half-load phases, in order: HTTP (Report.HalfLoad),
// then gRPC (Report.HalfLoadGRPC).
var halfLoadGroups = []halfLoadGroup{{of: "segment", base: httpBaseline}, {of: "grpc_segment", base: grpcBaseline}}

// halfLoad runs one open-loop phase: g.of, and its baseline when it was
// measured, each sent halfLoadFraction of g.of's median throughput, for
// every round, the order alternating, with the server CPU of each. It
// returns nil without g.of.
func halfLoad(ctx context.Context, o *options, srv *servers, results []ScenarioResult, g halfLoadGroup, stderr io.Writer) (*HalfLoad, error) {
	seg := indexIn(o.scenarios, g.of)
	if seg < 0 || results[seg].RequestsPerS <= 0 {
		return nil, nil
	}
	rate := halfLoadFraction * results[seg].RequestsPerS
	var runs []scenario
	for _, name := range []string{g.base, g.of} {
		if i := indexIn(o.scenarios, name); i >= 0 {
			runs = append(runs, o.scenarios[i])
		}
	}
	phases, err := srv.measure(ctx, o, runs, rate, func(r, pos int, s scenario, st Stats) {
		fmt.Fprintf(stderr, "leafbench: half load, round %d/%d #%d %-13s %12s req/s offered %12s achieved  p99 %-9s server CPU/req %-9s errors %d\n",
			r+1, o.rounds, pos+1, s.name, count(rate), count(st.RequestsPerS), latency(st.P99us), cpu(st.ServerCPUus), st.Errors)
	})
	if err != nil {
		return nil, err
	}
	return &HalfLoad{Of: g.of, Fraction: halfLoadFraction, RatePerS: rate, Method: halfLoadMethod,
		Results: summarizeHalfLoad(o, runs, phases, rate)}, nil
}

// summarizeHalfLoad turns the phases of a half-load group into results.
func summarizeHalfLoad(o *options, runs []scenario, phases [][]*phase, rate float64) []HalfLoadResult {
	var out []HalfLoadResult
	for i, s := range runs {
		var rounds []RoundStats
		for _, p := range phases[i] {
			rounds = append(rounds, RoundStats{Stats: stats(p, s.ids)})
		}
		st := medians(rounds)
		x := HalfLoadResult{Name: s.name, Path: s.path(o.tag), OfferedPerS: rate, AchievedPerS: st.RequestsPerS,
			P50us: st.P50us, P99us: st.P99us, P999us: st.P999us, ServerCPUus: st.ServerCPUus, Requests: st.Requests, Errors: st.Errors,
			ServiceP99us: medianOf(phases[i], false, func(p *phase) float64 { return micros(p.Service.Quantile(0.99)) }),
			LagP99us:     medianOf(phases[i], false, func(p *phase) float64 { return micros(p.Lag.Quantile(0.99)) })}
		if len(runs) == 2 { // runs[0] is the baseline
			x.RatioServerCPU = pairedRatio(runs[0], phases[0], s, phases[i]).ServerCPU
		}
		x.ErrorsByKind, x.FirstErrors = errorDetail(phases[i])
		out = append(out, x)
	}
	return out
}

// indexIn returns the index of the scenario called name in ss, or -1.
func indexIn(ss []scenario, name string) int {
	return slices.IndexFunc(ss, func(s scenario) bool { return s.name == name })
}
