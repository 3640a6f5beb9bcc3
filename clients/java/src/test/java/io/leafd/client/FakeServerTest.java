package io.leafd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The client against fake servers that stall, fail or answer oddly. */
class FakeServerTest {
    /** What a fake server does with one request. */
    interface Handler {
        void handle(Fake self, HttpExchange ex, int n) throws IOException, InterruptedException;
    }

    /** A fake HTTP server on a free loopback port; counts the requests. */
    static final class Fake implements AutoCloseable {
        final HttpServer http;
        final AtomicInteger requests = new AtomicInteger();
        final CountDownLatch released = new CountDownLatch(1);
        private final ExecutorService pool = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "fake-leafd");
            t.setDaemon(true);
            return t;
        });

        Fake(Handler h) throws IOException {
            http = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 50);
            http.setExecutor(pool);
            http.createContext("/", ex -> {
                try {
                    h.handle(this, ex, requests.incrementAndGet());
                } catch (InterruptedException | IOException e) {
                    // the client went away, or the server is closing
                } finally {
                    ex.close();
                }
            });
            http.start();
        }

        String url() {
            return "http://127.0.0.1:" + http.getAddress().getPort();
        }

        /** Headers of a 200 and "{", then nothing until the server is closed. */
        void stall(HttpExchange ex) throws IOException, InterruptedException {
            ex.getResponseHeaders().set("Content-Type", "application/json");
            ex.sendResponseHeaders(200, 0);
            OutputStream o = ex.getResponseBody();
            o.write('{');
            o.flush();
            released.await();
        }

        @Override
        public void close() {
            released.countDown();
            http.stop(0);
            pool.shutdownNow();
        }
    }

    static void answer(HttpExchange ex, int status, String body) throws IOException {
        byte[] b = body.getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", "application/json");
        ex.sendResponseHeaders(status, b.length);
        ex.getResponseBody().write(b);
    }

    /** A range answer for a request of /segment/{tag}/range?size=N, from a counter of its own. */
    static void range(HttpExchange ex, AtomicLong next) throws IOException {
        String path = ex.getRequestURI().getPath();
        String tag = path.substring("/segment/".length(), path.length() - "/range".length());
        long size = Long.parseLong(ex.getRequestURI().getQuery().replaceAll(".*size=([0-9]+).*", "$1"));
        long start = next.getAndAdd(size);
        answer(ex, 200, "{\"tag\":\"" + tag + "\",\"start\":\"" + start + "\",\"end\":\"" + (start + size) + "\"}");
    }

    static void unavailable(HttpExchange ex) throws IOException {
        answer(ex, 503, "{\"error\":{\"code\":\"segment_unavailable\",\"message\":\"no range within 2s\"}}");
    }

    static void snowflake(HttpExchange ex, long id) throws IOException {
        answer(ex, 200, "{\"ids\":[\"" + id + "\"]}");
    }

    private final List<AutoCloseable> open = new ArrayList<>();

    private Fake fake(Handler h) throws IOException {
        Fake f = new Fake(h);
        open.add(f);
        return f;
    }

    @AfterEach
    void closeAll() throws Exception {
        for (AutoCloseable c : open) {
            c.close();
        }
        open.clear();
    }

    static void waitFor(String what, BooleanSupplier cond) throws InterruptedException {
        long end = System.nanoTime() + 10_000_000_000L;
        while (!cond.getAsBoolean()) {
            assertTrue(System.nanoTime() < end, "not within 10 s: " + what);
            Thread.sleep(10);
        }
    }

    /**
     * A range that expires (valid_ms, a dated tag's) is never handed out: the client skips it and
     * serves the tag from batches from then on, asking for no more ranges of it.
     */
    @Test
    void expiringRangeIsNotUsed() throws Exception {
        AtomicInteger rangeRequests = new AtomicInteger();
        AtomicLong batches = new AtomicLong(20261127000500L);
        Fake f = fake((self, ex, n) -> {
            String path = ex.getRequestURI().getPath();
            if (path.endsWith("/range")) {
                rangeRequests.incrementAndGet();
                answer(ex, 200, "{\"tag\":\"daily\",\"start\":\"20261127000001\",\"end\":\"20261127000011\",\"valid_ms\":5}");
                return;
            }
            String q = ex.getRequestURI().getQuery();
            int count = q == null ? 1 : Integer.parseInt(q.replaceAll(".*count=([0-9]+).*", "$1"));
            StringBuilder b = new StringBuilder("{\"tag\":\"daily\",\"ids\":[");
            for (int i = 0; i < count; i++) {
                b.append(i == 0 ? "" : ",").append('"').append(batches.getAndIncrement()).append('"');
            }
            answer(ex, 200, b.append("]}").toString());
        });
        try (LeafdClient c = LeafdClient.builder().servers(f.url()).timeout(Duration.ofMillis(500))
                .localRanges(10).batchFallback(5).build()) {
            for (int k = 0; k < 20; k++) {
                long id = c.nextId("daily");
                assertTrue(id >= 20261127000500L, "ID " + id + " of the expiring range was handed out");
            }
            assertEquals(1, rangeRequests.get(), "ranges asked for again after one that expires");
        }
    }

    @Test
    void stalledBodyIsUnreachable() throws Exception {
        AtomicLong ranges = new AtomicLong(1);
        java.util.concurrent.atomic.AtomicBoolean stalling = new java.util.concurrent.atomic.AtomicBoolean(true);
        Fake f = fake((self, ex, n) -> {
            if (stalling.get()) {
                self.stall(ex);
            } else {
                range(ex, ranges);
            }
        });
        assertTimeoutPreemptively(Duration.ofSeconds(30), () -> {
            try (LeafdClient c = LeafdClient.builder().servers(f.url()).timeout(Duration.ofMillis(500)).build()) {
                long t0 = System.nanoTime();
                LeafdException e = assertThrows(LeafdException.class, c::nextSnowflake);
                assertEquals(LeafdException.UNREACHABLE, e.code());
                assertTrue(System.nanoTime() - t0 < 5_000_000_000L, "the stalled answer was given up");
            }
            try (LeafdClient c = LeafdClient.builder().servers(f.url()).timeout(Duration.ofMillis(500))
                    .localRanges(10).build()) {
                LeafdException e = assertThrows(LeafdException.class, () -> c.nextId("t"));
                assertEquals(LeafdException.UNREACHABLE, e.code());
                // The stuck fetch is given up by its deadline: once the server answers, so does the client.
                stalling.set(false);
                long id = 0;
                for (int k = 0; k < 100 && id == 0; k++) {
                    try {
                        id = c.nextId("t");
                    } catch (LeafdException again) {
                        Thread.sleep(100);
                    }
                }
                assertEquals(1, id);
            }
        });
    }

    @Test
    void stuckFetchIsForgottenAtItsDeadline() throws Exception {
        AtomicLong ranges = new AtomicLong(1);
        Fake f = fake((self, ex, n) -> range(ex, ranges));
        CountDownLatch stuck = new CountDownLatch(1);
        AtomicInteger fetched = new AtomicInteger();
        try (LeafdClient c = LeafdClient.builder().servers(f.url()).timeout(Duration.ofMillis(300))
                .localRanges(10).build()) {
            // The first fetch gets its lease and then hangs (past the HTTP exchange, which is
            // bounded on its own); its deadline, 2 × 300 ms with one server, forgets it.
            c.onBlock = (tag, b) -> {
                if (fetched.incrementAndGet() == 1) {
                    try {
                        stuck.await();
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
            };
            assertEquals(LeafdException.UNREACHABLE, assertThrows(LeafdException.class, () -> c.nextId("t")).code());
            Thread.sleep(1000);
            assertEquals(11, c.nextId("t"), "a new fetch serves; the stuck one's lease [1, 11) is skipped");
            stuck.countDown();
            Thread.sleep(100); // the stuck fetch ends: its late lease must not serve
            java.util.Set<Long> seen = new java.util.HashSet<>();
            for (int k = 0; k < 40; k++) {
                long id = c.nextId("t");
                assertTrue(id > 11 && seen.add(id), "ID " + id + ": none of [1, 11), none twice");
            }
        } finally {
            stuck.countDown();
        }
    }

    @Test
    void eachServerIsAskedOncePerCall() throws Exception {
        List<Fake> hung = new ArrayList<>();
        for (int k = 0; k < 3; k++) {
            hung.add(fake((self, ex, n) -> self.stall(ex)));
        }
        assertTimeoutPreemptively(Duration.ofSeconds(30), () -> {
            try (LeafdClient c = LeafdClient.builder().servers(hung.stream().map(Fake::url).toArray(String[]::new))
                    .timeout(Duration.ofMillis(400)).retryAfter(Duration.ofMinutes(1)).build()) {
                long t0 = System.nanoTime();
                assertEquals(LeafdException.UNREACHABLE, assertThrows(LeafdException.class, c::nextSnowflake).code());
                long took = System.nanoTime() - t0;
                for (Fake h : hung) {
                    assertEquals(1, h.requests.get(), "each server asked once in one call");
                }
                assertTrue(took >= 1_100_000_000L, "3 servers of 400 ms: " + took / 1_000_000 + " ms");
                // The next call: all are passed over, and each is asked once again.
                assertThrows(LeafdException.class, c::nextSnowflake);
                for (Fake h : hung) {
                    assertEquals(2, h.requests.get(), "each server asked once in the second call");
                }
            }
        });
    }

    @Test
    void segmentUnavailableReachesTheCaller() throws Exception {
        Fake f = fake((self, ex, n) -> {
            Thread.sleep(300);
            unavailable(ex);
        });
        try (LeafdClient c = LeafdClient.builder().servers(f.url()).timeout(Duration.ofSeconds(1))
                .localRanges(10).build()) {
            LeafdException e = assertThrows(LeafdException.class, () -> c.nextId("t"));
            assertEquals("segment_unavailable", e.code(), e.toString());
            assertEquals(503, e.status());
        }
        try (LeafdClient c = LeafdClient.builder().servers(f.url()).build()) {
            assertEquals(Duration.ofSeconds(5), c.timeout, "longer than the servers' wait_timeout of 2 s");
            assertTrue(c.maxRangeSize <= 250_000, "a quarter of the servers' max_step at most");
        }
    }

    @Test
    void failedBackgroundFetchIsTriedAgainBeforeTheLeaseRunsOut() throws Exception {
        AtomicLong ranges = new AtomicLong(1);
        Fake f = fake((self, ex, n) -> {
            if (n >= 2 && n <= 4) { // the 3 rounds of the first background fetch
                unavailable(ex);
            } else {
                range(ex, ranges);
            }
        });
        try (LeafdClient c = LeafdClient.builder().servers(f.url()).localRanges(100)
                .refillInterval(Duration.ofHours(1)).build()) {
            for (int k = 0; k < 81; k++) { // the 81st claim (index 80) is the mark: 20 left
                assertEquals(k + 1, c.nextId("t"));
            }
            waitFor("the background fetch's 3 rounds", () -> f.requests.get() >= 4);
            Thread.sleep(300); // its backoff (50 ms) passes
            assertEquals(82, c.nextId("t"));
            waitFor("another background fetch with 18 IDs of the lease left", () -> f.requests.get() >= 5);
            for (int k = 82; k < 100; k++) {
                assertEquals(k + 1, c.nextId("t"));
            }
            assertEquals(101, c.nextId("t"), "the next lease, fetched in the background");
        }
    }

    @Test
    void errorBodiesAreReadOnlyInPart() throws Exception {
        Fake f = fake((self, ex, n) -> {
            ex.sendResponseHeaders(502, 0); // a proxy's endless page
            OutputStream o = ex.getResponseBody();
            byte[] junk = new byte[8192];
            java.util.Arrays.fill(junk, (byte) 'x');
            while (self.released.getCount() > 0) { // until the client hangs up, or the test ends
                o.write(junk);
            }
        });
        try (LeafdClient c = LeafdClient.builder().servers(f.url()).timeout(Duration.ofSeconds(3)).build()) {
            LeafdException e = assertThrows(LeafdException.class, c::nextSnowflake);
            assertEquals(LeafdException.BAD_ANSWER, e.code(), e.toString());
            assertEquals(502, e.status());
        }
    }

    @Test
    void noClaimSucceedsAfterClose() throws Exception {
        AtomicLong ranges = new AtomicLong(1);
        Fake f = fake((self, ex, n) -> range(ex, ranges));
        LeafdClient c = LeafdClient.builder().servers(f.url()).localRanges(1000).build();
        assertEquals(1, c.nextId("t"));
        java.util.function.LongSupplier s = c.supplier("t");
        assertEquals(2, s.getAsLong());
        TagBuffer.Block held = c.buffers.get("t").current; // as a thread inside nextId holds it
        c.close();
        assertTrue(held.claim(1) >= held.size, "a claim on a dropped lease fails");
        assertEquals(LeafdException.CLOSED, assertThrows(LeafdException.class, () -> c.nextId("t")).code());
        assertEquals(LeafdException.CLOSED, assertThrows(LeafdException.class, s::getAsLong).code());
        assertEquals(LeafdException.CLOSED, assertThrows(LeafdException.class, () -> c.nextIds("t", 2)).code());
    }

    @Test
    void passedOverServerIsAskedAgainAfterRetryAfter() throws Exception {
        for (boolean expired : new boolean[] {true, false}) {
            java.util.concurrent.atomic.AtomicBoolean bUp = new java.util.concurrent.atomic.AtomicBoolean(true);
            Fake a = fake((self, ex, n) -> {
                if (n == 1) {
                    self.stall(ex); // passed over
                } else {
                    snowflake(ex, 100 + n);
                }
            });
            Fake other = fake((self, ex, n) -> unavailable(ex)); // always 503: moved on from
            Fake b = fake((self, ex, n) -> {
                if (bUp.get()) {
                    snowflake(ex, 10 + n);
                } else {
                    unavailable(ex);
                }
            });
            // The first call: a stalls (passed over), other 503, b answers and is asked first
            // from then on; after b come a, then other.
            try (LeafdClient c = LeafdClient.builder().servers(a.url(), other.url(), b.url())
                    .timeout(Duration.ofMillis(500)).retryAfter(expired ? Duration.ofMillis(200) : Duration.ofMinutes(1))
                    .build()) {
                assertEquals(11, c.nextSnowflake());
                Thread.sleep(400);
                bUp.set(false);
                long id = c.nextSnowflake();
                if (expired) {
                    assertEquals(102, id, "a, no longer passed over, is asked in its turn");
                    assertEquals(1, other.requests.get(), "other, after a, was not asked in the second call");
                } else {
                    assertEquals(102, id, "a, still passed over, is asked last");
                    assertEquals(2, other.requests.get(), "other was asked before a, which was passed over");
                }
            }
        }
    }
}
