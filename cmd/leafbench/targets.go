package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/leafd/leafd/client"
	leafdv1 "github.com/leafd/leafd/proto/leafd/v1"
)

// call makes one request (or one call of the client) and checks its
// answer. It returns ok, or the kind of failure and a description (only
// built on failure).
type call func() (ok bool, kind errKind, msg string)

// target is what a phase loads: a server over HTTP or gRPC, or the Go
// client with range leases. newCall returns what worker i calls, over and
// over; its requests end with ctx.
type target interface {
	newCall(ctx context.Context, i int) (call, error)
}

// httpTarget is a GET of url, whose answers must hold ids IDs.
type httpTarget struct {
	client *http.Client
	url    string
	ids    int
}

func (t httpTarget) newCall(ctx context.Context, _ int) (call, error) {
	return httpCall(ctx, t.client, t.url, t.ids)
}

// grpcTarget is NextSegment(tag, count) on conns (worker i on conn i mod
// len(conns)), whose answers must hold count IDs.
type grpcTarget struct {
	conns []*grpc.ClientConn
	tag   string
	count int
}

func (t grpcTarget) newCall(ctx context.Context, i int) (call, error) {
	c := leafdv1.NewIDServiceClient(t.conns[i%len(t.conns)])
	req := &leafdv1.NextSegmentRequest{Tag: t.tag, Count: int32(t.count)}
	want := t.count
	return func() (bool, errKind, string) {
		resp, err := c.NextSegment(ctx, req)
		if err != nil {
			kind, msg := grpcFailure(err)
			return false, kind, msg
		}
		if err := checkIDList(resp.GetIds(), want); err != nil {
			return false, errBody, err.Error()
		}
		return true, 0, ""
	}, nil
}

// grpcFailure classifies a failed RPC: no answer (the connection, a
// deadline) or an error status; and describes it: its code, message and
// details (leafd's ErrorInfo, whose reason is leafd's error code).
func grpcFailure(err error) (errKind, string) {
	st := status.Convert(err)
	kind := errStatus
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		kind = errTransport
	}
	msg := fmt.Sprintf("%s: %.200s", st.Code(), st.Message())
	for _, d := range st.Details() {
		msg += fmt.Sprintf(" (%v)", d)
	}
	return kind, msg
}

// checkIDList reports whether ids is what an ID RPC promises: exactly want
// IDs, each from 1 to 2^63-1, strictly ascending. It allocates only to
// describe a failure.
func checkIDList(ids []int64, want int) error {
	if len(ids) != want {
		return fmt.Errorf("%d ID(s), want %d", len(ids), want)
	}
	var prev int64 // IDs start at 1
	for i, id := range ids {
		switch {
		case id < 1:
			return fmt.Errorf("ID %d (number %d) is not positive", id, i+1)
		case id <= prev:
			return fmt.Errorf("ID %d (number %d) is not above the one before it, %d", id, i+1, prev)
		}
		prev = id
	}
	return nil
}

// rangeTarget is the Go client with range leases: every call is one Next of
// tag, and the IDs each worker gets must be strictly ascending.
type rangeTarget struct {
	c   *client.Client
	tag string
	// leases counts the requests the client sent (its range leases).
	leases *atomic.Uint64
}

// rangeSample is how many calls of Next a client_range worker makes per
// reading of the clock: a call served from a lease takes a few tens of
// nanoseconds, about as long as reading the clock, so that only the first
// call of every rangeSample is timed (a sample of the calls' latency that
// every call is as likely to fall in).
const rangeSample = 64

// perSample is how many calls a worker makes per reading of the clock
// (see closedLoop); a target without it has every call timed.
func (t rangeTarget) perSample() int { return rangeSample }

func (t rangeTarget) newCall(ctx context.Context, _ int) (call, error) {
	var prev int64
	return func() (bool, errKind, string) {
		id, err := t.c.Next(ctx, t.tag)
		if err != nil {
			kind := errTransport
			if _, ok := errors.AsType[*client.Error](err); ok {
				kind = errStatus
			}
			return false, kind, err.Error()
		}
		if id < 1 || id <= prev {
			return false, errBody, fmt.Sprintf("ID %d after %d in the same goroutine: not ascending", id, prev)
		}
		prev = id
		return true, 0, ""
	}, nil
}

// countingTransport counts the requests sent through it.
type countingTransport struct {
	next http.RoundTripper
	n    atomic.Uint64
}

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.next.RoundTrip(r)
}

// newRangeClient returns the client of client_range: leafd's Go client on
// baseURL with WithRanges(size, refill), through hc's transport (loopback
// only unless -allow-remote), counting its requests.
func newRangeClient(baseURL string, hc *http.Client, size int64, refill float64) (*client.Client, *countingTransport, error) {
	ct := &countingTransport{next: hc.Transport}
	c, err := client.New(baseURL, client.WithRanges(size, refill),
		client.WithHTTPClient(&http.Client{Transport: ct, CheckRedirect: hc.CheckRedirect}))
	return c, ct, err
}

// probeRange checks, before any load, that the client gets leases: two
// calls of Next, the second served from the first one's lease without a
// request. A leafd without the range route, or a tag it does not lease
// (opaque, sharded), would have the client ask for every ID.
func probeRange(ctx context.Context, t rangeTarget) error {
	first, err := t.c.Next(ctx, t.tag)
	if err != nil {
		return fmt.Errorf("client_range: Next(%q): %w", t.tag, err)
	}
	sent := t.leases.Load()
	second, err := t.c.Next(ctx, t.tag)
	if err != nil {
		return fmt.Errorf("client_range: Next(%q): %w", t.tag, err)
	}
	if second <= first {
		return fmt.Errorf("client_range: Next(%q) gave %d after %d", t.tag, second, first)
	}
	if t.leases.Load() != sent {
		return fmt.Errorf("client_range: the client sent a request for the second ID of %q: leafd does not lease ranges of it (an older leafd, or an opaque or sharded tag)", t.tag)
	}
	return nil
}

// dialGRPC opens n connections to the gRPC server at addr (host:port),
// each its own HTTP/2 connection, through a dialer that connects only to
// loopback addresses unless allowRemote. It returns once every connection
// is up.
func dialGRPC(ctx context.Context, addr string, n int, allowRemote bool) (conns []*grpc.ClientConn, err error) {
	defer func() {
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			conns, err = nil, fmt.Errorf("gRPC connection to %s: %w", addr, err)
		}
	}()
	dial := grpcDialer(allowRemote)
	for range n {
		c, err := grpc.NewClient("passthrough:///"+addr,
			grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithContextDialer(dial))
		if err != nil {
			return conns, err
		}
		conns = append(conns, c)
		c.Connect()
	}
	// Each connection is made once now, so that no request of a phase
	// waits for one.
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	for _, c := range conns {
		if err := waitConnected(ctx, c); err != nil {
			return conns, err
		}
	}
	return conns, nil
}

// grpcDialer returns the gRPC connections' dialer: TCP, connecting only to
// loopback addresses unless allowRemote.
func grpcDialer(allowRemote bool) func(ctx context.Context, addr string) (net.Conn, error) {
	d := dialer(allowRemote)
	return func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
}

// waitConnected waits until c is connected.
func waitConnected(ctx context.Context, c *grpc.ClientConn) error {
	for {
		s := c.GetState()
		if s == connectivity.Ready {
			return nil
		}
		if !c.WaitForStateChange(ctx, s) {
			return fmt.Errorf("not connected (%s): %w", s, ctx.Err())
		}
	}
}

// checkGRPCTarget checks a -target-grpc address, host:port, and refuses one
// that is not a loopback address unless allowRemote.
func checkGRPCTarget(addr string, allowRemote bool) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" || strings.Contains(addr, "/") {
		return "", fmt.Errorf("-target-grpc %q: use host:port, e.g. 127.0.0.1:9090", addr)
	}
	if !allowRemote {
		if err := checkLoopbackHost(host); err != nil {
			return "", fmt.Errorf("-target-grpc %s: %w", addr, err)
		}
	}
	return addr, nil
}

// grpcServingAddr recognises leafd's JSON log record "leafd gRPC serving"
// and returns the address in it.
func grpcServingAddr(line string) (string, bool) {
	if !strings.Contains(line, "gRPC serving") {
		return "", false
	}
	var rec struct{ Msg, Addr string }
	if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Msg != "leafd gRPC serving" || rec.Addr == "" {
		return "", false
	}
	return rec.Addr, true
}

// maxDigits is the length of 2^63-1 in decimal, the longest ID there is.
const maxDigits = 19

// checkIDs reports whether body is what leafd's plain-text ID routes promise
// (docs/contract.md section 4): exactly want lines, each a decimal ID from 1 to 2^63-1
// without sign or leading zero and ending in '\n', strictly ascending. The
// baseline's constant "1\n" passes with want = 1. It allocates only to
// describe a failure.
func checkIDs(body []byte, want int) error {
	if len(body) == 0 {
		return fmt.Errorf("empty body, want %d ID(s)", want)
	}
	var prev uint64 // IDs start at 1, so the first one is always above it
	n := 0
	for i := 0; i < len(body); {
		n++
		if n > want {
			return fmt.Errorf("more than the %d ID(s) asked for", want)
		}
		var v uint64
		j := i
		for ; j < len(body) && body[j] != '\n'; j++ {
			c := body[j]
			if c < '0' || c > '9' {
				return fmt.Errorf("line %d: %q is not a decimal digit", n, c)
			}
			if j-i == maxDigits {
				return fmt.Errorf("line %d: more than %d digits, not a 63-bit ID", n, maxDigits)
			}
			v = v*10 + uint64(c-'0') // 19 digits fit in a uint64
		}
		switch {
		case j == len(body):
			return fmt.Errorf("line %d does not end in a newline", n)
		case j == i:
			return fmt.Errorf("line %d is empty", n)
		case v == 0:
			return fmt.Errorf("line %d: ID 0 is never valid", n)
		case body[i] == '0':
			return fmt.Errorf("line %d: leading zero in %q", n, body[i:j])
		case v > math.MaxInt64:
			return fmt.Errorf("line %d: %s is above 2^63-1", n, body[i:j])
		case v <= prev:
			return fmt.Errorf("line %d: ID %d is not above the one before it, %d", n, v, prev)
		}
		prev = v
		i = j + 1
	}
	if n != want {
		return fmt.Errorf("%d ID(s), want %d", n, want)
	}
	return nil
}
