package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/client"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/rpc"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/snowflake"
	"github.com/leafd/leafd/store"
)

func Example() {
	// Two leafd servers on one database, as in docker-compose.yml (here
	// in-process over SQLite, with the tag "order").
	dsn, remove := exampleDatabase()
	defer remove()
	url1, stop1 := startLeafd(dsn, "order")
	defer stop1()
	url2, stop2 := startLeafd(dsn, "")
	defer stop2()

	// Keep 1000 IDs per tag in memory; refill in the background when 200
	// are left. Fail over to the second server when the first is down.
	c, err := client.New(url1,
		client.WithFailover(url2),
		client.WithBuffer(1000, 0.2),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	id, err := c.Next(ctx, "order")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("order ID:", id)

	ids, err := c.NextN(ctx, "order", 3)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("three more:", ids)

	sf, err := c.Snowflake(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("snowflake ID is positive:", sf > 0)

	_, err = c.Next(ctx, "invoice")
	switch {
	case errors.Is(err, client.ErrUnknownTag):
		fmt.Println("invoice: create the tag first")
	case err != nil:
		log.Fatal(err)
	}
	// Output:
	// order ID: 1
	// three more: [2 3 4]
	// snowflake ID is positive: true
	// invoice: create the tag first
}

func ExampleWithRanges() {
	// A leafd server in-process over SQLite, with the tag "order".
	dsn, remove := exampleDatabase()
	defer remove()
	url, stop := startLeafd(dsn, "order")
	defer stop()

	// Lease 100,000 consecutive IDs per tag at a time; fetch the next
	// lease in the background when 20,000 are left.
	c, err := client.New(url, client.WithRanges(100_000, 0.2))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close() // the rest of the leases is skipped, never handed out

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	id, err := c.Next(ctx, "order") // one request: the first lease
	if err != nil {
		log.Fatal(err)
	}
	ids, err := c.NextN(ctx, "order", 3) // from the lease: no request
	if err != nil {
		log.Fatal(err)
	}
	// Where the lease starts depends on what the server had buffered.
	fmt.Println("order ID is positive:", id > 0)
	fmt.Println("the next three follow it:", ids[0] == id+1 && ids[1] == id+2 && ids[2] == id+3)
	// Output:
	// order ID is positive: true
	// the next three follow it: true
}

func ExampleNewGRPC() {
	// A leafd server in-process over SQLite, with the tag "order", serving
	// its gRPC API too (grpc.addr).
	dsn, remove := exampleDatabase()
	defer remove()
	_, addr, stop := startLeafdGRPC(dsn, "order")
	defer stop()

	// The same client over gRPC: NextSegment, SegmentRange and
	// NextSnowflake instead of GET requests; the same buffers, failover
	// (WithFailover of further gRPC addresses) and errors.
	c, err := client.NewGRPC(addr,
		client.WithBuffer(1000, 0.2),
		// Plaintext by default; TLS, interceptors, … with:
		// client.WithGRPCDialOptions(grpc.WithTransportCredentials(credentials.NewTLS(cfg))),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	ids, err := c.NextN(ctx, "order", 3)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("order IDs:", ids)

	_, err = c.Next(ctx, "invoice")
	if errors.Is(err, client.ErrUnknownTag) { // as over HTTP
		fmt.Println("invoice: create the tag first")
	}
	var e *client.Error
	if errors.As(err, &e) {
		fmt.Println(e.Code, e.Status, e.GRPCCode) // the HTTP API's status for the code; the gRPC code received
	}
	// Output:
	// order IDs: [1 2 3]
	// invoice: create the tag first
	// unknown_tag 404 NotFound
}

// exampleDatabase returns the DSN of a new database of the default engine
// (store.DefaultDriver, an embedded file) and a function that removes it.
func exampleDatabase() (dsn string, remove func()) {
	dir, err := os.MkdirTemp("", "leafd-example")
	if err != nil {
		log.Fatal(err)
	}
	return "file:" + filepath.Join(dir, "leafd.db"), func() { os.RemoveAll(dir) }
}

// startLeafd starts a real leafd HTTP server in-process over the database
// dsn of the default engine, creating tag first unless it is "".
func startLeafd(dsn, tag string) (url string, stop func()) {
	url, _, stop = start(dsn, tag, false)
	return url, stop
}

// startLeafdGRPC is startLeafd with leafd's gRPC API served too, from the
// same allocators, on a loopback port.
func startLeafdGRPC(dsn, tag string) (url, addr string, stop func()) {
	return start(dsn, tag, true)
}

func start(dsn, tag string, withGRPC bool) (url, addr string, stop func()) {
	ctx := context.Background()
	s, err := store.Open(store.DefaultDriver(), dsn)
	if err != nil {
		log.Fatal(err)
	}
	if err := s.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if tag != "" {
		if _, err := s.CreateTag(ctx, leafd.Tag{Name: tag, Step: 1000, MaxID: 1}); err != nil {
			log.Fatal(err)
		}
	}
	a, err := segment.New(s, segment.Config{Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	if err := a.Refresh(ctx); err != nil {
		log.Fatal(err)
	}
	a.Start()
	g, err := snowflake.New(snowflake.Settings{Leases: s, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	g.Start()
	srv := httptest.NewServer(leafhttp.New(leafhttp.Config{Segment: a, Snowflake: g, Logger: quiet}).Handler())
	stopGRPC := func() {}
	if withGRPC {
		gs, err := rpc.New(rpc.Config{Segment: a, Snowflake: g, Logger: quiet})
		if err != nil {
			log.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			log.Fatal(err)
		}
		go gs.Serve(ln)
		addr, stopGRPC = ln.Addr().String(), gs.Stop
	}
	return srv.URL, addr, func() {
		stopGRPC()
		srv.Close()
		g.Close()
		a.Close()
		s.Close()
	}
}
