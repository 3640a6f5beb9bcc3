package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/testenv"

	leafdhttp "github.com/leafd/leafd/http"
)

// TestBatchBody checks the batch baseline's bodies with the checker every
// answer of a run goes through, and their widths: 1000 IDs of 10 digits
// for /segment, of 19 for /snowflake.
func TestBatchBody(t *testing.T) {
	for _, c := range []struct {
		first  int64
		digits int
	}{{segmentBatchFirst, 10}, {snowflakeBatchFirst, 19}} {
		body := batchBody(c.first, batchIDs)
		if err := checkIDs(body, batchIDs); err != nil {
			t.Errorf("batchBody(%d): %v", c.first, err)
		}
		if got, want := len(body), batchIDs*(c.digits+1); got != want {
			t.Errorf("batchBody(%d): %d bytes, want %d (%d IDs of %d digits and a newline)", c.first, got, want, batchIDs, c.digits)
		}
		lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
		for _, i := range []int{0, batchIDs - 1} {
			if len(lines[i]) != c.digits {
				t.Errorf("batchBody(%d): line %d is %q, want %d digits", c.first, i+1, lines[i], c.digits)
			}
		}
		if err := checkIDs(body, batchIDs-1); err == nil {
			t.Errorf("batchBody(%d) passes as %d IDs", c.first, batchIDs-1)
		}
	}
}

// TestBaselineServers checks each baseline server's settings: the bare one
// has a header and an idle timeout only, the others leafd's four default
// timeouts and its header limit, taken from package http.
func TestBaselineServers(t *testing.T) {
	bare, err := newBaselineServer(bareServer)
	if err != nil {
		t.Fatal(err)
	}
	if bare.ReadHeaderTimeout != leafdhttp.DefaultReadHeaderTimeout || bare.IdleTimeout != leafdhttp.DefaultIdleTimeout ||
		bare.ReadTimeout != 0 || bare.WriteTimeout != 0 || bare.MaxHeaderBytes != 0 {
		t.Errorf("bare baseline: ReadHeaderTimeout %v, ReadTimeout %v, WriteTimeout %v, IdleTimeout %v, MaxHeaderBytes %d; "+
			"want %v, 0, 0, %v, 0", bare.ReadHeaderTimeout, bare.ReadTimeout, bare.WriteTimeout, bare.IdleTimeout, bare.MaxHeaderBytes,
			leafdhttp.DefaultReadHeaderTimeout, leafdhttp.DefaultIdleTimeout)
	}
	for _, kind := range []serverKind{timeoutsServer, batchServer} {
		s, err := newBaselineServer(kind)
		if err != nil {
			t.Fatal(err)
		}
		if s.ReadHeaderTimeout != leafdhttp.DefaultReadHeaderTimeout || s.ReadTimeout != leafdhttp.DefaultReadTimeout ||
			s.WriteTimeout != leafdhttp.DefaultWriteTimeout || s.IdleTimeout != leafdhttp.DefaultIdleTimeout || s.MaxHeaderBytes != 64<<10 {
			t.Errorf("%s baseline: ReadHeaderTimeout %v, ReadTimeout %v, WriteTimeout %v, IdleTimeout %v, MaxHeaderBytes %d: not leafd's defaults",
				kind, s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout, s.MaxHeaderBytes)
		}
	}
	if _, err := newBaselineServer("nope"); err == nil {
		t.Error("newBaselineServer(nope) = nil error")
	}
	var stderr bytes.Buffer
	if code := serveBaseline([]string{"-kind", "nope"}, &stderr, &stderr); code != exitUsage {
		t.Errorf("serveBaseline -kind nope exited %d, want %d", code, exitUsage)
	}
}

// TestBaselineAnswers serves each baseline scenario's server and sends it
// the scenario's request through the caller a run uses, whose checks
// (status, content type, count of IDs, ascending) every answer must pass.
func TestBaselineAnswers(t *testing.T) {
	client := newClient(1, false)
	defer client.CloseIdleConnections()
	urls := map[serverKind]string{}
	for _, kind := range baselineKinds {
		srv, err := newBaselineServer(kind)
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(ln)
		defer srv.Close()
		urls[kind] = "http://" + ln.Addr().String()
	}
	n := 0
	for _, s := range scenarios {
		if !s.baseline || s.proto != protoHTTP {
			continue
		}
		n++
		url := urls[s.server] + s.path("bench")
		for _, ids := range []int{s.ids, s.ids + 1} {
			do, err := httpTarget{client: client, url: url, ids: ids}.newCall(t.Context(), 0)
			if err != nil {
				t.Fatal(err)
			}
			ok, kind, msg := do()
			if ids == s.ids && !ok {
				t.Errorf("%s: GET %s: %s error: %s", s.name, s.path("bench"), kind, msg)
			}
			if ids != s.ids && (ok || kind != errBody) {
				t.Errorf("%s: GET %s passes as %d IDs (ok %v, %s %q)", s.name, s.path("bench"), ids, ok, kind, msg)
			}
		}
	}
	if n != 4 {
		t.Errorf("%d HTTP baseline scenarios, want 4", n)
	}
}

// TestScenarioWiring checks which server each baseline is and which
// baselines each scenario is divided by.
func TestScenarioWiring(t *testing.T) {
	wantServer := map[string]serverKind{httpBaseline: bareServer, timeoutsBaseline: timeoutsServer,
		batchBaseline: batchServer, snowBatchBaseline: batchServer}
	wantBases := map[string]string{
		httpBaseline: "baseline", timeoutsBaseline: "baseline_timeouts,baseline",
		batchBaseline: "baseline_batch", snowBatchBaseline: "baseline_batch_snowflake",
		"segment": "baseline,baseline_timeouts", "snowflake": "baseline,baseline_timeouts",
		"segment_batch": "baseline_batch", "snowflake_batch": "baseline_batch_snowflake",
		grpcBaseline: "grpc_baseline", "grpc_segment": "grpc_baseline", "grpc_segment_batch": "grpc_baseline",
		"client_range": "baseline,baseline_timeouts",
	}
	wantLabel := map[string]string{httpBaseline: "bare gin", timeoutsBaseline: "gin with timeouts",
		batchBaseline: "1000 pre-formatted IDs", snowBatchBaseline: "1000 pre-formatted IDs", grpcBaseline: "bare gRPC"}
	for _, s := range scenarios {
		if s.baseline && s.proto == protoHTTP && s.server != wantServer[s.name] {
			t.Errorf("%s: served by %q, want %q", s.name, s.server, wantServer[s.name])
		}
		if got := strings.Join(s.bases, ","); got != wantBases[s.name] {
			t.Errorf("%s: divided by %s, want %s", s.name, got, wantBases[s.name])
		}
		if s.label != wantLabel[s.name] {
			t.Errorf("%s: label %q, want %q", s.name, s.label, wantLabel[s.name])
		}
		for _, b := range append(slices.Clone(s.bases), s.fallback) {
			if i := indexIn(scenarios, b); b != "" && (i < 0 || !scenarios[i].baseline) {
				t.Errorf("%s: divided by %q, which is not a baseline scenario", s.name, b)
			}
		}
	}
	// Each batch baseline gets the request of the leafd scenario divided
	// by it, byte for byte, and answers as many IDs.
	for name, of := range map[string]string{batchBaseline: "segment_batch", snowBatchBaseline: "snowflake_batch"} {
		s, leafd := scenarios[indexIn(scenarios, name)], scenarios[indexIn(scenarios, of)]
		if s.path("bench") != leafd.path("bench") || s.ids != leafd.ids || leafd.bases[0] != name {
			t.Errorf("%s: GET %s for %d IDs; %s: GET %s for %d, divided by %v", name, s.path("bench"), s.ids,
				of, leafd.path("bench"), leafd.ids, leafd.bases)
		}
	}
}

func TestCompareFlags(t *testing.T) {
	names := func(o *options) string {
		var n []string
		for _, s := range o.scenarios {
			n = append(n, s.name)
		}
		return strings.Join(n, ",")
	}
	for _, c := range []struct {
		args   []string
		rounds int
		names  string
	}{
		{[]string{"-compare"}, 5, compareScenarios},
		{[]string{"-compare", "-rounds", "7"}, 7, compareScenarios},
		{[]string{"-compare", "-quick"}, 1, compareScenarios},
		{[]string{"-scenarios", "baseline,baseline_timeouts,segment"}, 5, "baseline,baseline_timeouts,segment"},
		{[]string{"-scenarios", "baseline_batch,segment_batch", "-rounds", "2"}, 2, "baseline_batch,segment_batch"},
		{[]string{"-scenarios", "baseline,segment,grpc_baseline"}, 3, "baseline,segment,grpc_baseline"},
		{nil, 3, defaultScenarios},
		{[]string{"-quick"}, 1, defaultScenarios},
	} {
		o, err := parseFlags(c.args, &bytes.Buffer{})
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		if o.rounds != c.rounds || names(o) != c.names {
			t.Errorf("%v: %d rounds of %s; want %d of %s", c.args, o.rounds, names(o), c.rounds, c.names)
		}
	}
	for _, want := range []string{"baseline", "baseline_timeouts", "baseline_batch", "segment", "snowflake", "segment_batch",
		"snowflake_batch", "grpc_baseline", "grpc_segment"} {
		if !slices.Contains(strings.Split(compareScenarios, ","), want) {
			t.Errorf("-compare does not run %s", want)
		}
	}
	var stderr bytes.Buffer
	if code := run(context.Background(), []string{"-compare", "-scenarios", "segment"}, &stderr, &stderr); code != exitUsage {
		t.Errorf("-compare -scenarios exited %d, want %d\n%s", code, exitUsage, &stderr)
	}
}

// fakePhase is a measured period of one second: requests answered and the
// server's CPU time for them.
func fakePhase(requests uint64, cpu time.Duration) *phase {
	return &phase{Elapsed: time.Second, Requests: requests, InTime: requests, ServerCPU: cpu}
}

// TestSummarizePairsRounds checks that each ratio is the median of the
// rounds' ratios to the baseline of the same round, to every baseline of
// the scenario that ran, and the comparison table that shows them.
func TestSummarizePairsRounds(t *testing.T) {
	var o options
	o.tag = "bench"
	for _, name := range []string{"baseline", "baseline_timeouts", "segment", "baseline_batch", "segment_batch",
		"baseline_batch_snowflake", "snowflake_batch"} {
		o.scenarios = append(o.scenarios, scenarios[indexIn(scenarios, name)])
	}
	ms := time.Millisecond
	// Three rounds; the second was slow for everyone. The medians of
	// the rounds' figures (bare 1000, segment 900: 0.9) differ from the
	// medians of the rounds' ratios (0.8), which is what is reported.
	results := [][]*phase{
		{fakePhase(1000, 40*ms), fakePhase(500, 20*ms), fakePhase(1200, 48*ms)}, // baseline: 40 µs/req
		{fakePhase(1000, 44*ms), fakePhase(500, 22*ms), fakePhase(1000, 44*ms)}, // baseline_timeouts: 44 µs
		{fakePhase(800, 48*ms), fakePhase(450, 27*ms), fakePhase(900, 54*ms)},   // segment: 60 µs
		{fakePhase(400, 40*ms), fakePhase(200, 20*ms), fakePhase(400, 40*ms)},   // baseline_batch: 100 µs
		{fakePhase(200, 30*ms), fakePhase(100, 15*ms), fakePhase(300, 45*ms)},   // segment_batch: 150 µs
		{fakePhase(300, 36*ms), fakePhase(150, 18*ms), fakePhase(300, 36*ms)},   // baseline_batch_snowflake: 120 µs
		{fakePhase(100, 24*ms), fakePhase(50, 12*ms), fakePhase(100, 24*ms)},    // snowflake_batch: 240 µs
	}
	var ok bool
	got := summarize(&o, results, &ok)
	if !ok {
		t.Error("summarize: not ok without errors")
	}
	type want struct {
		base      string
		req, cpu  float64
		ids       float64
		inColumns bool
	}
	for _, c := range []struct {
		name   string
		main   string
		ratios []want
	}{
		{"baseline", "baseline", []want{{base: "baseline", req: 1, ids: 1, cpu: 1}}},
		{"baseline_timeouts", "baseline_timeouts", []want{{base: "baseline_timeouts", req: 1, ids: 1, cpu: 1},
			{base: "baseline", req: 1, ids: 1, cpu: 1.1}}}, // rounds 1, 1, 0.833
		{"segment", "baseline", []want{{base: "baseline", req: 0.8, ids: 0.8, cpu: 1.5}, // rounds 0.8, 0.9, 0.75
			{base: "baseline_timeouts", req: 0.9, ids: 0.9, cpu: 60.0 / 44}}}, // rounds 0.8, 0.9, 0.9
		{"segment_batch", "baseline_batch", []want{{base: "baseline_batch", req: 0.5, ids: 0.5, cpu: 1.5}}}, // 0.5, 0.5, 0.75
		{"snowflake_batch", "baseline_batch_snowflake", []want{{base: "baseline_batch_snowflake", req: 1.0 / 3, ids: 1.0 / 3, cpu: 2}}},
	} {
		i := indexIn(o.scenarios, c.name)
		r := got[i]
		if r.Baseline != c.main || r.RatioRequests == nil || r.RatioServerCPU == nil {
			t.Errorf("%s: main ratios to %q (%v, %v), want to %q", c.name, r.Baseline, r.RatioRequests, r.RatioServerCPU, c.main)
			continue
		}
		if len(r.Ratios) != len(c.ratios) {
			t.Errorf("%s: %d ratios %+v, want %d", c.name, len(r.Ratios), r.Ratios, len(c.ratios))
			continue
		}
		for j, w := range c.ratios {
			x := r.Ratios[j]
			if x.Baseline != w.base || x.Requests == nil || x.IDs == nil || x.ServerCPU == nil ||
				!near(*x.Requests, w.req) || !near(*x.IDs, w.ids) || !near(*x.ServerCPU, w.cpu) {
				t.Errorf("%s vs %s: requests %v, IDs %v, CPU %v; want %v, %v, %v", c.name, x.Baseline,
					deref(x.Requests), deref(x.IDs), deref(x.ServerCPU), w.req, w.ids, w.cpu)
			}
		}
		if *r.RatioRequests != *r.Ratios[0].Requests || *r.RatioServerCPU != *r.Ratios[0].ServerCPU {
			t.Errorf("%s: main ratios %v, %v are not those to %s", c.name, *r.RatioRequests, *r.RatioServerCPU, r.Ratios[0].Baseline)
		}
	}

	rep := &Report{Scenarios: got, OK: true}
	var text, md bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| scenario | requests/s | IDs/s | server CPU/req | CPU/req vs bare gin | vs gin with timeouts | vs 1000 pre-formatted IDs | " +
			"req/s vs bare gin | vs gin with timeouts | vs 1000 pre-formatted IDs |",
		"| `segment` | 800 | 800 | 60.0 µs | 1.500× | 1.364× |  | 0.800× | 0.900× |  |",
		"| `segment_batch` | 200 | 200,000 | 150.0 µs |  |  | 1.500× |  |  | 0.500× |",
		"| `baseline_timeouts` | 1,000 | 1,000 | 44.0 µs | 1.100× | 1.000× |  | 1.000× | 1.000× |  |",
		"vs 1000 pre-formatted IDs: baseline_batch answers /segment/bench?count=1000 with 1000 IDs of 10 digits (11,000 bytes); " +
			"baseline_batch_snowflake answers /snowflake?count=1000 with 1000 IDs of 19 digits (20,000 bytes), each body formatted once " +
			"at start-up, behind leafd's timeouts; segment_batch → baseline_batch, snowflake_batch → baseline_batch_snowflake.",
		"segment_batch → baseline_batch, snowflake_batch → baseline_batch_snowflake; each baseline's are to itself",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("the Markdown report lacks %q:\n%s", want, &md)
		}
	}
	t.Logf("text:\n%s\nMarkdown:\n%s", &text, &md)
	for _, want := range []string{"CPU/req vs bare gin", "vs gin with timeouts", "vs 1000 pre-formatted IDs"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text report lacks %q:\n%s", want, &text)
		}
	}

	// Without the batch baselines, the batch scenarios fall back to the
	// bare baseline in the main table and have no comparison column.
	o.scenarios = slices.DeleteFunc(slices.Clone(o.scenarios), func(s scenario) bool { return strings.HasPrefix(s.name, "baseline_batch") })
	got = summarize(&o, [][]*phase{results[0], results[1], results[2], results[4], results[6]}, &ok)
	for _, r := range got[3:] {
		if r.Baseline != httpBaseline || r.RatioIDs == nil || len(r.Ratios) != 0 {
			t.Errorf("%s without its batch baseline: main ratios to %q (IDs %v), comparison ratios %+v; want to baseline only",
				r.Name, r.Baseline, deref(r.RatioIDs), r.Ratios)
		}
	}
	if r := got[3]; !near(*r.RatioIDs, 200) { // rounds 200, 200, 250
		t.Errorf("segment_batch: IDs/s vs baseline %v, want 200", *r.RatioIDs)
	}
	rep = &Report{Scenarios: got, OK: true}
	if labels := rep.ratioLabels(); !slices.Equal(labels, []string{bareLabel, timeoutsLabel}) {
		t.Errorf("comparison columns %v, want bare gin and gin with timeouts", labels)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func deref(x *float64) any {
	if x == nil {
		return nil
	}
	return *x
}

// TestQuickRunBaselines runs the HTTP baselines briefly, each its own
// process, and checks that every answer passed the checks and that each
// has its ratios; it never judges a figure. It needs no leafd.
func TestQuickRunBaselines(t *testing.T) {
	testenv.Slow(t)
	if testing.Short() {
		t.Skip("starts three servers and loads them for a few seconds")
	}
	rep, stdout, _ := runReport(t, time.Minute, "-quick", "-duration", "300ms", "-warmup", "100ms", "-concurrency", "4",
		"-scenarios", "baseline,baseline_timeouts,baseline_batch,baseline_batch_snowflake")
	wantRatios := map[string]string{"baseline": "baseline", "baseline_timeouts": "baseline_timeouts,baseline",
		"baseline_batch": "baseline_batch", "baseline_batch_snowflake": "baseline_batch_snowflake"}
	for _, s := range rep.Scenarios {
		if s.Requests == 0 || s.Errors != 0 {
			t.Errorf("%s: %d requests, %d errors %v", s.Name, s.Requests, s.Errors, s.FirstErrors)
		}
		var bases []string
		for _, r := range s.Ratios {
			bases = append(bases, r.Baseline)
			if r.Requests == nil || *r.Requests <= 0 {
				t.Errorf("%s vs %s: requests ratio %v", s.Name, r.Baseline, deref(r.Requests))
			}
		}
		if got := strings.Join(bases, ","); got != wantRatios[s.Name] {
			t.Errorf("%s: ratios to %s, want %s", s.Name, got, wantRatios[s.Name])
		}
	}
	if len(rep.Scenarios) != 4 || !rep.OK {
		t.Errorf("%d scenarios, ok %v", len(rep.Scenarios), rep.OK)
	}
	if !strings.Contains(stdout, "vs 1000 pre-formatted IDs") {
		t.Errorf("no comparison table in:\n%s", stdout)
	}
}

// TestMedianInterval checks the interval of a median ratio against the
// order statistics that hold a median with 95% confidence, computed here
// from the binomial distribution itself: the k-th lowest and k-th highest
// round for the largest k that misses the median with a chance of at
// most 5%, the lowest and highest of 5 rounds, none for fewer.
func TestMedianInterval(t *testing.T) {
	for n := 0; n < minIntervalRounds; n++ {
		if _, _, ok := medianInterval(make([]float64, n)); ok {
			t.Errorf("%d rounds: an interval, want none", n)
		}
	}
	// miss is the chance that the k-th lowest and k-th highest of n miss
	// the median: 2·P(B < k), B binomial(n, ½).
	miss := func(n, k int) float64 {
		c, sum := 1.0, 0.0 // c = C(n, j)
		for j := 0; j < k; j++ {
			sum += c
			c = c * float64(n-j) / float64(j+1)
		}
		return 2 * sum / math.Pow(2, float64(n))
	}
	for _, c := range []struct{ n, k int }{{5, 1}, {6, 1}, {9, 2}, {15, 4}, {31, 10}, {100, 40}} {
		if c.n > 5 && (miss(c.n, c.k) > 0.05 || miss(c.n, c.k+1) <= 0.05) {
			t.Fatalf("the test's own table: %d rounds, k %d misses %.4f, k+1 %.4f", c.n, c.k, miss(c.n, c.k), miss(c.n, c.k+1))
		}
		// The rounds' ratios, shuffled: 1.00, 1.01, … in order.
		xs := make([]float64, c.n)
		for i := range xs {
			xs[(i*7+3)%c.n] = 1 + float64(i)/100
		}
		if c.n%7 == 0 {
			t.Fatalf("%d rounds: the shuffle needs a count prime to 7", c.n)
		}
		lo, hi, ok := medianInterval(xs)
		wantLo, wantHi := 1+float64(c.k-1)/100, 1+float64(c.n-c.k)/100
		if !ok || !near(lo, wantLo) || !near(hi, wantHi) {
			t.Errorf("%d rounds: interval %v–%v (%v), want the %dth lowest and highest, %v–%v", c.n, lo, hi, ok, c.k, wantLo, wantHi)
		}
	}
}

// TestSummarizeInterval checks that from 5 rounds on the comparison table
// gives each CPU ratio with the interval of its median, and that the JSON
// carries it.
func TestSummarizeInterval(t *testing.T) {
	var o options
	o.tag = "bench"
	for _, name := range []string{"baseline_timeouts", "segment"} {
		o.scenarios = append(o.scenarios, scenarios[indexIn(scenarios, name)])
	}
	ms := time.Millisecond
	// segment's CPU per request against the baseline's 44 µs, round by
	// round: 52, 40, 60, 44, 48 µs, ratios 1.182, 0.909, 1.364, 1, 1.091.
	var base, seg []*phase
	for _, us := range []time.Duration{52, 40, 60, 44, 48} {
		base = append(base, fakePhase(1000, 44*ms))
		seg = append(seg, fakePhase(1000, us*ms))
	}
	var ok bool
	got := summarize(&o, [][]*phase{base, seg}, &ok)
	r := got[1].ratioTo(timeoutsLabel)
	if r == nil || r.ServerCPULow == nil || r.ServerCPUHigh == nil || !near(*r.ServerCPU, 48.0/44) ||
		!near(*r.ServerCPULow, 40.0/44) || !near(*r.ServerCPUHigh, 60.0/44) {
		t.Fatalf("segment vs gin with timeouts: %+v, want 1.091 within 0.909–1.364", r)
	}
	if r := got[0].ratioTo(timeoutsLabel); r == nil || r.ServerCPULow != nil {
		t.Errorf("baseline_timeouts vs itself: %+v, want 1 without an interval", r)
	}
	rep := &Report{Scenarios: got, OK: true}
	var md, js bytes.Buffer
	if err := rep.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if want := "| `segment` | 1,000 | 1,000 | 48.0 µs | 1.091× [0.91–1.36] | 1.000× |"; !strings.Contains(md.String(), want) {
		t.Errorf("the Markdown report lacks %q:\n%s", want, &md)
	}
	if err := json.NewEncoder(&js).Encode(rep); err != nil {
		t.Fatal(err)
	}
	if want := `"server_cpu_low":0.909`; !strings.Contains(js.String(), want) {
		t.Errorf("the JSON lacks %s:\n%s", want, &js)
	}

	// With 3 rounds, no interval.
	got = summarize(&o, [][]*phase{base[:3], seg[:3]}, &ok)
	if r := got[1].ratioTo(timeoutsLabel); r == nil || r.ServerCPULow != nil {
		t.Errorf("3 rounds: %+v, want a ratio without an interval", r)
	}
}
