package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is everything a run measured, as -json writes it. Latencies are in
// microseconds. Every figure of a scenario is the median of its rounds.
type Report struct {
	Machine   Machine          `json:"machine"`
	Settings  Settings         `json:"settings"`
	Scenarios []ScenarioResult `json:"scenarios"`
	// HalfLoad is nil when the segment scenario was not run or -half-load
	// is off.
	HalfLoad *HalfLoad `json:"half_load,omitempty"`
	// HalfLoadGRPC is the same for grpc_segment and grpc_baseline: nil
	// when grpc_segment was not run or -half-load is off.
	HalfLoadGRPC *HalfLoad `json:"half_load_grpc,omitempty"`
	// OK is false when any request of the run failed.
	OK bool `json:"ok"`
}

// Machine describes where the run took place.
type Machine struct {
	GOOS       string `json:"goos"`
	GOARCH     string `json:"goarch"`
	CPU        string `json:"cpu"`
	CPUs       int    `json:"cpus"` // runtime.NumCPU, what nproc says
	GOMAXPROCS int    `json:"gomaxprocs"`
	Go         string `json:"go"`
	OS         string `json:"os,omitempty"`
	Kernel     string `json:"kernel,omitempty"`
	// LoadStart and LoadEnd are the 1-minute load average before and after
	// the run (Linux), to tell a quiet machine from a busy one.
	LoadStart string `json:"load_average_start,omitempty"`
	LoadEnd   string `json:"load_average_end,omitempty"`
}

// Settings are the run's parameters.
type Settings struct {
	Duration    string `json:"duration"` // per scenario and round
	Warmup      string `json:"warmup"`
	Rounds      int    `json:"rounds"`
	Concurrency int    `json:"concurrency"` // keep-alive connections, one per worker
	Target      string `json:"target"`
	Leafd       string `json:"leafd,omitempty"` // `leafd version`, when leafbench started it
	Tag         string `json:"tag"`
}

// Stats are the figures of one measurement, or the medians of several.
type Stats struct {
	RequestsPerS float64 `json:"requests_per_s"`
	IDsPerS      float64 `json:"ids_per_s"`
	P50us        float64 `json:"p50_us"`
	P99us        float64 `json:"p99_us"`
	P999us       float64 `json:"p999_us"`
	Requests     uint64  `json:"requests"` // answered, good or not (a sum, not a median)
	Errors       uint64  `json:"errors"`   // a sum, not a median
	// ServerCPUus and ClientCPUus are the CPU time per request of the
	// server process and of leafbench, in microseconds; absent when not
	// known (a -target server, or no /proc).
	ServerCPUus float64 `json:"server_cpu_us_per_request,omitempty"`
	ClientCPUus float64 `json:"client_cpu_us_per_request,omitempty"`
	// ServerCPUusPerID is ServerCPUus divided by the IDs per request.
	ServerCPUusPerID float64 `json:"server_cpu_us_per_id,omitempty"`
	// Leases (client_range only) counts the range leases the client
	// fetched from leafd (a sum, not a median); ServerCPUusPerLease is the
	// server's CPU time divided by them.
	Leases              uint64  `json:"leases,omitempty"`
	ServerCPUusPerLease float64 `json:"server_cpu_us_per_lease,omitempty"`
}

// RoundStats are one round's figures of a scenario.
type RoundStats struct {
	Round    int `json:"round"`    // from 1
	Position int `json:"position"` // place in the round's order, from 1
	Stats
}

// ScenarioResult is one scenario over all rounds.
type ScenarioResult struct {
	Name string `json:"name"`
	// Path is the HTTP request's path and query, or the gRPC method's path
	// (/leafd.v1.IDService/NextSegment); for client_range the path of its
	// leases.
	Path string `json:"path"`
	// Route describes the request: "GET /segment/bench",
	// "gRPC NextSegment(bench, count 1)", "client.Next(bench), WithRanges(…)".
	Route         string `json:"route"`
	IDsPerRequest int    `json:"ids_per_request"`
	Stats
	ErrorsByKind map[string]uint64 `json:"errors_by_kind"`
	FirstErrors  map[string]string `json:"first_errors,omitempty"`
	// Baseline names the scenario the ratios below are to, the first of
	// its baselines that ran (see Ratios), or for segment_batch and
	// snowflake_batch without their batch baseline, baseline; absent when
	// none was run.
	Baseline string `json:"baseline,omitempty"`
	// RatioRequests and RatioIDs are the median over rounds of this
	// scenario's requests/s (IDs/s) divided by its baseline's requests/s in
	// the same round; absent without a baseline.
	RatioRequests *float64 `json:"ratio_requests,omitempty"`
	RatioIDs      *float64 `json:"ratio_ids,omitempty"`
	// RatioServerCPU is the median over rounds of this scenario's server
	// CPU per request divided by its baseline's in the same round: what
	// the server spends on a request beyond the protocol's own cost.
	// Absent without a baseline or without CPU figures.
	RatioServerCPU *float64 `json:"ratio_server_cpu,omitempty"`
	// Ratios are the same ratios to each of the scenario's baselines that
	// ran (segment: baseline and baseline_timeouts; segment_batch:
	// baseline_batch; …), in the order of the comparison table's columns.
	Ratios []BaselineRatio `json:"ratios,omitempty"`
	Rounds []RoundStats    `json:"rounds"`
}

// BaselineRatio is a scenario's figures divided by a baseline's of the
// same round: the median over rounds of each round's ratio. A ratio is
// absent when a figure was missing in every round (no CPU figures
// without /proc).
type BaselineRatio struct {
	// Baseline is the baseline scenario, Label what the comparison
	// table's column calls it ("bare gin", "gin with timeouts", "1000
	// pre-formatted IDs", "bare gRPC").
	Baseline  string   `json:"baseline"`
	Label     string   `json:"label"`
	Requests  *float64 `json:"requests,omitempty"`
	IDs       *float64 `json:"ids,omitempty"`
	ServerCPU *float64 `json:"server_cpu,omitempty"`
	// ServerCPULow and ServerCPUHigh bound ServerCPU: an interval that
	// holds the median of such rounds' ratios with 95% confidence (94% for
	// 5 rounds, see medianInterval); absent for fewer than
	// minIntervalRounds rounds. A ratio whose interval holds 1 is within
	// the machine's noise of the baseline.
	ServerCPULow  *float64 `json:"server_cpu_low,omitempty"`
	ServerCPUHigh *float64 `json:"server_cpu_high,omitempty"`
}

// HalfLoad is an open-loop phase: a fixed rate, half of the segment (or
// grpc_segment) scenario's measured maximum, sent to it and to its
// baseline.
type HalfLoad struct {
	Of       string           `json:"of"`
	Fraction float64          `json:"fraction"`
	RatePerS float64          `json:"rate_per_s"`
	Method   string           `json:"method"`
	Results  []HalfLoadResult `json:"results"`
}

// HalfLoadResult is one scenario at the fixed rate, medians of rounds.
type HalfLoadResult struct {
	Name         string  `json:"name"`
	Path         string  `json:"path"`
	OfferedPerS  float64 `json:"offered_per_s"`
	AchievedPerS float64 `json:"achieved_per_s"`
	P50us        float64 `json:"p50_us"`
	P99us        float64 `json:"p99_us"`
	P999us       float64 `json:"p999_us"`
	// ServiceP99us is the p99 from the actual send; LagP99us the p99 of how
	// late the client sent what was due while idle.
	ServiceP99us float64 `json:"service_p99_us"`
	LagP99us     float64 `json:"client_lag_p99_us"`
	// ServerCPUus is the server's CPU time per request at that rate, in
	// microseconds (absent when not known), and RatioServerCPU the median
	// over rounds of it divided by the baseline's in the same round.
	ServerCPUus    float64           `json:"server_cpu_us_per_request,omitempty"`
	RatioServerCPU *float64          `json:"ratio_server_cpu,omitempty"`
	Requests       uint64            `json:"requests"`
	Errors         uint64            `json:"errors"`
	ErrorsByKind   map[string]uint64 `json:"errors_by_kind"`
	FirstErrors    map[string]string `json:"first_errors,omitempty"`
}

// halfLoadMethod says in the report how the open loop is paced and timed.
const halfLoadMethod = "open loop: request k is due at start+k/rate, spread over the workers; " +
	"latency counts from the due time when the worker was still busy then (no coordinated omission), " +
	"else from the actual send; client lag is how late an idle worker sent"

// stats turns a phase into figures.
func stats(p *phase, ids int) Stats {
	secs := p.Elapsed.Seconds()
	st := Stats{
		RequestsPerS: float64(p.InTime) / secs,
		IDsPerS:      float64(p.InTime) * float64(ids) / secs,
		P50us:        micros(p.Latency.Quantile(0.50)),
		P99us:        micros(p.Latency.Quantile(0.99)),
		P999us:       micros(p.Latency.Quantile(0.999)),
		Requests:     p.Requests,
		ServerCPUus:  perRequest(p.ServerCPU, p.Requests),
		ClientCPUus:  perRequest(p.ClientCPU, p.Requests),
		Leases:       p.Leases,
	}
	for _, n := range p.Errors {
		st.Errors += n
	}
	st.ServerCPUusPerID = st.ServerCPUus / float64(ids)
	st.ServerCPUusPerLease = perRequest(p.ServerCPU, p.Leases)
	return st
}

// perRequest returns cpu per request in microseconds, 0 when cpu is
// unknown (0).
func perRequest(cpu time.Duration, requests uint64) float64 {
	if requests == 0 {
		return 0
	}
	return micros(cpu) / float64(requests)
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// median returns the median of xs (the mean of the middle two for an even
// count), 0 for none. It sorts xs.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// minIntervalRounds is the fewest rounds for which a ratio is given with
// medianInterval's interval: with 5, the lowest and the highest round
// hold the median of such rounds with 94% confidence; with fewer, with
// under 90%.
const minIntervalRounds = 5

// medianInterval returns an interval that holds the median of the
// distribution xs are drawn from with at least 95% confidence (94% for 5
// values): the k-th lowest and k-th highest of xs, for the largest k at
// which the two miss the median together with a chance of at most 5%
// (a binomial tail, whatever the distribution). For 15 rounds that is the
// 4th lowest and 4th highest. ok is false for fewer than
// minIntervalRounds values. It sorts xs.
func medianInterval(xs []float64) (lo, hi float64, ok bool) {
	n := len(xs)
	if n < minIntervalRounds {
		return 0, 0, false
	}
	slices.Sort(xs)
	// The k-th lowest and k-th highest miss the median when fewer than k
	// values fall below it or fewer than k above: a chance of 2·P(B < k)
	// for B binomial(n, ½). p is P(B = k-1), tail P(B < k).
	k, p := 1, math.Pow(0.5, float64(n))
	tail := p
	for k+1 <= n/2 {
		p *= float64(n-k+1) / float64(k) // P(B = k)
		if 2*(tail+p) > 0.05 {
			break
		}
		tail += p
		k++
	}
	return xs[k-1], xs[n-k], true
}

// medianOf returns the median of f over xs; with known, over the values
// that are not 0 only (0 is an unknown CPU figure).
func medianOf[T any](xs []T, known bool, f func(T) float64) float64 {
	var v []float64
	for _, x := range xs {
		if y := f(x); y != 0 || !known {
			v = append(v, y)
		}
	}
	return median(v)
}

// medians returns the median over rounds of each figure, and the sums of
// the counts.
func medians(rounds []RoundStats) Stats {
	st := Stats{
		RequestsPerS:        medianOf(rounds, false, func(r RoundStats) float64 { return r.RequestsPerS }),
		IDsPerS:             medianOf(rounds, false, func(r RoundStats) float64 { return r.IDsPerS }),
		P50us:               medianOf(rounds, false, func(r RoundStats) float64 { return r.P50us }),
		P99us:               medianOf(rounds, false, func(r RoundStats) float64 { return r.P99us }),
		P999us:              medianOf(rounds, false, func(r RoundStats) float64 { return r.P999us }),
		ServerCPUus:         medianOf(rounds, true, func(r RoundStats) float64 { return r.ServerCPUus }),
		ClientCPUus:         medianOf(rounds, true, func(r RoundStats) float64 { return r.ClientCPUus }),
		ServerCPUusPerID:    medianOf(rounds, true, func(r RoundStats) float64 { return r.ServerCPUusPerID }),
		ServerCPUusPerLease: medianOf(rounds, true, func(r RoundStats) float64 { return r.ServerCPUusPerLease }),
	}
	for _, r := range rounds {
		st.Requests += r.Requests
		st.Errors += r.Errors
		st.Leases += r.Leases
	}
	return st
}

// errorDetail sums the failures of phases by kind and keeps the first
// description of each kind.
func errorDetail(ps []*phase) (map[string]uint64, map[string]string) {
	byKind, first := make(map[string]uint64, numErrKinds), map[string]string{}
	for k := range numErrKinds {
		byKind[k.String()] = 0
		for _, p := range ps {
			byKind[k.String()] += p.Errors[k]
			if _, ok := first[k.String()]; !ok && p.FirstError[k] != "" {
				first[k.String()] = p.FirstError[k]
			}
		}
	}
	return byKind, first
}

// describeMachine reads what can be known of this machine.
func describeMachine() Machine {
	return Machine{
		GOOS:       runtime.GOOS,
		GOARCH:     runtime.GOARCH,
		CPU:        cpuModel(),
		CPUs:       runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Go:         runtime.Version(),
		OS:         osName(),
		Kernel:     firstLine("/proc/sys/kernel/osrelease"),
		LoadStart:  loadAverage(),
	}
}

// cpuModel returns the first CPU model name /proc/cpuinfo gives, "unknown"
// elsewhere.
func cpuModel() string {
	data, _ := os.ReadFile("/proc/cpuinfo")
	for line := range strings.Lines(string(data)) {
		key, value, _ := strings.Cut(line, ":")
		switch strings.TrimSpace(key) {
		case "model name", "Model", "Hardware", "cpu model":
			if v := strings.TrimSpace(value); v != "" {
				return v
			}
		}
	}
	return "unknown"
}

// osName returns PRETTY_NAME of /etc/os-release, "" when there is none.
func osName() string {
	data, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			if u, err := strconv.Unquote(v); err == nil {
				return u
			}
			return v
		}
	}
	return ""
}

// loadAverage returns the 1-minute load average, "" off Linux.
func loadAverage() string {
	first, _, _ := strings.Cut(firstLine("/proc/loadavg"), " ")
	return first
}

func firstLine(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(data), "\n")
	return strings.TrimSpace(line)
}

// line describes the machine in one sentence.
func (m Machine) line() string {
	s := fmt.Sprintf("%s/%s, CPU %q, %d CPUs (nproc; GOMAXPROCS %d), %s", m.GOOS, m.GOARCH, m.CPU, m.CPUs, m.GOMAXPROCS, m.Go)
	if m.OS != "" {
		s += ", " + m.OS
	}
	if m.Kernel != "" {
		s += ", kernel " + m.Kernel
	}
	if m.LoadStart != "" {
		s += fmt.Sprintf(", 1-minute load average %s before the run and %s at its end (the run's own load included)", m.LoadStart, m.LoadEnd)
	}
	return s
}

// line describes the run's settings in one sentence.
func (s Settings) line() string {
	return fmt.Sprintf("%d round(s) of %s per scenario after a %s warm-up, scenario order rotated each round, medians shown; "+
		"%d keep-alive connections; target %s, tag %q", s.Rounds, s.Duration, s.Warmup, s.Concurrency, s.Target, s.Tag)
}

// WriteText writes the report as aligned tables.
func (r *Report) WriteText(w io.Writer) error { return r.write(w, false) }

// WriteMarkdown writes the report as Markdown tables for the README.
func (r *Report) WriteMarkdown(w io.Writer) error { return r.write(w, true) }

// write writes the report as Markdown tables (md) or as aligned text, which
// also lists the first failures.
func (r *Report) write(w io.Writer, md bool) error {
	pick := func(text, markdown string) string {
		if md {
			return markdown
		}
		return text
	}
	fmt.Fprintf(w, pick("\nmachine: %s\nrun:     %s\n", "Machine: %s.\n\nRun: %s.\n"), r.Machine.line(), r.Settings.line())
	if r.Settings.Leafd != "" {
		fmt.Fprintf(w, pick("leafd:   %s\n", "\nleafd: `%s`.\n"), r.Settings.Leafd)
	}
	fmt.Fprintln(w)
	rows := [][]string{{"scenario", "route", "requests/s", "IDs/s", "p50", "p99", "p999", "errors", "req/s vs baseline", "IDs/s vs baseline",
		"server CPU/req", "server CPU/ID", "server CPU/req vs baseline", "client CPU/req"}}
	for _, s := range r.Scenarios {
		rows = append(rows, []string{s.Name, s.Route, count(s.RequestsPerS), count(s.IDsPerS), latency(s.P50us), latency(s.P99us),
			latency(s.P999us), strconv.FormatUint(s.Errors, 10), ratio(s.RatioRequests), ratio(s.RatioIDs),
			cpu(s.ServerCPUus), cpu(s.ServerCPUusPerID), ratio(s.RatioServerCPU), cpu(s.ClientCPUus)})
	}
	if !md {
		for i := range rows {
			rows[i] = slices.Delete(rows[i], 1, 2) // the route is for the README only
		}
	}
	if err := writeTable(w, md, 2, rows); err != nil {
		return err
	}
	r.writeNotes(w)
	if labels := r.ratioLabels(); len(labels) > 0 {
		fmt.Fprintf(w, pick("\n%s:\n\n", "\n%s.\n\n"), pick(comparisonTitle, strings.ToUpper(comparisonTitle[:1])+comparisonTitle[1:]))
		rows := [][]string{comparisonHeader(labels)}
		for _, s := range r.Scenarios {
			rows = append(rows, s.comparisonRow(labels))
		}
		if err := writeTable(w, md, 1, rows); err != nil {
			return err
		}
		r.writeBatchNote(w)
	}
	for _, h := range []*HalfLoad{r.HalfLoad, r.HalfLoadGRPC} {
		if h == nil {
			continue
		}
		if md {
			fmt.Fprintf(w, "\nLatency at %.0f%% of `%s`'s maximum: %s requests/s offered to each, open loop.\n\n", h.Fraction*100, h.Of, count(h.RatePerS))
		} else {
			fmt.Fprintf(w, "\nlatency at %.0f%% of %s's maximum, %s requests/s offered to each\n(%s):\n\n", h.Fraction*100, h.Of, count(h.RatePerS), h.Method)
		}
		rows := [][]string{{"scenario", "offered/s", "achieved/s", "p50", "p99", "p999", "p99 from send", "p99 client lag", "errors",
			"server CPU/req", "server CPU/req vs baseline"}}
		for _, x := range h.Results {
			rows = append(rows, []string{x.Name, count(x.OfferedPerS), count(x.AchievedPerS), latency(x.P50us), latency(x.P99us),
				latency(x.P999us), latency(x.ServiceP99us), latency(x.LagP99us), strconv.FormatUint(x.Errors, 10),
				cpu(x.ServerCPUus), ratio(x.RatioServerCPU)})
		}
		if err := writeTable(w, md, 1, rows); err != nil {
			return err
		}
	}
	if !md {
		r.writeFailures(w)
	}
	return nil
}

// writeTable writes rows, the header first, as text aligned right, or as a
// Markdown table whose first code columns are code, aligned left, and the
// others aligned right.
func writeTable(w io.Writer, md bool, code int, rows [][]string) error {
	if !md {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		for _, row := range rows {
			fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
		}
		return tw.Flush()
	}
	for i, row := range rows {
		for c := 0; i > 0 && c < code; c++ { // not in the header
			row[c] = "`" + row[c] + "`"
		}
		fmt.Fprintln(w, "| "+strings.Join(row, " | ")+" |")
		if i == 0 {
			fmt.Fprintln(w, "|"+strings.Repeat("---|", code)+strings.Repeat("---:|", len(row)-code))
		}
	}
	return nil
}

// writeNotes says, under the table, which baseline the ratios of gRPC
// scenarios are to, and what client_range's leases cost, when those
// scenarios ran. Each note is a paragraph of its own.
func (r *Report) writeNotes(w io.Writer) {
	if slices.ContainsFunc(r.Scenarios, func(s ScenarioResult) bool { return s.Baseline == grpcBaseline }) {
		fmt.Fprintf(w, "\nRatios of the gRPC scenarios are to %s (a bare gRPC server), those of the others to %s (bare gin).\n", grpcBaseline, httpBaseline)
	}
	var other []string
	for _, s := range r.Scenarios {
		if s.Baseline != "" && s.Baseline != httpBaseline && s.Baseline != grpcBaseline && s.Baseline != s.Name {
			other = append(other, s.Name+" → "+s.Baseline)
		}
	}
	if len(other) > 0 {
		fmt.Fprintf(w, "\nIn the table above, the ratios of these scenarios are to another baseline: %s; each baseline's are to itself.\n",
			strings.Join(other, ", "))
	}
	for _, s := range r.Scenarios {
		if s.Leases == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s: a request is one call of Next; the client fetched %s leases in the measured periods, %s IDs each on average",
			s.Name, count(float64(s.Leases)), count(float64(s.Requests)/float64(s.Leases)))
		if s.ServerCPUusPerLease > 0 {
			fmt.Fprintf(w, ", and leafd spent %s of CPU per lease", cpu(s.ServerCPUusPerLease))
		}
		fmt.Fprintln(w, ".")
	}
}

// writeFailures lists the first failure of each kind, so that errors can
// be acted on.
func (r *Report) writeFailures(w io.Writer) {
	show := func(name string, first map[string]string) {
		for k := range numErrKinds {
			if msg, ok := first[k.String()]; ok {
				fmt.Fprintf(w, "  %s, first %s error: %s\n", name, k, msg)
			}
		}
	}
	if !r.OK {
		fmt.Fprintln(w, "\nFAILED: some requests failed")
	}
	for _, s := range r.Scenarios {
		show(s.Name, s.FirstErrors)
	}
	for _, h := range []*HalfLoad{r.HalfLoad, r.HalfLoadGRPC} {
		if h != nil {
			for _, x := range h.Results {
				show(x.Name+" at half load", x.FirstErrors)
			}
		}
	}
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// count writes a rate with thousands separators: 1,234,567.
func count(x float64) string {
	s := strconv.FormatInt(int64(x+0.5), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// latency writes microseconds as ns below 1 µs, µs below 1 ms and ms
// above.
func latency(us float64) string {
	switch {
	case us > 0 && us < 1:
		return fmt.Sprintf("%.0f ns", us*1000)
	case us < 1000:
		return fmt.Sprintf("%.0f µs", us)
	case us < 10_000:
		return fmt.Sprintf("%.2f ms", us/1000)
	default:
		return fmt.Sprintf("%.1f ms", us/1000)
	}
}

// cpu writes CPU microseconds per request (or per ID), as ns below 1 µs,
// "" when unknown.
func cpu(us float64) string {
	switch {
	case us == 0:
		return ""
	case us < 1:
		return fmt.Sprintf("%.3g ns", us*1000)
	}
	return fmt.Sprintf("%.1f µs", us)
}

// ratio writes a ratio to the baseline, "" when there is none.
func ratio(r *float64) string {
	switch {
	case r == nil:
		return ""
	case *r >= 10:
		return fmt.Sprintf("%.0f×", *r)
	case *r > 0 && *r < 0.001:
		return fmt.Sprintf("%.2g×", *r)
	default:
		return fmt.Sprintf("%.3f×", *r)
	}
}

// comparisonTitle introduces the comparison table.
const comparisonTitle = "server CPU per request and throughput against each baseline " +
	"(each the median of the rounds' ratios to that baseline in the same round; in brackets, from " +
	"5 rounds on, an interval that holds that median with 95% confidence, 94% for 5 rounds)"

// comparisonLabels are the comparison table's baseline columns, in order.
var comparisonLabels = []string{bareLabel, timeoutsLabel, batchLabel, grpcLabel}

// ratioLabels returns the labels of comparisonLabels to which any
// scenario has a ratio.
func (r *Report) ratioLabels() []string {
	var out []string
	for _, l := range comparisonLabels {
		if slices.ContainsFunc(r.Scenarios, func(s ScenarioResult) bool { return s.ratioTo(l) != nil }) {
			out = append(out, l)
		}
	}
	return out
}

// ratioTo returns the scenario's ratios to the baseline labelled label, nil
// when there are none.
func (s ScenarioResult) ratioTo(label string) *BaselineRatio {
	for i := range s.Ratios {
		if s.Ratios[i].Label == label {
			return &s.Ratios[i]
		}
	}
	return nil
}

// comparisonHeader returns the comparison table's column names: the
// scenario, its figures, then for each baseline label its CPU ratio, then
// for each its throughput ratio (requests/s; the main table has IDs/s
// too).
func comparisonHeader(labels []string) []string {
	h := []string{"scenario", "requests/s", "IDs/s", "server CPU/req"}
	for _, first := range []string{"CPU/req vs ", "req/s vs "} {
		for i, l := range labels {
			if i > 0 {
				first = "vs "
			}
			h = append(h, first+l)
		}
	}
	return h
}

// comparisonRow returns the scenario's cells of the comparison table,
// name first.
func (s ScenarioResult) comparisonRow(labels []string) []string {
	row := []string{s.Name, count(s.RequestsPerS), count(s.IDsPerS), cpu(s.ServerCPUus)}
	var cpus, reqs []string
	for _, l := range labels {
		var c string
		var q *float64
		if b := s.ratioTo(l); b != nil {
			c, q = ratio(b.ServerCPU), b.Requests
			if b.ServerCPULow != nil && b.ServerCPUHigh != nil {
				c += fmt.Sprintf(" [%.2f–%.2f]", *b.ServerCPULow, *b.ServerCPUHigh)
			}
		}
		cpus, reqs = append(cpus, c), append(reqs, ratio(q))
	}
	return append(append(row, cpus...), reqs...)
}

// writeBatchNote says what the batch baselines that ran answer, and which
// scenarios are divided by which.
func (r *Report) writeBatchNote(w io.Writer) {
	var parts, pairs []string
	for _, s := range r.Scenarios {
		b := s.ratioTo(batchLabel)
		switch {
		case b == nil:
		case s.Name == b.Baseline:
			first, digits := int64(segmentBatchFirst), 10
			if s.Name == snowBatchBaseline {
				first, digits = snowflakeBatchFirst, 19
			}
			parts = append(parts, fmt.Sprintf("%s answers %s with %d IDs of %d digits (%s bytes)", s.Name, s.Path, batchIDs, digits,
				count(float64(len(batchBody(first, batchIDs))))))
		default:
			pairs = append(pairs, s.Name+" → "+b.Baseline)
		}
	}
	if len(parts) == 0 {
		return
	}
	fmt.Fprintf(w, "\nvs %s: %s, each body formatted once at start-up, behind leafd's timeouts", batchLabel, strings.Join(parts, "; "))
	if len(pairs) > 0 {
		fmt.Fprintf(w, "; %s", strings.Join(pairs, ", "))
	}
	fmt.Fprintln(w, ".")
}
