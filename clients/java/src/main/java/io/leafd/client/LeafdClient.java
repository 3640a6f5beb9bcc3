package io.leafd.client;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.net.URI;
import java.net.http.HttpClient;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import java.util.function.LongSupplier;
import java.util.regex.Pattern;

/**
 * A client of leafd's HTTP ID routes.
 *
 * <pre>{@code
 * try (LeafdClient c = LeafdClient.builder()
 *         .servers("http://leafd1:8080", "http://leafd2:8080")
 *         .token(System.getenv("LEAFD_TOKEN"))   // optional
 *         .timeout(Duration.ofSeconds(5))
 *         .localRanges(1000)                     // optional: serve IDs from leased ranges
 *         .build()) {
 *     long id = c.nextId("order");
 *     long[] ids = c.nextIds("order", 50);
 *     long sf = c.nextSnowflake();
 *     SnowflakeId d = c.decode(sf);
 * }
 * }</pre>
 *
 * <p>Every method returns IDs or throws {@link LeafdException}; never a made-up ID. The client is
 * thread-safe; share one per process.
 */
public final class LeafdClient implements AutoCloseable {
    private static final Pattern TAG = Pattern.compile("[A-Za-z0-9_.:-]{1,128}");
    private static final VarHandle HOT;

    static {
        try {
            HOT = MethodHandles.lookup().findVarHandle(LeafdClient.class, "hot", TagBuffer.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    final Duration timeout;
    final int rangeSize; // 0: no local ranges
    final long maxRangeSize;
    final int batchFallback; // 0: a tag that cannot be leased is one request per call
    final double refillAt;
    final Duration refillInterval;
    /** The longest one background fetch may take before it is failed and forgotten. */
    final Duration fetchTimeout;
    /** Runs the background fetches: at most {@link #REFILL_THREADS} at once. */
    final ExecutorService executor;
    /** Expires background fetches that outlive fetchTimeout. */
    final ScheduledExecutorService timer;
    /** HttpClient's own threads, owned by this client and stopped by close(). */
    final ExecutorService httpExecutor;
    private final Transport transport;
    final ConcurrentHashMap<String, TagBuffer> buffers = new ConcurrentHashMap<>();
    /**
     * The buffer of the tag nextId found in the map last, so that calls on one tag skip the map:
     * read as a volatile, written with release semantics (a plain store on x86, no fence) by the
     * call that missed it. Its tag is final. Null until the first lookup, and after forget.
     */
    private volatile TagBuffer hot;

    /** The most background fetches that run at once; more wait their turn. */
    static final int REFILL_THREADS = 4;
    private volatile boolean closed;
    /** Tests: told of every block fetched, before it serves. */
    volatile java.util.function.BiConsumer<String, TagBuffer.Block> onBlock;

    private LeafdClient(Builder b) {
        this.timeout = b.timeout;
        this.rangeSize = b.rangeSize;
        this.maxRangeSize = b.maxRangeSize;
        this.batchFallback = b.batchFallback;
        this.refillAt = b.refillAt;
        this.refillInterval = b.refillInterval;
        // One round over every server, each taking the whole timeout, and one more timeout.
        this.fetchTimeout = b.timeout.multipliedBy(b.servers.size() + 1L);
        this.httpExecutor = Executors.newCachedThreadPool(daemons("leafd-http-"));
        HttpClient http = HttpClient.newBuilder()
                .version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(b.timeout)
                .executor(httpExecutor)
                .build();
        this.transport = new Transport(b.servers, b.token, b.timeout, b.retryAfter, http);
        ThreadPoolExecutor pool = new ThreadPoolExecutor(REFILL_THREADS, REFILL_THREADS, 30, TimeUnit.SECONDS,
                new LinkedBlockingQueue<>(), daemons("leafd-refill-"));
        pool.allowCoreThreadTimeOut(true);
        this.executor = pool;
        ScheduledThreadPoolExecutor t = new ScheduledThreadPoolExecutor(1, daemons("leafd-timer-"));
        t.setRemoveOnCancelPolicy(true);
        this.timer = t;
    }

    private static ThreadFactory daemons(String prefix) {
        AtomicInteger n = new AtomicInteger();
        return r -> {
            Thread t = new Thread(r, prefix + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        };
    }

    public static Builder builder() {
        return new Builder();
    }

    /**
     * One ID of a segment tag. With {@link Builder#localRanges}, from memory (one atomic add)
     * most of the time; else one request, {@code GET /segment/{tag}}.
     */
    public long nextId(String tag) {
        // A tag that has a buffer was checked when the buffer was made, and is leased: the tag of
        // the last lookup compared (by reference, then by equals), and the buffer's fast path.
        // Whether the client is open is the buffer's to know (close() spends its blocks).
        TagBuffer h = hot;
        if (h != null) {
            String t = h.tag;
            if (t == tag || t.equals(tag)) {
                return h.next();
            }
        }
        return nextIdLookup(tag);
    }

    /** nextId of a tag other than the last one: the map, and the tag becomes the last one. */
    private long nextIdLookup(String tag) {
        TagBuffer b = buffers.get(tag);
        if (b != null) {
            HOT.setRelease(this, b);
            return b.next();
        }
        return nextIdFirst(tag);
    }

    /** nextId of a tag without a buffer: made now with local ranges, else one request. */
    private long nextIdFirst(String tag) {
        checkTag(tag);
        checkOpen();
        if (rangeSize > 0) {
            return buffer(tag).next();
        }
        return nextIdsDirect(tag, 1)[0];
    }

    /**
     * n IDs of a segment tag, ascending and unique. With local ranges and n at most the range
     * size, one consecutive run from memory; else one request, {@code GET /segment/{tag}?count=n}
     * (n at most the servers' {@code segment.max_batch}, default 10,000).
     */
    public long[] nextIds(String tag, int n) {
        checkTag(tag);
        if (n < 1) {
            throw new IllegalArgumentException("n must be at least 1, got " + n);
        }
        checkOpen();
        if (rangeSize > 0 && n <= rangeSize) {
            return buffer(tag).next(n);
        }
        return nextIdsDirect(tag, n);
    }

    /**
     * A supplier of the tag's IDs, for code that takes a {@link LongSupplier}. It skips the tag's
     * lookup of {@link #nextId}; it throws {@link LeafdException} as nextId does.
     */
    public LongSupplier supplier(String tag) {
        checkTag(tag);
        if (rangeSize > 0) {
            TagBuffer b = buffer(tag);
            // A closed client's blocks are spent: its claims take the slow path, which checks.
            // A lambda, not the buffer itself: callers must not be able to lock its monitor.
            return b::next;
        }
        return () -> nextId(tag);
    }

    /** One snowflake ID, {@code GET /snowflake}. Never buffered. */
    public long nextSnowflake() {
        return nextSnowflakes(1)[0];
    }

    /** n snowflake IDs, ascending, {@code GET /snowflake?count=n}. */
    public long[] nextSnowflakes(int n) {
        if (n < 1) {
            throw new IllegalArgumentException("n must be at least 1, got " + n);
        }
        checkOpen();
        String body = transport.get("/snowflake?format=json" + (n > 1 ? "&count=" + n : ""));
        return Ids.parseIds(body, n, null);
    }

    /**
     * Decodes a snowflake ID with the layout the servers are configured with,
     * {@code GET /snowflake/{id}} (the layout lives in the servers' configuration: decoding
     * locally with a guessed layout could be wrong).
     */
    public SnowflakeId decode(long id) {
        if (id <= 0) {
            throw new IllegalArgumentException("a snowflake ID is positive, got " + id);
        }
        checkOpen();
        Map<?, ?> m = Ids.object(transport.get("/snowflake/" + id));
        long got = Ids.parseId(m.get("id"), "id");
        if (got != id) {
            throw Ids.bad("decode of " + id + " answered ID " + got);
        }
        long unixMs = number(m.get("unix_ms"), "unix_ms");
        Object t = m.get("time");
        if (!(t instanceof String)) {
            throw Ids.bad("decode answer without \"time\"");
        }
        Instant time;
        try {
            time = Instant.parse((String) t);
        } catch (RuntimeException e) {
            throw Ids.bad("decode answer's time does not parse: " + t);
        }
        if (time.toEpochMilli() != unixMs) {
            throw Ids.bad("decode answer's time " + t + " is not unix_ms " + unixMs);
        }
        return new SnowflakeId(id, time, number(m.get("worker_id"), "worker_id"), number(m.get("sequence"), "sequence"));
    }

    /** The servers' base URLs, in the order given. */
    public List<String> servers() {
        return transport.bases();
    }

    /**
     * Stops the background fetches and drops the IDs held in memory: they are skipped, never
     * handed out. Later calls throw {@link LeafdException} with code {@code closed}.
     */
    @Override
    public void close() {
        closed = true;
        executor.shutdownNow();
        timer.shutdownNow();
        for (TagBuffer b : buffers.values()) {
            b.drop();
        }
        httpExecutor.shutdownNow();
    }

    boolean isClosed() {
        return closed;
    }

    void checkOpen() {
        if (closed) {
            throw new LeafdException(LeafdException.CLOSED, 0, "leafd client closed");
        }
    }

    /** Forgets a tag's buffer (after unknown_tag), so that tags that stopped existing hold no memory. */
    void forget(String tag, TagBuffer b) {
        buffers.remove(tag, b);
        // A nextId that found b in the map just before may set it again: its next fetch answers
        // unknown_tag again and forgets it again (or, should the tag exist again, it leases as
        // any buffer does: its IDs are still the servers' grant, never handed out twice).
        HOT.compareAndSet(this, b, null);
    }

    private TagBuffer buffer(String tag) {
        TagBuffer b = buffers.get(tag);
        if (b == null) {
            b = buffers.computeIfAbsent(tag, t -> new TagBuffer(this, t));
        }
        return b;
    }

    long[] nextIdsDirect(String tag, int n) {
        String body = transport.get("/segment/" + tag + "?format=json" + (n > 1 ? "&count=" + n : ""));
        return Ids.parseIds(body, n, tag);
    }

    /**
     * A GET of a background fetch: up to 3 rounds over the servers, 50 ms then 100 ms apart,
     * while the failures are retryable and the deadline (a System.nanoTime()) has not passed;
     * every failure is told to onError. Safe: a server never issues an ID twice, so a failed
     * request can only lose IDs.
     */
    String getWithRetry(String path, long deadline, Consumer<LeafdException> onError) {
        long pause = 50;
        for (int round = 1; ; round++) {
            try {
                return transport.get(path);
            } catch (LeafdException e) {
                onError.accept(e);
                if (!e.retryable() || round == 3 || closed || deadline - System.nanoTime() - pause * 1_000_000L <= 0) {
                    throw e;
                }
            }
            try {
                Thread.sleep(pause);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new LeafdException(LeafdException.INTERRUPTED, 0, "interrupted");
            }
            pause *= 2;
        }
    }

    private static void checkTag(String tag) {
        Objects.requireNonNull(tag, "tag");
        if (!TAG.matcher(tag).matches() || tag.chars().allMatch(c -> c == '.')) {
            throw new LeafdException("invalid_tag", 400,
                    "tag " + tag + " is not valid: use 1 to 128 of A-Z a-z 0-9 _ . : - (not dots only)");
        }
    }

    private static long number(Object v, String what) {
        if (!(v instanceof Json.Num)) {
            throw Ids.bad("\"" + what + "\" is not a number: " + v);
        }
        try {
            return Long.parseLong(((Json.Num) v).text);
        } catch (NumberFormatException e) {
            throw Ids.bad("\"" + what + "\" is not a whole number: " + v);
        }
    }

    /** Settings of a {@link LeafdClient}. */
    public static final class Builder {
        private List<String> servers = new ArrayList<>();
        private String token;
        private Duration timeout = Duration.ofSeconds(5);
        private Duration retryAfter = Duration.ofSeconds(5);
        private int rangeSize;
        private long maxRangeSize = 250_000;
        private int batchFallback;
        private double refillAt = 0.2;
        private Duration refillInterval = Duration.ofSeconds(10);

        private Builder() {}

        /** Base URLs of servers on one database, such as {@code http://leafd1:8080}; asked in turn. */
        public Builder servers(String... urls) {
            return servers(Arrays.asList(urls));
        }

        public Builder servers(List<String> urls) {
            List<String> l = new ArrayList<>();
            for (String u : urls) {
                URI uri;
                try {
                    uri = URI.create(u);
                } catch (IllegalArgumentException e) {
                    throw new IllegalArgumentException("server URL " + u + " is not valid", e);
                }
                if (!("http".equals(uri.getScheme()) || "https".equals(uri.getScheme())) || uri.getHost() == null
                        || uri.getRawQuery() != null || uri.getRawFragment() != null) {
                    throw new IllegalArgumentException("server URL " + u
                            + " is not valid: use an absolute http or https URL without a query, such as http://leafd:8080");
                }
                String s = u;
                while (s.endsWith("/")) {
                    s = s.substring(0, s.length() - 1);
                }
                l.add(s);
            }
            this.servers = l;
            return this;
        }

        /** An access token ({@code leafd token add}), sent as {@code Authorization: Bearer}. */
        public Builder token(String token) {
            if (token != null && (token.indexOf('\r') >= 0 || token.indexOf('\n') >= 0)) {
                throw new IllegalArgumentException("token must not hold a CR or LF");
            }
            this.token = token == null || token.isEmpty() ? null : token;
            return this;
        }

        /**
         * The time one request may take (connection, headers and body), and the longest a call
         * waits for IDs; default 5 s, longer than the servers' {@code segment.wait_timeout}
         * (default 2 s), so that their 503 {@code segment_unavailable} reaches the caller.
         */
        public Builder timeout(Duration timeout) {
            if (timeout == null || timeout.isNegative() || timeout.isZero()) {
                throw new IllegalArgumentException("timeout must be positive");
            }
            this.timeout = timeout;
            return this;
        }

        /** How long a server that could not be reached is passed over; default 5 s. */
        public Builder retryAfter(Duration d) {
            if (d == null || d.isNegative()) {
                throw new IllegalArgumentException("retryAfter must not be negative");
            }
            this.retryAfter = d;
            return this;
        }

        /**
         * Serve segment IDs from memory: lease ranges of consecutive IDs per tag, starting at
         * {@code initialSize} IDs and growing (up to {@link #maxRangeSize}) so that one range lasts
         * about {@link #refillInterval}. Tags the servers do not lease ranges of (opaque, dated:
         * this client does not track a range's validity, so it does not ask for ranges that
         * expire, any tag of a sharded store) are served by one request per call, unless
         * {@link #batchFallback} is set. 0, the default, is off.
         */
        public Builder localRanges(int initialSize) {
            if (initialSize < 0) {
                throw new IllegalArgumentException("localRanges size must not be negative");
            }
            this.rangeSize = initialSize;
            return this;
        }

        /**
         * The largest range asked for; default 250,000, a quarter of the servers' default
         * {@code segment.max_step}. A size the servers refuse ({@code invalid_size}, above their
         * {@code segment.max_range}) caps that tag's ranges at the largest size that worked, or
         * half the refused one.
         */
        public Builder maxRangeSize(long n) {
            if (n < 1) {
                throw new IllegalArgumentException("maxRangeSize must be at least 1");
            }
            this.maxRangeSize = n;
            return this;
        }

        /**
         * With {@link #localRanges}, serve a tag the servers do not lease ranges of
         * ({@code range_unsupported}) from batches of at most {@code maxBatch} IDs,
         * {@code GET /segment/{tag}?count=N}, held in memory like leases. Off (0) by default: such
         * a tag is one request per call. Do not set it for clients of dated tags: a batch fetched
         * before the end of a period is handed out after it, with the old period's numbers.
         * {@code invalid_count} (above the servers' {@code segment.max_batch}, default 10,000)
         * caps the batches as {@code invalid_size} caps ranges.
         */
        public Builder batchFallback(int maxBatch) {
            if (maxBatch < 0) {
                throw new IllegalArgumentException("batchFallback must not be negative");
            }
            this.batchFallback = maxBatch;
            return this;
        }

        /** The fraction of a range left when the next one is fetched; default 0.2. */
        public Builder refillAt(double f) {
            if (!(f > 0 && f < 1)) {
                throw new IllegalArgumentException("refillAt must be between 0 and 1");
            }
            this.refillAt = f;
            return this;
        }

        /** How long one range should last; range sizes double or halve toward it; default 10 s. */
        public Builder refillInterval(Duration d) {
            if (d == null || d.isNegative() || d.isZero()) {
                throw new IllegalArgumentException("refillInterval must be positive");
            }
            this.refillInterval = d;
            return this;
        }

        public LeafdClient build() {
            if (servers.isEmpty()) {
                throw new IllegalArgumentException("no servers: give at least one base URL");
            }
            if (rangeSize > maxRangeSize) {
                throw new IllegalArgumentException("localRanges " + rangeSize + " is above maxRangeSize " + maxRangeSize);
            }
            return new LeafdClient(this);
        }
    }
}
