package client_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/leafd/leafd/client"
)

// olderRangeServer answers GET /segment/{tag}/range as a leafd from before
// expiring leases: it refuses the query parameter expiring as it refuses
// any it does not take, and leases consecutive ranges otherwise.
type olderRangeServer struct {
	*httptest.Server
	refused, leased atomic.Int32
	next            atomic.Int64
}

func newOlderRangeServer(t *testing.T) *olderRangeServer {
	s := &olderRangeServer{}
	s.next.Store(1)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if !strings.HasSuffix(r.URL.Path, "/range") {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":{"code":"not_found","message":"no route"}}`)
			return
		}
		if r.URL.Query().Has("expiring") {
			s.refused.Add(1)
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"code":"invalid_query","message":"the query parameter \"expiring\" is not one this route takes: it takes format, size; leave the others out"}}`)
			return
		}
		s.leased.Add(1)
		size, _ := strconv.ParseInt(r.URL.Query().Get("size"), 10, 64)
		start := s.next.Add(size) - size
		fmt.Fprintf(w, `{"tag":"order","start":"%d","end":"%d"}`, start, start+size)
	}))
	t.Cleanup(s.Close)
	return s
}

// TestRangesOlderServer: a server from before expiring leases refuses the
// client's expiring parameter; the client asks it again without it, from
// then on, and serves its leases as before.
func TestRangesOlderServer(t *testing.T) {
	srv := newOlderRangeServer(t)
	c := newClient(t, srv.URL, client.WithRanges(10, 0.5))
	var got []int64
	for range 35 {
		got = append(got, mustNext(t, c, "order"))
	}
	if !slices.Equal(got, seq(1, 35)) {
		t.Fatalf("IDs %v, want 1..35 in order", got)
	}
	if n := srv.refused.Load(); n != 1 {
		t.Errorf("the server refused expiring %d times, want once: the client should remember it", n)
	}
	if n := srv.leased.Load(); n < 4 {
		t.Errorf("%d leases without expiring, want at least 4 for 35 IDs of leases of 10", n)
	}
}
