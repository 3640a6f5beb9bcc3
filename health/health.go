// Package health says whether a server can serve, for every transport: the
// readiness of its ID modes (GET /readyz, the gRPC health service) and the
// store's ping, cached (the dashboard, /api/state, /metrics).
package health

import (
	"context"
	"sync"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/store"
)

// Mode is an ID mode whose readiness is asked: *segment.Allocator,
// *snowflake.Generator and *snowflake.Pool. Ready returns nil while the mode
// can issue IDs, and a not_ready error saying why otherwise.
type Mode interface{ Ready() error }

// Ready returns the readiness of a server running modes (nil ones are off):
// nil when every mode can issue IDs, and otherwise the not_ready error of
// the first that cannot.
func Ready(modes ...Mode) func() error {
	return func() error {
		for _, m := range modes {
			if m == nil {
				continue
			}
			if err := m.Ready(); err != nil {
				if leafd.ErrorCode(err) != leafd.ENotReady { // the contract knows no other answer
					err = leafd.Wrap(leafd.ENotReady, err, leafd.ErrorMessage(err))
				}
				return err
			}
		}
		return nil
	}
}

// Store health is pinged at most once per healthEvery however many
// dashboards poll and scrapers scrape, each ping bounded by healthTimeout.
const (
	healthEvery   = time.Second
	healthTimeout = time.Second
)

// Pinger is the database a Store pings; every store.Store implements it.
type Pinger interface {
	Driver() string
	Ping(ctx context.Context) error
	Address() store.Address
}

var _ Pinger = store.Store(nil)

// Store caches the outcome of the store's ping for the dashboard,
// /api/state and /metrics. One caller at a time pings; the others answer
// the last outcome meanwhile, or wait for the very first one.
type Store struct {
	store Pinger

	mu      sync.Mutex
	last    Status
	pinging chan struct{} // closed when the ping in flight ends; nil if none
}

// Status is the outcome of one ping.
type Status struct {
	OK  bool
	Err string
	At  time.Time // when the ping ended; zero before the first
}

// NewStore returns the cached ping of s; nil when s is nil.
func NewStore(s Pinger) *Store {
	if s == nil {
		return nil
	}
	return &Store{store: s}
}

// Driver is the store's driver name.
func (h *Store) Driver() string { return h.store.Driver() }

// Address returns the address the store uses among its cluster's, and
// whether /api/state and /metrics show it: they do for a database reached
// over the network, not for a file, whose path is no address of a cluster
// (docs/contract.md section 6 and docs/metrics.md give the address of a
// MySQL store only) and is not for an open dashboard to show: an engine
// without addresses (store.HasAddresses) has none to show.
func (h *Store) Address() (store.Address, bool) {
	if !store.HasAddresses(h.store.Driver()) {
		return store.Address{}, false
	}
	return h.store.Address(), true
}

// Check returns the store's health, no older than healthEvery unless a
// ping is in flight. ctx only bounds the wait for the first ping: the ping
// itself runs on its own deadline, so that a dashboard closed mid-poll does
// not count as a failure of the database.
func (h *Store) Check(ctx context.Context) Status {
	h.mu.Lock()
	last, pinging := h.last, h.pinging
	fresh := !last.At.IsZero() && time.Since(last.At) < healthEvery
	if fresh || (pinging != nil && !last.At.IsZero()) {
		h.mu.Unlock()
		return last
	}
	if pinging != nil {
		h.mu.Unlock()
		select {
		case <-pinging:
		case <-ctx.Done():
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.last
	}
	done := make(chan struct{})
	h.pinging = done
	h.mu.Unlock()

	pctx, cancel := context.WithTimeout(context.Background(), healthTimeout)
	err := h.store.Ping(pctx)
	cancel()
	now := Status{OK: err == nil, At: time.Now()}
	if err != nil {
		now.Err = err.Error()
	}
	h.mu.Lock()
	h.last, h.pinging = now, nil
	h.mu.Unlock()
	close(done)
	return now
}
