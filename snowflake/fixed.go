package snowflake

import (
	"errors"
	"fmt"
	"time"
)

// claimFixed leases the fixed worker id, as claim leases any. At the first
// claim, a worker id held by another server or recorded more than a lease
// ahead stops the generator for good (see Done); after a lost lease the
// keeper keeps trying. Another layout recorded stops it at any claim.
func (g *Generator) claimFixed() bool {
	ctx, cancel := g.storeCtx()
	defer cancel()
	sent, ms := time.Now(), g.set.Now().UnixMilli()
	l, err := g.set.Leases.ClaimFixedWorker(ctx, FixedClaim{
		WorkerID: g.set.WorkerID, Owner: g.keeper.owner(FixedOwnerPrefix, g.set.Owner),
		TTL: g.set.LeaseTTL, NowMs: ms, WatermarkMs: ms + g.set.ttlMs, Layout: g.set.Layout,
	})
	if err != nil {
		g.mu.Lock()
		first := g.lease.installs == 0
		g.mu.Unlock()
		var (
			held  *HeldError
			ahead *WatermarkAheadError
		)
		switch {
		case errors.Is(err, ErrLayoutMismatch):
			g.stop(err)
			return false
		case first && errors.As(err, &held):
			g.stop(fmt.Errorf("snowflake.worker_id %d cannot be used: %w: another server runs with this worker id; "+
				"give each server its own, or use auto (a server that crashed holds it until its lease ends)", g.set.WorkerID, err))
			return false
		case first && errors.As(err, &ahead) && ahead.WatermarkMs-ahead.NowMs > g.set.ttlMs:
			g.stop(fmt.Errorf("snowflake.worker_id %d cannot be used: %w: this server's clock is behind; "+
				"set it right, or use auto", g.set.WorkerID, err))
			return false
		}
		g.fail(err, "snowflake: could not lease the fixed worker id", "worker_id", g.set.WorkerID)
		return false
	}
	g.install(l, nil, sent, ms)
	return true
}

// stop gives up for good: requests fail, and Done is closed.
func (g *Generator) stop(err error) {
	g.mu.Lock()
	g.fatal, g.lastErr = err, err
	g.broadcastLocked()
	g.mu.Unlock()
	if g.set.fixed {
		g.set.Logger.Error("snowflake: "+err.Error(), "worker_id", g.set.WorkerID)
	} else {
		g.set.Logger.Error("snowflake: " + err.Error())
	}
	close(g.stopped)
}
