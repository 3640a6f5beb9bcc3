package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// buffer holds the IDs of one tag that the client fetched and has not
// handed out yet.
type buffer struct {
	tag string

	mu  sync.Mutex
	ids []int64 // the next ID first
	// refill is the refill in flight, nil when there is none: there is at
	// most one per tag.
	refill *refill
	// gone is set when the buffer left the client's map (Close, or a tag
	// the server does not know): callers take the map's buffer again.
	gone bool
	// failures counts refills that failed in a row; retryAt is when a
	// background refill may be tried again after one. A caller that finds
	// the buffer empty does not wait for retryAt.
	failures int
	retryAt  time.Time
}

// refill is one fetch of IDs for a buffer. Callers that find the buffer
// empty park on done.
type refill struct {
	done chan struct{}
	err  error // written before done is closed
}

// Background refills back off from refillBackoffMin to refillBackoffMax
// after failures, so that a buffer draining while its server is down does
// not send a request per call.
const (
	refillBackoffMin = 50 * time.Millisecond
	refillBackoffMax = 5 * time.Second
)

// buffer returns the buffer of tag, made on first use.
func (c *Client) buffer(tag string) (*buffer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bufs == nil {
		return nil, ErrClosed
	}
	b := c.bufs[tag]
	if b == nil {
		b = &buffer{tag: tag}
		c.bufs[tag] = b
	}
	return b, nil
}

// take hands n IDs of tag from its buffer to use, in one or more parts, in
// the buffer's order. use must copy what it keeps. When the buffer is
// empty, take parks on the refill in flight (starting one if none is)
// until it lands, fails, or ctx ends.
func (c *Client) take(ctx context.Context, tag string, n int, use func([]int64)) error {
	for n > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		b, err := c.buffer(tag)
		if err != nil {
			return err
		}
		b.mu.Lock()
		if b.gone {
			b.mu.Unlock()
			continue // the map holds another buffer now, or none (closed)
		}
		if k := min(n, len(b.ids)); k > 0 {
			use(b.ids[:k])
			b.ids = b.ids[k:]
			n -= k
			if b.refill == nil && len(b.ids) <= c.low && !time.Now().Before(b.retryAt) {
				c.startRefill(b)
			}
			b.mu.Unlock()
			continue
		}
		r := b.refill
		if r == nil {
			r = c.startRefill(b)
		}
		b.mu.Unlock()
		select {
		case <-r.done:
			if r.err != nil {
				if c.closed.Load() {
					return ErrClosed
				}
				return r.err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// startRefill starts a refill of b in the background. b.mu is held, and b
// is not gone, so Close has not begun to wait for refills.
func (c *Client) startRefill(b *buffer) *refill {
	r := &refill{done: make(chan struct{})}
	b.refill = r
	c.wg.Add(1)
	go c.runRefill(b, r)
	return r
}

// runRefill fetches c.size IDs for b, on the client's context (not the
// caller's), bounded by the refill timeout.
func (c *Client) runRefill(b *buffer, r *refill) {
	defer c.wg.Done()
	ctx, cancel := context.WithTimeout(c.ctx, c.refillTimeout)
	ids, err := c.fetchSegment(ctx, b.tag, c.size)
	cancel()
	if err != nil {
		err = fmt.Errorf("leafd client: refilling the buffer of tag %q: %w", b.tag, err)
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill = nil
	switch {
	case b.gone:
		// Closed while the request was in flight: the IDs are dropped.
		if err == nil {
			err = ErrClosed
		}
	case err == nil:
		if len(b.ids) == 0 {
			b.ids = ids
		} else {
			b.ids = append(b.ids, ids...)
		}
		b.failures, b.retryAt = 0, time.Time{}
	default:
		b.failures++
		b.retryAt = time.Now().Add(backoff(b.failures))
		var e *Error
		if errors.As(err, &e) && e.definite() && len(b.ids) == 0 {
			// An unknown tag, say: keep no buffer for it, so that made-up
			// tags do not pile up in the map.
			b.gone = true
			c.forget(b)
		}
	}
	r.err = err
	close(r.done)
}

// forget removes b from the map. b.mu is held (the lock order is a
// buffer's, then the map's).
func (c *Client) forget(b *buffer) {
	c.mu.Lock()
	if c.bufs[b.tag] == b {
		delete(c.bufs, b.tag)
	}
	c.mu.Unlock()
}

// drop empties b for Close: its IDs are never handed out.
func (b *buffer) drop() {
	b.mu.Lock()
	b.ids, b.gone = nil, true
	b.mu.Unlock()
}

func backoff(failures int) time.Duration {
	d := refillBackoffMin << min(failures-1, 10)
	return min(d, refillBackoffMax)
}
