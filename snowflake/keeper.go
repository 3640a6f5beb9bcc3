package snowflake

import (
	"context"
	"errors"
	mrand "math/rand/v2"
	"strconv"
	"time"
)

// signal wakes the lease keeper, if it is not awake already.
func (g *Generator) signal() {
	select {
	case g.keeper.wake <- struct{}{}:
	default:
	}
}

// owner returns the owner of a new claim: each has one of its own, so
// that releasing an old lease can never end a newer one on the same
// worker id.
func (k *keeper) owner(prefix, base string) string {
	k.claims++
	return prefix + base + "#" + strconv.FormatInt(k.claims, 10)
}

// failed counts a failed store call and reports whether to log it: the
// first of a run of failures and every 20th after it.
func (k *keeper) failed() bool {
	k.failures++
	return k.failures == 1 || k.failures%20 == 0
}

// keep is the lease keeper, the one goroutine that talks to the LeaseStore:
// it claims a worker id (claim, claimFixed), renews it every third of the
// TTL, switches it when the clock went back too far (never a fixed one),
// and releases it at Close. Requests wake it (signal), but never during the
// backoff after a failure: a database that is down must not get one claim
// per request.
func (g *Generator) keep() {
	backoff := 50 * time.Millisecond
	var notBefore time.Time
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-g.ctx.Done():
			g.release()
			return
		case <-timer.C:
		case <-g.keeper.wake:
			if time.Now().Before(notBefore) {
				continue // the timer still runs until notBefore
			}
		}
		next, ok := g.maintain()
		select {
		case <-g.stopped:
			return // nothing is held: there is nothing to release
		default:
		}
		if ok {
			backoff, g.keeper.failures = 50*time.Millisecond, 0
		} else {
			next = backoff/2 + mrand.N(backoff/2+1)
			// At most a tenth of the lease, and a second: once the database
			// or the clock is back, a waiting request should not time out.
			backoff = min(2*backoff, max(g.set.LeaseTTL/10, 50*time.Millisecond), time.Second)
		}
		notBefore = time.Now().Add(next)
		if ok {
			notBefore = time.Time{}
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// maintain does what the lease needs now and returns when to look again;
// ok is false after a failure. A lease due is renewed even while a switch
// is wanted, so that the generator keeps it while it waits for a free one.
func (g *Generator) maintain() (next time.Duration, ok bool) {
	g.mu.Lock()
	lease, renew, switching := g.lease.due(g.clock.lag(g.set.Now().UnixMilli(), g.set.borrowMs) > g.set.backMs, g.set.fixed)
	renewAt := g.lease.renewAt
	g.mu.Unlock()
	if lease == nil && g.set.fixed {
		return g.set.LeaseTTL / 3, g.claimFixed()
	}
	if lease == nil {
		return g.set.LeaseTTL / 3, g.claim(nil)
	}
	if renew {
		if !g.renew(*lease) {
			return 0, false
		}
		renewAt = time.Now().Add(g.set.LeaseTTL / 3)
	}
	if switching {
		return g.set.LeaseTTL / 3, g.claim(lease)
	}
	return time.Until(renewAt), true
}

// storeCtx bounds one store call, so that a hung connection leaves time
// for several attempts within one lease.
func (g *Generator) storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(g.ctx, max(g.set.LeaseTTL/10, 500*time.Millisecond))
}

// claim leases a worker id whose watermark is behind the clock and makes
// it current; old, if not nil, is released afterwards.
func (g *Generator) claim(old *Lease) bool {
	ctx, cancel := g.storeCtx()
	defer cancel()
	sent, ms := time.Now(), g.set.Now().UnixMilli()
	l, err := g.set.Leases.ClaimWorker(ctx, Claim{
		Owner: g.keeper.owner("", g.set.Owner), Workers: g.set.Layout.Workers(), TTL: g.set.LeaseTTL,
		NowMs: ms, WatermarkMs: ms + g.set.ttlMs, Layout: g.set.Layout,
	})
	if errors.Is(err, ErrLayoutMismatch) {
		// No retry can help: the record does not change by itself.
		g.stop(err)
		return false
	}
	if err != nil {
		g.fail(err, "snowflake: could not lease a worker id", "switching", old != nil)
		return false
	}
	g.install(l, old, sent, ms)
	return true
}

// install makes l, claimed at sent (monotonic) and ms (the clock), the
// current lease; old, if not nil, is released afterwards.
func (g *Generator) install(l Lease, old *Lease, sent time.Time, ms int64) {
	g.mu.Lock()
	oldLast := g.clock.lastMs
	g.lease.install(&l, ms+g.set.ttlMs, sent, g.set.LeaseTTL)
	// Nothing at or before the previous watermark may be issued under this
	// worker id. A first lease, or one after a lost lease, also starts past
	// what this server issued before, so that its IDs keep rising; a switch
	// away from a clock that went back cannot.
	from := l.PrevWatermarkMs
	if old == nil {
		from = max(from, oldLast)
	}
	g.clock.resume(from, g.set.seqMask)
	g.lastErr = nil
	g.broadcastLocked()
	g.mu.Unlock()
	g.set.Logger.Info("snowflake: leased worker id", "worker_id", l.WorkerID, "owner", l.Owner, "previous_watermark_ms", l.PrevWatermarkMs)
	if old != nil {
		g.releaseLease(*old, oldLast)
	}
}

// renew extends the lease and moves the watermark one TTL ahead.
func (g *Generator) renew(l Lease) bool {
	ctx, cancel := g.storeCtx()
	defer cancel()
	sent, wm := time.Now(), g.set.Now().UnixMilli()+g.set.ttlMs
	err := g.set.Leases.RenewWorker(ctx, l, g.set.LeaseTTL, wm)
	if errors.Is(err, ErrLeaseLost) {
		g.mu.Lock()
		g.lease.drop()
		g.lastErr = err
		g.broadcastLocked()
		g.mu.Unlock()
		g.set.Logger.Error("snowflake: the worker id lease was taken over; stopped issuing under it", "worker_id", l.WorkerID)
		return false
	}
	if err != nil {
		g.fail(err, "snowflake: renewing the worker id lease failed", "worker_id", l.WorkerID)
		return false
	}
	g.mu.Lock()
	g.lease.limitMs = max(g.lease.limitMs, wm)
	g.lease.extend(sent, g.set.LeaseTTL)
	g.lastErr = nil
	g.stats.renewals++
	g.broadcastLocked()
	g.mu.Unlock()
	return true
}

// fail records a failed store call; it logs the first of a run of failures
// and every 20th after it.
func (g *Generator) fail(err error, msg string, args ...any) {
	g.mu.Lock()
	g.lastErr = err
	g.mu.Unlock()
	if g.keeper.failed() && g.ctx.Err() == nil {
		g.set.Logger.Warn(msg, append(args, "err", err, "failures", g.keeper.failures)...)
	}
}

// release gives the lease back at Close.
func (g *Generator) release() {
	g.mu.Lock()
	lease, last := g.lease.held, g.clock.lastMs
	g.lease.held, g.lease.worker = nil, -1
	g.mu.Unlock()
	if lease != nil {
		g.releaseLease(*lease, last)
	}
}

// releaseLease ends l with the watermark last, the latest timestamp issued
// under it. It runs after the generator stopped issuing under l.
func (g *Generator) releaseLease(l Lease, last int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(g.ctx), 5*time.Second)
	defer cancel()
	if err := g.set.Leases.ReleaseWorker(ctx, l, last); err != nil {
		// The lease then simply expires; its watermark stays ahead.
		g.set.Logger.Warn("snowflake: releasing the worker id lease failed; it expires by itself", "worker_id", l.WorkerID, "err", err)
		return
	}
	g.set.Logger.Info("snowflake: released worker id", "worker_id", l.WorkerID, "watermark_ms", last)
}
