package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/leafd/leafd/internal/testkit/testenv"
)

// TestQuickRunGRPCAndRanges runs the gRPC scenarios (leafd's and the bare
// gRPC server's), client_range and the gin baseline briefly against a leafd
// built from this repository, and checks that each scenario ran and
// reported sane figures: requests without errors, latencies in order, IDs/s
// consistent with requests/s, ratios to the right baseline, server CPU
// where /proc gives it, and leases for client_range. It never judges a
// timing, a throughput or a ratio's value.
func TestQuickRunGRPCAndRanges(t *testing.T) {
	testenv.Slow(t)
	if testing.Short() {
		t.Skip("starts three servers and loads them for several seconds")
	}
	bin, err := leafdBin.Path()
	if err != nil {
		t.Fatal(err)
	}
	const rangeSize = 10_000
	rep, _, md := runReport(t, 2*time.Minute, "-quick", "-concurrency", "8", "-leafd", bin,
		"-scenarios", "baseline,grpc_baseline,grpc_segment,grpc_segment_batch,client_range",
		"-range-size", "10000", "-range-callers", "2")
	if !rep.OK {
		t.Errorf("report says ok: false")
	}
	if rep.HalfLoad != nil {
		t.Errorf("a half-load phase without the segment scenario: %+v", rep.HalfLoad)
	}
	_, procErr := os.Stat("/proc/self/stat")
	hasProc := procErr == nil
	h := rep.HalfLoadGRPC
	if h == nil || h.Of != "grpc_segment" || len(h.Results) != 2 || h.Results[0].Name != "grpc_baseline" || h.Results[1].Name != "grpc_segment" {
		t.Fatalf("gRPC half-load phase missing or incomplete: %+v", h)
	}
	for _, x := range h.Results {
		if x.Requests == 0 || x.Errors != 0 {
			t.Errorf("half load %s: %d requests, %d errors %v", x.Name, x.Requests, x.Errors, x.FirstErrors)
		}
		if !(0 < x.P50us && x.P50us <= x.P99us && x.P99us <= x.P999us) {
			t.Errorf("half load %s: latencies out of order: p50 %v, p99 %v, p999 %v µs", x.Name, x.P50us, x.P99us, x.P999us)
		}
		if hasProc && (x.ServerCPUus <= 0 || x.RatioServerCPU == nil || *x.RatioServerCPU <= 0) {
			t.Errorf("half load %s: server CPU %v µs/req, ratio %v: not measured", x.Name, x.ServerCPUus, x.RatioServerCPU)
		}
	}
	wantBase := map[string]string{"baseline": "baseline", "grpc_baseline": "grpc_baseline", "grpc_segment": "grpc_baseline",
		"grpc_segment_batch": "grpc_baseline", "client_range": "baseline"}
	wantIDs := map[string]int{"baseline": 1, "grpc_baseline": 1, "grpc_segment": 1, "grpc_segment_batch": 1000, "client_range": 1}
	var names []string
	for _, s := range rep.Scenarios {
		names = append(names, s.Name)
		if s.Requests == 0 || s.RequestsPerS <= 0 {
			t.Errorf("%s: %d requests, %v/s: nothing measured", s.Name, s.Requests, s.RequestsPerS)
		}
		if s.Errors != 0 {
			t.Errorf("%s: %d errors: %v", s.Name, s.Errors, s.FirstErrors)
		}
		// A call of client_range's Next may be quicker than the clock
		// tells apart: its p50 may be 0.
		if !(0 <= s.P50us && s.P50us <= s.P99us && s.P99us <= s.P999us && s.P999us > 0) {
			t.Errorf("%s: latencies out of order: p50 %v, p99 %v, p999 %v µs", s.Name, s.P50us, s.P99us, s.P999us)
		}
		if s.IDsPerRequest != wantIDs[s.Name] || s.IDsPerS != s.RequestsPerS*float64(s.IDsPerRequest) {
			t.Errorf("%s: %v IDs/s is not %v requests/s × %d (want %d IDs per request)", s.Name, s.IDsPerS, s.RequestsPerS, s.IDsPerRequest, wantIDs[s.Name])
		}
		if s.Baseline != wantBase[s.Name] || s.RatioRequests == nil || *s.RatioRequests <= 0 {
			t.Errorf("%s: ratio %v to %q, want a positive ratio to %q", s.Name, s.RatioRequests, s.Baseline, wantBase[s.Name])
		}
		if s.Name == s.Baseline && (s.RatioRequests == nil || *s.RatioRequests != 1) {
			t.Errorf("%s: ratio to itself %v, want 1", s.Name, s.RatioRequests)
		}
		if hasProc && s.Name != "client_range" {
			// Thousands of requests cost well over the 10 ms that
			// /proc counts in; client_range's server may stay under it.
			if s.ServerCPUus <= 0 || s.ClientCPUus <= 0 || s.RatioServerCPU == nil || *s.RatioServerCPU <= 0 {
				t.Errorf("%s: server CPU %v µs/req, client %v, ratio %v: not measured", s.Name, s.ServerCPUus, s.ClientCPUus, s.RatioServerCPU)
			}
			if got, want := s.ServerCPUusPerID, s.ServerCPUus/float64(s.IDsPerRequest); got < want*0.999 || got > want*1.001 {
				t.Errorf("%s: server CPU per ID %v, want %v (per request / %d)", s.Name, got, want, s.IDsPerRequest)
			}
		}
		if s.Name == "client_range" {
			// Every lease holds rangeSize IDs; a phase may also use the
			// rest of a lease fetched before it, and leave one unused.
			if s.Leases == 0 || s.Requests > (s.Leases+2)*rangeSize {
				t.Errorf("client_range: %d calls of Next from %d leases of %d IDs", s.Requests, s.Leases, rangeSize)
			}
		} else if s.Leases != 0 {
			t.Errorf("%s: %d leases, want none outside client_range", s.Name, s.Leases)
		}
	}
	if got, want := strings.Join(names, ","), "baseline,grpc_baseline,grpc_segment,grpc_segment_batch,client_range"; got != want {
		t.Errorf("scenarios %s, want %s", got, want)
	}

	for _, want := range []string{
		"| `grpc_segment` | `gRPC NextSegment(bench, count 1)` |",
		"| `grpc_segment_batch` | `gRPC NextSegment(bench, count 1000)` |",
		"| `client_range` | `client.Next(bench), WithRanges(10000, 0.5)` |",
		"server CPU/req vs baseline",
		"Ratios of the gRPC scenarios are to grpc_baseline",
		"client_range: a request is one call of Next; the client fetched",
		"Latency at 50% of `grpc_segment`'s maximum",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown report lacks %q:\n%s", want, md)
		}
	}
}

// TestBareGRPCServer checks the gRPC baseline's answers through the gRPC
// scenarios' own calls: count 1 and 1000 pass their checks, and a count
// leafd would refuse is refused.
func TestBareGRPCServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newBareGRPCServer()
	go srv.Serve(ln)
	defer srv.Stop()

	conns, err := dialGRPC(t.Context(), ln.Addr().String(), 2, false)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for _, n := range []int{1, 1000} {
		for i := range 2 { // one worker on each connection
			do, err := grpcTarget{conns: conns, tag: "bench", count: n}.newCall(t.Context(), i)
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if ok, kind, msg := do(); !ok {
					t.Fatalf("count %d: %s error: %s", n, kind, msg)
				}
			}
		}
	}
	do, err := grpcTarget{conns: conns, tag: "bench", count: grpcMaxBatch + 1}.newCall(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if ok, kind, msg := do(); ok || kind != errStatus || !strings.Contains(msg, "InvalidArgument") {
		t.Fatalf("count %d: ok %v, %s error %q; want an InvalidArgument status", grpcMaxBatch+1, ok, kind, msg)
	}
}

// TestGRPCDialerRefusesRemote checks that the gRPC connections, too, are
// made only to loopback addresses.
func TestGRPCDialerRefusesRemote(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err := grpcDialer(false)(ctx, "192.0.2.1:9") // TEST-NET-1
	if err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Fatalf("dialling 192.0.2.1 = %v, want a refusal before connecting", err)
	}
}

func TestCheckIDList(t *testing.T) {
	for _, c := range []struct {
		ids  []int64
		want int
		says string // "" for a good answer
	}{
		{[]int64{1}, 1, ""},
		{[]int64{5, 6, 9, 1 << 62}, 4, ""},
		{[]int64{9223372036854775806, 9223372036854775807}, 2, ""},
		{nil, 1, "0 ID(s), want 1"},
		{[]int64{1, 2}, 1, "2 ID(s), want 1"},
		{[]int64{0}, 1, "not positive"},
		{[]int64{-3}, 1, "not positive"},
		{[]int64{4, 4}, 2, "not above"},
		{[]int64{5, 4}, 2, "not above"},
	} {
		err := checkIDList(c.ids, c.want)
		switch {
		case c.says == "" && err != nil:
			t.Errorf("checkIDList(%v, %d) = %v, want nil", c.ids, c.want, err)
		case c.says != "" && (err == nil || !strings.Contains(err.Error(), c.says)):
			t.Errorf("checkIDList(%v, %d) = %v, want an error saying %q", c.ids, c.want, err, c.says)
		}
	}
	ids := make([]int64, 1000)
	for i := range ids {
		ids[i] = int64(1_000_000 + i)
	}
	if n := testing.AllocsPerRun(100, func() { _ = checkIDList(ids, 1000) }); n != 0 {
		t.Errorf("checkIDList allocates %v times on a good answer", n)
	}
}

func TestGRPCServingAddr(t *testing.T) {
	for line, want := range map[string]string{
		`{"time":"x","level":"INFO","msg":"leafd gRPC serving","addr":"127.0.0.1:43210"}`: "127.0.0.1:43210",
		`{"time":"x","level":"INFO","msg":"leafd serving","addr":"127.0.0.1:8080"}`:       "",
		`{"msg":"leafd gRPC serving"}`:        "",
		`leafd gRPC serving addr=127.0.0.1:1`: "",
	} {
		got, ok := grpcServingAddr(line)
		if got != want || ok != (want != "") {
			t.Errorf("grpcServingAddr(%s) = %q, %v; want %q", line, got, ok, want)
		}
	}
}

func TestSideBySideFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-grpc-connections", "0"}, {"-range-size", "0"}, {"-range-refill", "1"}, {"-range-refill", "-0.1"},
		{"-range-callers", "0"}, {"-scenarios", "grpc"},
		{"-target-grpc", "127.0.0.1:9090"},                                                                       // without -target
		{"-target", "http://127.0.0.1:8080", "-scenarios", "grpc_segment"},                                       // no -target-grpc
		{"-target", "http://127.0.0.1:8080", "-scenarios", "grpc_segment", "-target-grpc", "10.0.0.1:9090"},      // not loopback
		{"-target", "http://127.0.0.1:8080", "-scenarios", "grpc_segment", "-target-grpc", "http://127.0.0.1:1"}, // not host:port
	} {
		var stderr bytes.Buffer
		if code := run(context.Background(), args, &stderr, &stderr); code != exitUsage {
			t.Errorf("leafbench %v exited %d, want %d (usage)\n%s", args, code, exitUsage, &stderr)
		}
	}
	o, err := parseFlags([]string{"-scenarios", "all"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.scenarios) != len(scenarios) {
		t.Errorf("-scenarios all: %d scenarios, want %d", len(o.scenarios), len(scenarios))
	}
	o, err = parseFlags(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range o.scenarios {
		names = append(names, s.name)
	}
	if got := strings.Join(names, ","); got != defaultScenarios {
		t.Errorf("default scenarios %s, want %s", got, defaultScenarios)
	}
	// The bare gRPC baseline needs no -target-grpc: leafbench starts it.
	if _, err := parseFlags([]string{"-target", "http://127.0.0.1:8080", "-scenarios", "grpc_baseline,segment"}, &bytes.Buffer{}); err != nil {
		t.Errorf("-target with grpc_baseline only: %v", err)
	}
	if o, err := parseFlags([]string{"-target", "http://127.0.0.1:8080", "-scenarios", "grpc_segment", "-target-grpc", "[::1]:9090"}, &bytes.Buffer{}); err != nil || o.targetGRPC != "[::1]:9090" {
		t.Errorf("-target-grpc [::1]:9090: %v", err)
	}
}
