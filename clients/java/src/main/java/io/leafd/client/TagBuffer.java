package io.leafd.client;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One tag's IDs in memory: the current block and the next one (a double buffer). A block is a
 * range lease [start, end) from {@code GET /segment/{tag}/range}, or, for a tag the servers do not
 * lease ranges of, a batch from {@code GET /segment/{tag}?count=N}. An ID is claimed with one
 * atomic add on the current block; the next block is fetched in the background once no more than
 * {@code refillAt} of the current one is left.
 */
final class TagBuffer {
    /** A run of IDs: start + i for a lease, ids[i] for a batch. */
    static final class Block {
        final long start;
        final long[] ids; // null for a lease
        final long size;
        final long mark; // the index whose claim starts the next fetch
        final AtomicLong next = new AtomicLong();

        Block(long start, long[] ids, long size, double refillAt) {
            this.start = start;
            this.ids = ids;
            this.size = size;
            long left = (long) Math.ceil(size * refillAt);
            this.mark = Math.max(0, size - Math.max(1, left));
        }

        long at(long i) {
            return ids == null ? start + i : ids[(int) i];
        }
    }

    static final Block EMPTY = new Block(0, new long[0], 0, 0);

    final String tag;
    private final LeafdClient client;

    volatile Block current = EMPTY;
    // Guarded by this.
    private Block pending;
    private CompletableFuture<Block> inflight;
    private long backoffUntil; // nanoTime before which a background fetch is not started
    private long backoffNanos;
    /** The size of the next fetch: grown or shrunk toward the target refill interval. */
    private long size;
    private long lastFetchNanos;
    /** nanoTime until which ranges are not asked for: 0 = ask; Long.MAX_VALUE = never. */
    private long rangesOffUntil;

    TagBuffer(LeafdClient client, String tag) {
        this.client = client;
        this.tag = tag;
        this.size = client.rangeSize;
    }

    /** One ID: the fast path is one atomic add. */
    long next() {
        Block b = current;
        long i = b.next.getAndIncrement();
        if (i < b.size) {
            if (i == b.mark) {
                refillInBackground();
            }
            return b.at(i);
        }
        return slow(1)[0];
    }

    /** n IDs, ascending, consecutive within one block; n at most the block size. */
    long[] next(int n) {
        Block b = current;
        long i = b.next.getAndAdd(n);
        if (i + n <= b.size) {
            if (i <= b.mark && b.mark < i + n) {
                refillInBackground();
            }
            return copy(b, i, n);
        }
        return slow(n);
    }

    private static long[] copy(Block b, long i, int n) {
        long[] out = new long[n];
        for (int k = 0; k < n; k++) {
            out[k] = b.at(i + k);
        }
        return out;
    }

    private long[] slow(int n) {
        long deadline = System.nanoTime() + client.timeout.toNanos();
        while (true) {
            client.checkOpen();
            CompletableFuture<Block> wait;
            synchronized (this) {
                Block b = current;
                long i = b.next.getAndAdd(n);
                if (i + n <= b.size) {
                    if (i <= b.mark && b.mark < i + n) {
                        startFetchLocked(false);
                    }
                    return copy(b, i, n);
                }
                // The rest of the current block is too short: it is skipped (IDs lost, never
                // handed out twice).
                if (pending != null) {
                    current = pending;
                    pending = null;
                    if (current.next.get() >= current.mark) {
                        startFetchLocked(false);
                    }
                    continue;
                }
                wait = startFetchLocked(true);
            }
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                throw new LeafdException(LeafdException.UNREACHABLE, 0,
                        "no IDs of tag " + tag + " within " + client.timeout.toMillis() + " ms");
            }
            try {
                wait.get(left, TimeUnit.NANOSECONDS);
            } catch (ExecutionException e) {
                Throwable c = e.getCause();
                if (c instanceof LeafdException) {
                    LeafdException le = (LeafdException) c;
                    throw new LeafdException(le.code(), le.status(), le.getMessage(), le);
                }
                throw new LeafdException(LeafdException.BAD_ANSWER, 0, "fetch of tag " + tag + ": " + c, c);
            } catch (TimeoutException e) {
                throw new LeafdException(LeafdException.UNREACHABLE, 0,
                        "no IDs of tag " + tag + " within " + client.timeout.toMillis() + " ms");
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new LeafdException(LeafdException.INTERRUPTED, 0, "interrupted waiting for tag " + tag);
            }
        }
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
        try {
            client.executor.execute(() -> runFetch(f));
        } catch (RuntimeException e) { // executor shut down: closed
            inflight = null;
            f.completeExceptionally(new LeafdException(LeafdException.CLOSED, 0, "leafd client closed"));
        }
        return f;
    }

    private void runFetch(CompletableFuture<Block> f) {
        Block b = null;
        Throwable err = null;
        try {
            b = fetch();
            java.util.function.BiConsumer<String, Block> l = client.onBlock;
            if (l != null) {
                l.accept(tag, b);
            }
        } catch (Throwable t) {
            err = t;
        }
        synchronized (this) {
            inflight = null;
            if (err == null && !client.isClosed()) {
                pending = b;
                backoffUntil = 0;
                backoffNanos = 0;
            } else if (err != null) {
                backoffNanos = backoffNanos == 0 ? 50_000_000L : Math.min(backoffNanos * 2, 5_000_000_000L);
                long u = System.nanoTime() + backoffNanos;
                backoffUntil = u == 0 ? 1 : u;
                if (err instanceof LeafdException && "unknown_tag".equals(((LeafdException) err).code())) {
                    current = EMPTY; // the tag stopped existing: drop what is left of it
                }
            }
        }
        if (err != null) {
            f.completeExceptionally(err);
        } else {
            f.complete(b);
        }
    }

    /** Fetches one block: a range lease, or a batch for a tag that cannot be leased. */
    private Block fetch() {
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
            n = size;
            ranges = rangesOffUntil == 0 || (rangesOffUntil != Long.MAX_VALUE && rangesOffUntil - now <= 0);
        }
        if (ranges) {
            try {
                String body = client.getWithRetry("/segment/" + tag + "/range?size=" + n);
                long[] r = Ids.parseRange(body, tag, n);
                return new Block(r[0], null, r[1] - r[0], client.refillAt);
            } catch (LeafdException e) {
                if ("range_unsupported".equals(e.code())) {
                    synchronized (this) {
                        rangesOffUntil = Long.MAX_VALUE; // opaque, dated or sharded: for good
                    }
                } else if ("not_found".equals(e.code())) {
                    synchronized (this) { // a server without the range route: ask again in a minute
                        long u = System.nanoTime() + 60_000_000_000L;
                        rangesOffUntil = (u == 0 || u == Long.MAX_VALUE) ? 1 : u;
                    }
                } else {
                    throw e;
                }
            }
        }
        int count = (int) Math.min(n, client.maxBatch);
        String body = client.getWithRetry("/segment/" + tag + "?format=json&count=" + count);
        long[] ids = Ids.parseIds(body, count, tag);
        return new Block(0, ids, ids.length, client.refillAt);
    }

    /** Drops the blocks held: their IDs are skipped, never handed out. */
    synchronized void drop() {
        current = EMPTY;
        pending = null;
        if (inflight != null) {
            inflight.completeExceptionally(new LeafdException(LeafdException.CLOSED, 0, "leafd client closed"));
            inflight = null;
        }
    }
}
