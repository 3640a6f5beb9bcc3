package io.leafd.client;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * One tag's IDs in memory: the current block and the next one (a double buffer). A block is a
 * range lease [start, end) from {@code GET /segment/{tag}/range}, or, for a tag the servers do not
 * lease ranges of and only with {@link LeafdClient.Builder#batchFallback}, a batch from
 * {@code GET /segment/{tag}?count=N}. An ID is claimed with one atomic add on the current block;
 * the next block is fetched in the background once no more than {@code refillAt} of the current
 * one is left. A tag that cannot be leased, without batchFallback, is served by one request per
 * call.
 */
final class TagBuffer {
    /**
     * A run of IDs: start + i for a lease, ids[i] for a batch. IDs are claimed by index with one
     * atomic add on the block's own field (no AtomicLong to follow).
     */
    static final class Block {
        private static final VarHandle NEXT;

        static {
            try {
                NEXT = MethodHandles.lookup().findVarHandle(Block.class, "next", long.class);
            } catch (ReflectiveOperationException e) {
                throw new ExceptionInInitializerError(e);
            }
        }

        final long start;
        final long[] ids; // null for a lease
        final long size;
        final long mark; // the index whose claim starts the next fetch
        /** Below it a claim is start + index, nothing else to do: the mark of a lease, 0 for a batch. */
        final long fast;
        /** The next index to claim; only through claim, claimed and spend. */
        private volatile long next;

        Block(long start, long[] ids, long size, double refillAt) {
            this.start = start;
            this.ids = ids;
            this.size = size;
            long left = (long) Math.ceil(size * refillAt);
            this.mark = Math.max(0, size - Math.max(1, left));
            this.fast = ids == null ? mark : 0;
        }

        /** Claims n indexes: returns the first; the claim holds only when it ends at or below size. */
        long claim(long n) {
            return (long) NEXT.getAndAdd(this, n);
        }

        long claimed() {
            return next;
        }

        /** No claim succeeds after this. */
        void spend() {
            next = SPENT;
        }

        long at(long i) {
            long[] a = ids;
            return a == null ? start + i : a[(int) i];
        }
    }

    static final Block EMPTY = new Block(0, new long[0], 0, 0);
    /** A claim index no block reaches: set on close so that no claim succeeds after it. */
    private static final long SPENT = Long.MAX_VALUE / 2;

    final String tag;
    private final LeafdClient client;

    volatile Block current = EMPTY;
    // Guarded by this.
    private Block pending;
    private CompletableFuture<Block> inflight;
    /** Whether a fetch is in flight or a block is pending: read without the lock past the mark. */
    private volatile boolean busy;
    /** nanoTime before which a background fetch is not started; 0 = none. */
    private volatile long backoffUntil;
    private long backoffNanos;
    /** The size of the next fetch: grown or shrunk toward the target refill interval. */
    private long size;
    private long lastFetchNanos;
    /** nanoTime until which ranges are not asked for: 0 = ask; Long.MAX_VALUE = never. */
    private long rangesOffUntil;
    /** nanoTime until which calls are one request each (ranges off, no batchFallback); 0 = not. */
    private volatile long directUntil;
    /** The largest range / batch the servers took; 0 = not known yet. */
    private long rangeOk;
    private long batchOk;
    /** The size the servers' max_range / max_batch refused the last was above: Long.MAX_VALUE = none. */
    private long rangeCap = Long.MAX_VALUE;
    private long batchCap = Long.MAX_VALUE;
    /** The last error of the fetch in flight (any round, any server), for a caller that gives up. */
    private volatile LeafdException lastError;

    TagBuffer(LeafdClient client, String tag) {
        this.client = client;
        this.tag = tag;
        this.size = client.rangeSize;
    }

    /**
     * One ID: the fast path is one volatile read of the current block, one atomic add on it, one
     * comparison and one addition, small enough to be inlined into the caller. Whether the client
     * is open is not read here: close() spends every block before it returns, so that a closed
     * client's claims all take the slow path, which checks.
     */
    long next() {
        Block b = current;
        long i = b.claim(1);
        if (i < b.fast) {
            return b.start + i;
        }
        return pastFast(b, i);
    }

    /**
     * A claim the fast path does not serve: at or past the mark (start the next fetch), past the
     * end (the slow path), or any claim of a batch.
     */
    private long pastFast(Block b, long i) {
        if (i < b.size) {
            if (i >= b.mark && (i == b.mark || refillWanted())) {
                refillInBackground();
            }
            return b.at(i);
        }
        return slow(1)[0];
    }

    /** n IDs, ascending, consecutive within one block; n at most the block size. */
    long[] next(int n) {
        Block b = current;
        long i = b.claim(n);
        if (i + n <= b.size) {
            if (i + n > b.mark && ((i <= b.mark) || refillWanted())) {
                refillInBackground();
            }
            return copy(b, i, n);
        }
        return slow(n);
    }

    /**
     * Past the mark of the current block with no fetch in flight and no block pending: the fetch
     * started at the mark failed; start another once its backoff has passed.
     */
    private boolean refillWanted() {
        if (busy) {
            return false;
        }
        long u = backoffUntil;
        return u == 0 || u - System.nanoTime() <= 0;
    }

    private static long[] copy(Block b, long i, int n) {
        long[] out = new long[n];
        for (int k = 0; k < n; k++) {
            out[k] = b.at(i + k);
        }
        return out;
    }

    private boolean isDirect() {
        long d = directUntil;
        return d != 0 && (d == Long.MAX_VALUE || d - System.nanoTime() > 0);
    }

    private long[] slow(int n) {
        long deadline = System.nanoTime() + client.timeout.toNanos();
        while (true) {
            client.checkOpen();
            if (isDirect()) {
                return client.nextIdsDirect(tag, n);
            }
            CompletableFuture<Block> wait;
            synchronized (this) {
                Block b = current;
                long i = b.claim(n);
                if (i + n <= b.size) {
                    if (i + n > b.mark) {
                        startFetchLocked(false);
                    }
                    return copy(b, i, n);
                }
                // The rest of the current block is too short: it is skipped (IDs lost, never
                // handed out twice).
                if (pending != null) {
                    current = pending;
                    pending = null;
                    busy = inflight != null;
                    if (current.claimed() >= current.mark) {
                        startFetchLocked(false);
                    }
                    continue;
                }
                wait = startFetchLocked(true);
            }
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                throw gaveUp();
            }
            try {
                wait.get(left, TimeUnit.NANOSECONDS);
            } catch (ExecutionException e) {
                if (isDirect()) {
                    continue; // range_unsupported: this call and the next are direct requests
                }
                Throwable c = e.getCause();
                if (c instanceof LeafdException) {
                    LeafdException le = (LeafdException) c;
                    throw new LeafdException(le.code(), le.status(), le.getMessage(), le);
                }
                throw new LeafdException(LeafdException.BAD_ANSWER, 0, "fetch of tag " + tag + ": " + c, c);
            } catch (TimeoutException e) {
                throw gaveUp();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new LeafdException(LeafdException.INTERRUPTED, 0, "interrupted waiting for tag " + tag);
            }
        }
    }

    /**
     * The error of a call that waited its timeout for a fetch: the fetch's last error when it had
     * one (a server's 503 segment_unavailable, say), else unreachable.
     */
    private LeafdException gaveUp() {
        String msg = "no IDs of tag " + tag + " within " + client.timeout.toMillis() + " ms";
        LeafdException e = lastError;
        if (e != null) {
            return new LeafdException(e.code(), e.status(), msg + "; last error: " + e.getMessage(), e);
        }
        return new LeafdException(LeafdException.UNREACHABLE, 0, msg);
    }

    private void refillInBackground() {
        synchronized (this) {
            startFetchLocked(false);
        }
    }

    /**
     * Starts the fetch of the next block unless one is in flight or a block is pending, and
     * returns the fetch in flight. A background start (waiting false) respects the backoff after
     * a failed fetch; a caller that waits does not.
     */
    private CompletableFuture<Block> startFetchLocked(boolean waiting) {
        if (inflight != null) {
            return inflight;
        }
        if (pending != null) {
            return CompletableFuture.completedFuture(pending);
        }
        if (!waiting && backoffUntil != 0 && backoffUntil - System.nanoTime() > 0) {
            return null;
        }
        CompletableFuture<Block> f = new CompletableFuture<>();
        inflight = f;
        busy = true;
        lastError = null;
        long deadline = System.nanoTime() + client.fetchTimeout.toNanos();
        try {
            client.executor.execute(() -> runFetch(f, deadline));
            // The fetch's own deadline: a fetch that is stuck past it is failed and forgotten,
            // so that the next call starts another.
            client.timer.schedule(() -> expire(f), client.fetchTimeout.toNanos(), TimeUnit.NANOSECONDS);
        } catch (RuntimeException e) { // executor shut down: closed
            inflight = null;
            busy = pending != null;
            f.completeExceptionally(new LeafdException(LeafdException.CLOSED, 0, "leafd client closed"));
        }
        return f;
    }

    private void expire(CompletableFuture<Block> f) {
        LeafdException e;
        synchronized (this) {
            if (inflight != f) {
                return;
            }
            inflight = null;
            busy = pending != null;
            backOffLocked();
            LeafdException last = lastError;
            String msg = "fetch of tag " + tag + " took more than " + client.fetchTimeout.toMillis() + " ms";
            e = last != null
                    ? new LeafdException(last.code(), last.status(), msg + "; last error: " + last.getMessage(), last)
                    : new LeafdException(LeafdException.UNREACHABLE, 0, msg);
        }
        f.completeExceptionally(e);
    }

    private void backOffLocked() {
        backoffNanos = backoffNanos == 0 ? 50_000_000L : Math.min(backoffNanos * 2, 5_000_000_000L);
        long u = System.nanoTime() + backoffNanos;
        backoffUntil = u == 0 ? 1 : u;
    }

    private void runFetch(CompletableFuture<Block> f, long deadline) {
        Block b = null;
        Throwable err = null;
        try {
            b = fetch(deadline);
            java.util.function.BiConsumer<String, Block> l = client.onBlock;
            if (l != null) {
                l.accept(tag, b);
            }
        } catch (Throwable t) {
            err = t;
        }
        boolean unknown = false;
        synchronized (this) {
            if (inflight != f) {
                return; // expired or dropped: a block fetched late is skipped (IDs lost, never twice)
            }
            inflight = null;
            if (err == null && !client.isClosed()) {
                pending = b;
                backoffUntil = 0;
                backoffNanos = 0;
            } else if (err != null) {
                backOffLocked();
                if (err instanceof LeafdException && "unknown_tag".equals(((LeafdException) err).code())) {
                    current = EMPTY; // the tag stopped existing: drop what is left of it
                    pending = null;
                    unknown = true;
                }
            }
            busy = pending != null;
        }
        if (unknown) {
            client.forget(tag, this);
        }
        if (err != null) {
            f.completeExceptionally(err);
        } else {
            f.complete(b);
        }
    }

    /** Fetches one block: a range lease, or a batch for a tag that cannot be leased. */
    private Block fetch(long deadline) {
        long n;
        boolean ranges;
        synchronized (this) {
            long now = System.nanoTime();
            if (lastFetchNanos != 0) {
                long took = now - lastFetchNanos;
                long target = client.refillInterval.toNanos();
                if (took < target / 2) {
                    size = Math.min(size * 2, client.maxRangeSize);
                } else if (took > target * 2) {
                    size = Math.max(size / 2, client.rangeSize);
                }
            }
            lastFetchNanos = now;
            ranges = rangesOffUntil == 0 || (rangesOffUntil != Long.MAX_VALUE && rangesOffUntil - now <= 0);
        }
        while (ranges) {
            synchronized (this) {
                size = Math.min(size, rangeCap);
                n = size;
            }
            try {
                String body = client.getWithRetry("/segment/" + tag + "/range?size=" + n, deadline, this::noteError);
                long[] r = Ids.parseRange(body, tag, n);
                synchronized (this) {
                    rangeOk = Math.max(rangeOk, n);
                }
                return new Block(r[0], null, r[1] - r[0], client.refillAt);
            } catch (LeafdException e) {
                if ("invalid_size".equals(e.code())) {
                    shrink(true, n, e); // above the servers' max_range: ask again at once, smaller
                    continue;
                }
                if ("range_unsupported".equals(e.code())) {
                    synchronized (this) {
                        rangesOffUntil = Long.MAX_VALUE; // opaque, dated or sharded: for good
                        if (client.batchFallback == 0) {
                            directUntil = Long.MAX_VALUE;
                            throw e;
                        }
                    }
                } else if ("not_found".equals(e.code())) {
                    synchronized (this) { // a server without the range route: ask again in a minute
                        long u = System.nanoTime() + 60_000_000_000L;
                        rangesOffUntil = (u == 0 || u == Long.MAX_VALUE) ? 1 : u;
                        if (client.batchFallback == 0) {
                            directUntil = rangesOffUntil;
                            throw e;
                        }
                    }
                } else {
                    throw e;
                }
                ranges = false;
            }
        }
        while (true) {
            int count;
            synchronized (this) {
                count = (int) Math.min(Math.min(size, client.batchFallback), batchCap);
            }
            try {
                String body = client.getWithRetry("/segment/" + tag + "?format=json&count=" + count, deadline,
                        this::noteError);
                long[] ids = Ids.parseIds(body, count, tag);
                synchronized (this) {
                    batchOk = Math.max(batchOk, count);
                }
                return new Block(0, ids, ids.length, client.refillAt);
            } catch (LeafdException e) {
                if (!"invalid_count".equals(e.code())) {
                    throw e;
                }
                shrink(false, count, e); // above the servers' max_batch
            }
        }
    }

    private void noteError(LeafdException e) {
        lastError = e;
    }

    /**
     * After a size the servers refused: cap the tag's size at the largest that worked below it,
     * or at half of it, and fetch again at once; a size of 1 refused is the error.
     */
    private synchronized void shrink(boolean range, long refused, LeafdException e) {
        long ok = range ? rangeOk : batchOk;
        long cap = ok > 0 && ok < refused ? ok : refused / 2;
        if (cap < 1) {
            throw e;
        }
        if (range) {
            rangeCap = cap;
        } else {
            batchCap = cap;
        }
        size = Math.min(size, cap);
    }

    /**
     * Drops the blocks held: their IDs are skipped, never handed out, and no claim on them
     * succeeds once this returns.
     */
    synchronized void drop() {
        current.spend();
        if (pending != null) {
            pending.spend();
        }
        current = EMPTY;
        pending = null;
        busy = false;
        if (inflight != null) {
            inflight.completeExceptionally(new LeafdException(LeafdException.CLOSED, 0, "leafd client closed"));
            inflight = null;
        }
    }
}
