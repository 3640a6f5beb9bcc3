package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/leafd/leafd/internal/testenv"
)

// servers are the running servers of a run.
type servers struct {
	baseline string // URL, "" when not needed
	leafd    string
	// procs are the servers leafbench started, to check that they still
	// run and to stop them.
	procs []*process
	// baselinePID and leafdPID are the servers' process ids, 0 when
	// leafbench did not start the server.
	baselinePID, leafdPID int
}

// pid returns the process id of the server of scenario sc, 0 if unknown.
func (s *servers) pid(sc scenario) int {
	if sc.baseline {
		return s.baselinePID
	}
	return s.leafdPID
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

	var srv servers
	defer func() { // runs before RemoveAll: leafd's database is in dir
		for _, p := range srv.procs {
			p.Stop()
		}
	}()
	needBaseline, needLeafd := false, false
	for _, s := range o.scenarios {
		needBaseline = needBaseline || s.baseline
		needLeafd = needLeafd || !s.baseline
	}
	if needBaseline {
		p, err := startBaseline(ctx, client)
		if err != nil {
			return nil, err
		}
		srv.procs = append(srv.procs, p)
		srv.baseline, srv.baselinePID = p.url, p.Pid()
	}
	if needLeafd {
		if err := startTarget(ctx, o, dir, client, &srv, &rep.Settings, stderr); err != nil {
			return nil, err
		}
	}
	for _, s := range o.scenarios {
		if err := probe(ctx, client, srv.url(s, o.tag), s.ids); err != nil {
			return nil, err
		}
	}

	results := make([][]*phase, len(o.scenarios)) // [scenario][round]
	for r := range o.rounds {
		for pos, i := range rotated(len(o.scenarios), r) {
			s := o.scenarios[i]
			t := target{url: srv.url(s, o.tag), ids: s.ids}
			if o.warmup > 0 {
				if _, err := closedLoop(ctx, client, t, o.conns, o.warmup); err != nil {
					return nil, err
				}
			}
			meter := startCPU(srv.pid(s))
			p, err := closedLoop(ctx, client, t, o.conns, o.duration)
			if err != nil {
				return nil, err
			}
			meter.stop(p)
			if err := srv.alive(); err != nil {
				return nil, err
			}
			results[i] = append(results[i], p)
			st := stats(p, s.ids)
			fmt.Fprintf(stderr, "leafbench: round %d/%d #%d %-13s %12s req/s %14s IDs/s  p99 %-9s errors %d\n",
				r+1, o.rounds, pos+1, s.name, count(st.RequestsPerS), count(st.IDsPerS), latency(st.P99us), st.Errors)
		}
	}
	rep.Scenarios = summarize(o, results, &rep.OK)

	if o.halfLoad {
		h, ok, err := halfLoad(ctx, o, client, &srv, rep.Scenarios, stderr)
		if err != nil {
			return nil, err
		}
		rep.HalfLoad = h
		rep.OK = rep.OK && ok
	}
	rep.Machine.LoadEnd = loadAverage()
	return rep, nil
}

// startTarget starts leafd, or checks the -target, and records it in srv
// and settings.
func startTarget(ctx context.Context, o *options, dir string, client *http.Client, srv *servers, settings *Settings, stderr io.Writer) error {
	if o.target != "" {
		if err := testenv.WaitReady(ctx, client, o.target, readyTimeout, nil); err != nil {
			return fmt.Errorf("-target: %w; is leafd running there?", err)
		}
		srv.leafd = o.target
		settings.Target = o.target + " (a running leafd)"
		return nil
	}
	bin, built, err := findLeafd(ctx, o.leafdPath, dir, stderr)
	if err != nil {
		return err
	}
	settings.Leafd = leafdVersion(ctx, bin)
	p, err := startLeafd(ctx, bin, dir, o.tag, client)
	if err != nil {
		return err
	}
	srv.procs = append(srv.procs, p)
	srv.leafd, srv.leafdPID = p.url, p.Pid()
	how := bin
	if built {
		how = "leafd built from this repository"
	}
	settings.Target = how + ", started by leafbench on a fresh SQLite file"
	return nil
}

// url returns the URL of scenario s.
func (s *servers) url(sc scenario, tag string) string {
	if sc.baseline {
		return s.baseline + sc.path(tag)
	}
	return s.leafd + sc.path(tag)
}

// probe sends one request and fails with the reason when its answer is not
// good, before any load is sent.
func probe(ctx context.Context, client *http.Client, url string, ids int) error {
	ctx, cancel := context.WithTimeout(ctx, requestGrace)
	defer cancel()
	w, err := newWorker(ctx, client, url, ids)
	if err != nil {
		return err
	}
	ok, _, msg := w.do()
	switch {
	case ok:
		return nil
	case strings.Contains(msg, `"unknown_tag"`):
		return fmt.Errorf("GET %s: %s\ncreate the tag on that server, e.g. leafd tag add NAME --step 1000000, or name another with -tag", url, msg)
	default:
		return fmt.Errorf("GET %s: %s", url, msg)
	}
}

// rotated returns the indexes 0..n-1 rotated left by r: round r starts with
// scenario r mod n.
func rotated(n, r int) []int {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = (i + r) % n
	}
	return idx
}

// summarize turns the phases of every scenario and round into results,
// with ratios to the baseline of the same round. ok is set to whether no
// request failed.
func summarize(o *options, results [][]*phase, ok *bool) []ScenarioResult {
	base := -1
	for i, s := range o.scenarios {
		if s.baseline {
			base = i
		}
	}
	*ok = true
	out := make([]ScenarioResult, len(o.scenarios))
	for i, s := range o.scenarios {
		res := ScenarioResult{Name: s.name, Path: s.path(o.tag), IDsPerRequest: s.ids}
		var reqRatios, idRatios []float64
		for r, p := range results[i] {
			st := stats(p, s.ids)
			res.Rounds = append(res.Rounds, RoundStats{Round: r + 1, Position: position(len(o.scenarios), r, i), Stats: st})
			res.Requests += st.Requests
			res.Errors += st.Errors
			if base >= 0 {
				b := stats(results[base][r], 1)
				if b.RequestsPerS > 0 {
					reqRatios = append(reqRatios, st.RequestsPerS/b.RequestsPerS)
					idRatios = append(idRatios, st.IDsPerS/b.IDsPerS)
				}
			}
		}
		res.RequestsPerS = medianOf(res.Rounds, func(s Stats) float64 { return s.RequestsPerS })
		res.IDsPerS = medianOf(res.Rounds, func(s Stats) float64 { return s.IDsPerS })
		res.P50us = medianOf(res.Rounds, func(s Stats) float64 { return s.P50us })
		res.P99us = medianOf(res.Rounds, func(s Stats) float64 { return s.P99us })
		res.P999us = medianOf(res.Rounds, func(s Stats) float64 { return s.P999us })
		res.ServerCPUus = medianKnown(res.Rounds, func(s Stats) float64 { return s.ServerCPUus })
		res.ClientCPUus = medianKnown(res.Rounds, func(s Stats) float64 { return s.ClientCPUus })
		if len(reqRatios) > 0 {
			rr, ir := median(reqRatios), median(idRatios)
			res.RatioRequests, res.RatioIDs = &rr, &ir
		}
		res.ErrorsByKind, res.FirstErrors = errorDetail(results[i])
		*ok = *ok && res.Errors == 0
		out[i] = res
	}
	return out
}

// position returns where scenario i ran in round r, from 1.
func position(n, r, i int) int {
	for pos, j := range rotated(n, r) {
		if j == i {
			return pos + 1
		}
	}
	return 0
}

// halfLoadFraction is the share of segment's maximum throughput at which
// latency is measured.
const halfLoadFraction = 0.5

// halfLoad runs the open-loop phase: segment, and the baseline when it was
// measured, each sent halfLoadFraction of segment's median throughput, for
// every round, the order alternating. It returns nil without segment.
func halfLoad(ctx context.Context, o *options, client *http.Client, srv *servers, results []ScenarioResult, stderr io.Writer) (*HalfLoad, bool, error) {
	seg := indexIn(o.scenarios, "segment")
	if seg < 0 || results[seg].RequestsPerS <= 0 {
		return nil, true, nil
	}
	rate := halfLoadFraction * results[seg].RequestsPerS
	var runs []scenario
	for _, name := range []string{"baseline", "segment"} {
		if i := indexIn(o.scenarios, name); i >= 0 {
			runs = append(runs, o.scenarios[i])
		}
	}
	h := &HalfLoad{Of: "segment", Fraction: halfLoadFraction, RatePerS: rate, Method: halfLoadMethod}
	phases := make([][]*phase, len(runs))
	for r := range o.rounds {
		for pos, i := range rotated(len(runs), r) {
			s := runs[i]
			t := target{url: srv.url(s, o.tag), ids: s.ids}
			if o.warmup > 0 {
				if _, err := openLoop(ctx, client, t, o.conns, o.warmup, rate); err != nil {
					return nil, false, err
				}
			}
			p, err := openLoop(ctx, client, t, o.conns, o.duration, rate)
			if err != nil {
				return nil, false, err
			}
			if err := srv.alive(); err != nil {
				return nil, false, err
			}
			phases[i] = append(phases[i], p)
			fmt.Fprintf(stderr, "leafbench: half load, round %d/%d #%d %-9s %12s req/s offered %12s achieved  p99 %-9s errors %d\n",
				r+1, o.rounds, pos+1, s.name, count(rate), count(float64(p.InTime)/p.Elapsed.Seconds()),
				latency(micros(p.Latency.Quantile(0.99))), p.ErrorCount())
		}
	}
	ok := true
	for i, s := range runs {
		x := HalfLoadResult{Name: s.name, Path: s.path(o.tag), OfferedPerS: rate}
		var achieved, p50, p99, p999, service, lag []float64
		for _, p := range phases[i] {
			achieved = append(achieved, float64(p.InTime)/p.Elapsed.Seconds())
			p50 = append(p50, micros(p.Latency.Quantile(0.50)))
			p99 = append(p99, micros(p.Latency.Quantile(0.99)))
			p999 = append(p999, micros(p.Latency.Quantile(0.999)))
			service = append(service, micros(p.Service.Quantile(0.99)))
			lag = append(lag, micros(p.Lag.Quantile(0.99)))
			x.Requests += p.Requests
			x.Errors += p.ErrorCount()
		}
		x.AchievedPerS, x.P50us, x.P99us, x.P999us = median(achieved), median(p50), median(p99), median(p999)
		x.ServiceP99us, x.LagP99us = median(service), median(lag)
		x.ErrorsByKind, x.FirstErrors = errorDetail(phases[i])
		ok = ok && x.Errors == 0
		h.Results = append(h.Results, x)
	}
	return h, ok, nil
}

// indexIn returns the index of the scenario called name in ss, or -1.
func indexIn(ss []scenario, name string) int {
	for i, s := range ss {
		if s.name == name {
			return i
		}
	}
	return -1
}
