package client_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/leafd/leafd/access"
	"github.com/leafd/leafd/client"
	leafhttp "github.com/leafd/leafd/http"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/rpc"
	"github.com/leafd/leafd/segment"
	"github.com/leafd/leafd/store"
)

// WithToken sends the access token over both transports: a server with
// segment.require_token serves a client that has a token for the tag,
// answers token_required to one without, and token_refused to one whose
// token is for other tags.
func TestWithToken(t *testing.T) {
	s := openStore(t, testdb.DSN(t, store.DefaultDriver()))
	createTag(t, s, "order", 100)
	ctx := context.Background()
	_, good, err := s.CreateToken(ctx, []string{"order"}, "test")
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := s.CreateToken(ctx, []string{"pay*"}, "test")
	if err != nil {
		t.Fatal(err)
	}
	a, err := segment.New(s, segment.Config{WaitTimeout: time.Second, TagRefresh: time.Hour, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	a.Start()
	t.Cleanup(func() { a.Close() })
	acc := access.New(access.Config{Store: s, Segment: true, Logger: quiet})
	t.Cleanup(acc.Close)
	web := httptest.NewServer(leafhttp.New(leafhttp.Config{Segment: a, Tokens: s, Access: acc, Logger: quiet}).Handler())
	t.Cleanup(web.Close)
	addr, _ := serveGRPC(t, rpc.Config{Segment: a, Access: acc, Logger: quiet})

	transports := map[string]func(opts ...client.Option) (*client.Client, error){
		"http": func(opts ...client.Option) (*client.Client, error) { return client.New(web.URL, opts...) },
		"grpc": func(opts ...client.Option) (*client.Client, error) { return client.NewGRPC(addr, opts...) },
	}
	for name, open := range transports {
		t.Run(name, func(t *testing.T) {
			use := func(opts ...client.Option) error {
				c, err := open(opts...)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				_, err = c.Next(ctx, "order")
				return err
			}
			// The server reads its tokens in the background at start.
			deadline := time.Now().Add(5 * time.Second)
			for {
				err := use(client.WithToken(good))
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("with a token for the tag: %v", err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := use(); !errors.Is(err, client.ErrTokenRequired) {
				t.Errorf("without a token: %v, want token_required", err)
			}
			if err := use(client.WithToken(other)); !errors.Is(err, client.ErrTokenRefused) {
				t.Errorf("with a token for other tags: %v, want token_refused", err)
			}
			if err := use(client.WithToken(good), client.WithRanges(1000, 0.5)); err != nil {
				t.Errorf("ranges with a token for the tag: %v", err)
			}
		})
	}
	if _, err := client.New(web.URL, client.WithToken(" x")); err == nil {
		t.Error("a token with whitespace was accepted")
	}
}
