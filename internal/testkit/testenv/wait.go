package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Eventually calls check at once and then every interval until it returns
// nil, and returns nil. It is how a test waits for something a real process
// does: as soon as it has happened, and no longer than within; within 0
// waits for as long as ctx lasts.
//
// Errors: check's last error, saying how long it waited, once within has
// passed (check runs once more at the deadline); check's error unwrapped at
// once when check marked it with Final; ctx's error, with check's last,
// when ctx ends first.
func Eventually(ctx context.Context, within, interval time.Duration, check func() error) error {
	deadline := time.Now().Add(within)
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		err := check()
		if err == nil {
			return nil
		}
		var final finalError
		if errors.As(err, &final) {
			return final.err
		}
		wait := interval
		if within > 0 {
			left := time.Until(deadline)
			if left <= 0 {
				return fmt.Errorf("not within %v: %w", within, err)
			}
			wait = min(interval, left)
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		}
	}
}

// Final marks an error of a check given to Eventually as one that waiting
// longer cannot mend (the process waited for has exited, say): Eventually
// returns it at once, unwrapped.
func Final(err error) error { return finalError{err} }

type finalError struct{ err error }

func (f finalError) Error() string { return f.err.Error() }
func (f finalError) Unwrap() error { return f.err }

// readyInterval is how often WaitReady asks.
const readyInterval = 20 * time.Millisecond

// WaitReady polls base/readyz with client (nil means
// http.DefaultClient) until it answers 200, for at most within. exited,
// when not nil, ends the wait early: the server exited.
//
// Errors: within passed (naming the last answer), exited was closed, or
// ctx ended.
func WaitReady(ctx context.Context, client *http.Client, base string, within time.Duration, exited <-chan struct{}) error {
	if client == nil {
		client = http.DefaultClient
	}
	deadline := time.Now().Add(within)
	return Eventually(ctx, within, readyInterval, func() error {
		select {
		case <-exited:
			return Final(errors.New("the server exited before it was ready"))
		default:
		}
		// No answer may take longer than the wait itself.
		rctx, cancel := context.WithTimeout(ctx, max(time.Until(deadline), readyInterval))
		defer cancel()
		req, err := http.NewRequestWithContext(rctx, http.MethodGet, base+"/readyz", nil)
		if err != nil {
			return Final(err)
		}
		res, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("%s/readyz did not answer 200: %w", base, err)
		}
		body, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("%s/readyz did not answer 200: %s %s", base, res.Status, bytes.TrimSpace(body))
		}
		return nil
	})
}
