package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"
)

// baselineCommand is the hidden first argument with which leafbench runs
// itself as the baseline server. It is not in the usage: leafbench starts
// it, nobody else needs to.
const baselineCommand = "__serve-baseline"

// listeningPrefix starts the line with which the baseline server tells its
// parent where it listens.
const listeningPrefix = "leafbench baseline listening on "

// baselineBody is the constant the baseline answers: one ID as leafd writes
// it, with leafd's content type, so that only the work of issuing an ID
// differs.
var baselineBody = []byte("1\n")

const textPlain = "text/plain; charset=utf-8"

// baselineHandler is the whole baseline: gin in release mode, no logger or
// recovery middleware, one handler that writes a constant. It answers the
// paths of the ID routes and /readyz, so that its requests are byte for
// byte those sent to leafd.
func baselineHandler() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	constant := func(c *gin.Context) { c.Data(http.StatusOK, textPlain, baselineBody) }
	e.GET("/segment/:tag", constant)
	e.GET("/snowflake", constant)
	e.GET("/readyz", constant)
	return e
}

// serveBaseline runs the baseline server until SIGINT, SIGTERM or the end
// of standard input (leafbench gone). It prints listeningPrefix and the
// address on stdout once it listens.
func serveBaseline(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(baselineCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "address to listen on")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(stderr, "leafbench baseline:", err)
		return exitFailure
	}
	// The same server settings as leafd's (http/server.go).
	srv := &http.Server{Handler: baselineHandler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "%s%s\n", listeningPrefix, ln.Addr())

	select {
	case err := <-served:
		fmt.Fprintln(stderr, "leafbench baseline:", err)
		return exitFailure
	case <-ctx.Done():
	}
	shutCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintln(stderr, "leafbench baseline:", err)
		return exitFailure
	}
	return exitOK
}
