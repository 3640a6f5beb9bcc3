package store_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/leafd/leafd/store"
	"github.com/leafd/leafd/store/internal/engine"
	"github.com/leafd/leafd/store/internal/testhook"
	"github.com/leafd/leafd/store/storetest"
)

// The causes of store_unavailable that come from the network, the context
// or the failover's probe, rather than from an engine's driver, are worded
// alike on every engine. (Each engine's package words its driver's
// errors, and provokes those a test can.)
func TestErrorsWorded(t *testing.T) {
	t.Chdir(t.TempDir()) // an engine of files may make the directory of its example DSN
	addr := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 3306}
	dial := func(errno syscall.Errno) error {
		return &net.OpError{Op: "dial", Net: "tcp", Addr: addr, Err: os.NewSyscallError("connect", errno)}
	}
	for _, driver := range store.Drivers() {
		t.Run(driver, func(t *testing.T) {
			// A store that is never connected: only its words are asked.
			opened, err := store.Open(driver, store.ExampleDSN(driver))
			if err != nil {
				t.Fatal(err)
			}
			defer opened.Close()
			s := testhook.Migrator(opened).(engine.Migrator)
			for _, c := range []struct {
				name string
				err  error
				want []string
			}{
				{"ReadOnlyProbe", fmt.Errorf("10.0.0.7:3306: %w", &engine.Refusal{Reason: "the server is read-only", Verdict: engine.ReadOnly}),
					[]string{"refuses writes", "point store.dsn at the primary"}},
				{"GaleraProbe", fmt.Errorf("10.0.0.7:3306: %w", &engine.Refusal{Reason: "not synced", Verdict: engine.Verdict{Class: engine.ClassUnavailable, Cause: "the Galera node is not synced"}}),
					[]string{"Galera node is not synced"}},
				{"Refused", dial(syscall.ECONNREFUSED),
					[]string{"cannot be reached at 10.0.0.7:3306", "connection refused", "check the address in store.dsn and that the database server runs"}},
				{"NoRoute", dial(syscall.EHOSTUNREACH),
					[]string{"cannot be reached at 10.0.0.7:3306", "no route", "check the address in store.dsn and the network"}},
				{"DialTimeout", dial(syscall.ETIMEDOUT),
					[]string{"cannot be reached at 10.0.0.7:3306", "dial timeout", "timeout= in store.dsn"}},
				{"UnknownHost", &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "leafd-db.example", IsNotFound: true}},
					[]string{`the host name "leafd-db.example" does not resolve`, "check the host in store.dsn"}},
				{"Reset", &net.OpError{Op: "read", Net: "tcp", Addr: addr, Err: os.NewSyscallError("read", syscall.ECONNRESET)},
					[]string{"connection to the database at 10.0.0.7:3306 was reset"}},
				{"Deadline", fmt.Errorf("query: %w", context.DeadlineExceeded),
					[]string{"did not answer in time"}},
				{"Canceled", fmt.Errorf("query: %w", context.Canceled),
					[]string{"cancelled before the database answered"}},
			} {
				t.Run(c.name, func(t *testing.T) {
					if got := s.Class(c.err); got != engine.ClassUnavailable {
						t.Fatalf("class = %d, want %d", got, engine.ClassUnavailable)
					}
					storetest.WantUnavailable(t, s.Wrap(c.err, "allocate \"t\""), c.want...)
				})
			}
		})
	}
}
