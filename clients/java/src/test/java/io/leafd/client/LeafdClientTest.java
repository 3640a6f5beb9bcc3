package io.leafd.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.function.LongSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The client against one real leafd over a SQLite file. */
class LeafdClientTest {
    /** The first ID of the tag high. */
    static final long HIGH = 1_000_000_001L;

    @TempDir
    static Path dir;
    static Leafd server;

    @BeforeAll
    static void start() throws Exception {
        Map<String, String> env = Leafd.sqliteEnv(dir.resolve("leafd.db"));
        env.put("LEAFD_SEGMENT_SEED_TAGS", "order:1000 pay:10 other:1000");
        Leafd.run(dir, env, "migrate");
        Leafd.run(dir, env, "tag", "add", "daily", "--format", "dated", "--period", "day");
        // IDs far above order's: an ID of one handed out for the other is caught.
        Leafd.run(dir, env, "tag", "add", "high", "--max-id", String.valueOf(HIGH));
        server = new Leafd(dir, env);
    }

    @AfterAll
    static void stop() throws Exception {
        if (server != null) {
            server.close();
        }
    }

    private static LeafdClient.Builder client() {
        return LeafdClient.builder().servers(server.url()).timeout(Duration.ofSeconds(5));
    }

    @Test
    void nextIdAndNextIds() {
        try (LeafdClient c = client().build()) {
            long a = c.nextId("order");
            long b = c.nextId("order");
            assertTrue(a >= 1, "first ID " + a);
            assertTrue(b > a, b + " after " + a);
            long[] ids = c.nextIds("order", 50);
            assertEquals(50, ids.length);
            assertTrue(ids[0] > b, ids[0] + " after " + b);
            for (int k = 1; k < ids.length; k++) {
                assertTrue(ids[k] > ids[k - 1], "ascending at " + k);
            }
            // A batch larger than the tag's step spans several ranges, still ascending and unique.
            long[] big = c.nextIds("pay", 35);
            assertEquals(35, new HashSet<>(box(big)).size());
        }
    }

    @Test
    void snowflakeAndDecode() {
        try (LeafdClient c = client().build()) {
            Instant before = Instant.now().minusSeconds(1);
            long id = c.nextSnowflake();
            assertTrue(id > 0);
            SnowflakeId d = c.decode(id);
            assertEquals(id, d.id());
            assertTrue(d.time().isAfter(before) && d.time().isBefore(Instant.now().plusSeconds(1)), "time " + d.time());
            assertTrue(d.workerId() >= 0 && d.workerId() < 1024, "worker " + d.workerId());
            assertTrue(d.sequence() >= 0 && d.sequence() < 4096, "sequence " + d.sequence());
            // The default layout 41/10/12 from the Twitter epoch: the fields put back together.
            long rebuilt = ((d.unixMillis() - 1288834974657L) << 22) | (d.workerId() << 12) | d.sequence();
            assertEquals(id, rebuilt);
            long[] ids = c.nextSnowflakes(100);
            assertEquals(100, ids.length);
            assertTrue(ids[0] > id);
            for (int k = 1; k < ids.length; k++) {
                assertTrue(ids[k] > ids[k - 1]);
            }
            assertThrows(IllegalArgumentException.class, () -> c.decode(0));
        }
    }

    @Test
    void errorsCarryTheContractsCode() {
        for (int ranges : new int[] {0, 100}) {
            try (LeafdClient c = client().localRanges(ranges).build()) {
                LeafdException e = assertThrows(LeafdException.class, () -> c.nextId("nosuchtag"));
                assertEquals("unknown_tag", e.code());
                assertEquals(404, e.status());
                assertFalse(e.retryable());
                assertTrue(e.getMessage().contains("nosuchtag"), e.getMessage());
                assertFalse(c.buffers.containsKey("nosuchtag"), "an unknown tag holds no buffer");
                e = assertThrows(LeafdException.class, () -> c.nextIds("nosuchtag", 3));
                assertEquals("unknown_tag", e.code());
                assertFalse(c.buffers.containsKey("nosuchtag"), "an unknown tag holds no buffer");
                e = assertThrows(LeafdException.class, () -> c.nextId("a/b"));
                assertEquals("invalid_tag", e.code());
                e = assertThrows(LeafdException.class, () -> c.nextId(".."));
                assertEquals("invalid_tag", e.code());
            }
        }
        try (LeafdClient c = client().build()) {
            LeafdException e = assertThrows(LeafdException.class, () -> c.nextIds("order", 10_001));
            assertEquals("invalid_count", e.code());
            assertEquals(400, e.status());
        }
    }

    @Test
    void unreachableServersAreAnErrorNotAnId() throws Exception {
        int dead = Leafd.freePort();
        try (LeafdClient c = LeafdClient.builder().servers("http://127.0.0.1:" + dead)
                .timeout(Duration.ofMillis(500)).build()) {
            LeafdException e = assertThrows(LeafdException.class, () -> c.nextId("order"));
            assertEquals(LeafdException.UNREACHABLE, e.code());
            assertTrue(e.retryable());
            assertEquals(LeafdException.UNREACHABLE, assertThrows(LeafdException.class, c::nextSnowflake).code());
        }
    }

    @Test
    void deadServerIsPassedOver() throws Exception {
        int dead = Leafd.freePort();
        try (LeafdClient c = client().servers("http://127.0.0.1:" + dead, server.url())
                .retryAfter(Duration.ofMinutes(1)).build()) {
            long last = 0;
            long t0 = System.nanoTime();
            for (int k = 0; k < 20; k++) {
                long id = c.nextId("order");
                assertTrue(id > last);
                last = id;
            }
            assertTrue(c.nextSnowflake() > 0);
            assertTrue(System.nanoTime() - t0 < 5_000_000_000L, "20 calls past a dead server took too long");
        }
    }

    @Test
    void slowServerIsPassedOver() throws Exception {
        // A server that accepts connections and never answers.
        try (java.net.ServerSocket hang = new java.net.ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress())) {
            List<java.net.Socket> held = new CopyOnWriteArrayList<>();
            Thread acceptor = new Thread(() -> {
                try {
                    while (true) {
                        held.add(hang.accept());
                    }
                } catch (java.io.IOException e) {
                    // closed
                }
            });
            acceptor.setDaemon(true);
            acceptor.start();
            try (LeafdClient c = client().servers("http://127.0.0.1:" + hang.getLocalPort(), server.url())
                    .timeout(Duration.ofMillis(500)).retryAfter(Duration.ofMinutes(1)).build()) {
                long t0 = System.nanoTime();
                assertTrue(c.nextId("order") > 0);
                long first = System.nanoTime() - t0;
                assertTrue(first >= 450_000_000L, "the first call waited for the slow server: " + first / 1_000_000 + " ms");
                t0 = System.nanoTime();
                for (int k = 0; k < 10; k++) {
                    assertTrue(c.nextId("order") > 0);
                }
                long next = System.nanoTime() - t0;
                // Asking the slow server would cost 10 × 500 ms.
                assertTrue(next < 4_000_000_000L, "later calls skip it: " + next / 1_000_000 + " ms for 10");
                assertEquals(1, held.size(), "the slow server was asked once");
            } finally {
                for (java.net.Socket s : held) {
                    s.close();
                }
            }
        }
    }

    @Test
    void localRangesServeFromLeases() throws Exception {
        List<long[]> leases = new CopyOnWriteArrayList<>();
        try (LeafdClient c = client().localRanges(100).refillInterval(Duration.ofHours(1)).build()) {
            c.onBlock = (tag, b) -> {
                assertNull(b.ids, "order is leased in ranges, not batches");
                leases.add(new long[] {b.start, b.start + b.size});
            };
            ExecutorService pool = Executors.newFixedThreadPool(4);
            Set<Long> seen = ConcurrentHashMap.newKeySet();
            List<Future<?>> fs = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                boolean batches = t % 2 == 0;
                fs.add(pool.submit(() -> {
                    LongSupplier s = c.supplier("order");
                    long last = 0;
                    for (int k = 0; k < 500; k++) {
                        if (batches) {
                            for (long id : c.nextIds("order", 7)) {
                                assertTrue(seen.add(id), "ID twice: " + id);
                            }
                        } else {
                            long id = s.getAsLong();
                            assertTrue(seen.add(id), "ID twice: " + id);
                            last = id;
                        }
                    }
                    return last;
                }));
            }
            for (Future<?> f : fs) {
                f.get();
            }
            pool.shutdown();
            assertEquals(2 * 500 * 7 + 2 * 500, seen.size());
            for (long id : seen) {
                assertTrue(leases.stream().anyMatch(l -> id >= l[0] && id < l[1]), "ID " + id + " from no lease");
            }
            // ~4,500 IDs in leases of 100 (growing: sizes double while a lease lasts under half an
            // hour): far fewer requests than IDs.
            assertTrue(leases.size() < 40, leases.size() + " leases");
            assertTrue(leases.stream().anyMatch(l -> l[1] - l[0] > 100), "the lease size grew");
        }
    }

    /**
     * nextId skips the map for the tag it looked up last: two tags alternating on four threads
     * (two of them passing copies of the names, compared by equals) switch it at nearly every
     * call. Every ID comes from a lease of its own tag, none twice.
     */
    @Test
    void twoTagsAlternatingOnThreads() throws Exception {
        Map<String, List<long[]>> leases = new ConcurrentHashMap<>();
        Map<String, Set<Long>> seen = Map.of("order", ConcurrentHashMap.newKeySet(), "high",
                ConcurrentHashMap.newKeySet());
        int calls = 3000;
        try (LeafdClient c = client().localRanges(40).refillInterval(Duration.ofHours(1)).build()) {
            c.onBlock = (tag, b) -> leases.computeIfAbsent(tag, t -> new CopyOnWriteArrayList<>())
                    .add(new long[] {b.start, b.start + b.size});
            ExecutorService pool = Executors.newFixedThreadPool(4);
            List<Future<?>> fs = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                int th = t;
                fs.add(pool.submit(() -> {
                    for (int k = 0; k < calls; k++) {
                        String tag = (k + th) % 2 == 0 ? "order" : "high";
                        String asked = th < 2 ? tag : new String(tag.toCharArray());
                        long id = c.nextId(asked);
                        assertTrue(seen.get(tag).add(id), "ID of " + tag + " twice: " + id);
                    }
                    return null;
                }));
            }
            for (Future<?> f : fs) {
                f.get();
            }
            pool.shutdown();
        }
        for (String tag : List.of("order", "high")) {
            assertEquals(2 * calls, seen.get(tag).size(), tag);
            List<long[]> ls = leases.getOrDefault(tag, List.of());
            for (long id : seen.get(tag)) {
                assertTrue(ls.stream().anyMatch(l -> id >= l[0] && id < l[1]), "ID " + id + " of " + tag
                        + " from none of its leases");
                assertEquals(tag.equals("high"), id >= HIGH, "ID " + id + " of " + tag);
            }
        }
    }

    @Test
    void datedTagsAreOneRequestPerCall() {
        List<TagBuffer.Block> blocks = new CopyOnWriteArrayList<>();
        try (LeafdClient c = client().localRanges(50).build()) {
            c.onBlock = (tag, b) -> blocks.add(b);
            Set<Long> seen = new HashSet<>();
            for (int k = 0; k < 120; k++) {
                assertTrue(seen.add(c.nextId("daily")));
            }
            assertEquals(10, c.nextIds("daily", 10).length);
            assertTrue(blocks.isEmpty(), "range_unsupported without batchFallback: nothing buffered");
            // Another tag of the same client is still leased in ranges.
            c.nextId("other");
            assertNull(blocks.get(0).ids);
        }
    }

    @Test
    void batchFallbackBuffersBatches() {
        List<TagBuffer.Block> blocks = new CopyOnWriteArrayList<>();
        try (LeafdClient c = client().localRanges(50).batchFallback(50).build()) {
            c.onBlock = (tag, b) -> blocks.add(b);
            Set<Long> seen = new HashSet<>();
            for (int k = 0; k < 120; k++) {
                assertTrue(seen.add(c.nextId("daily")));
            }
            assertTrue(blocks.size() >= 2);
            for (TagBuffer.Block b : blocks) {
                assertTrue(b.ids != null, "served from batches");
            }
        }
    }

    @Test
    void sizesAboveTheServersLimitsAreCapped(@TempDir Path own) throws Exception {
        Map<String, String> env = Leafd.sqliteEnv(own.resolve("leafd.db"));
        env.put("LEAFD_SEGMENT_SEED_TAGS", "order:1000");
        env.put("LEAFD_SEGMENT_MAX_RANGE", "300");
        env.put("LEAFD_SEGMENT_MAX_BATCH", "40");
        Leafd.run(own, env, "migrate");
        Leafd.run(own, env, "tag", "add", "daily", "--format", "dated", "--period", "day");
        List<TagBuffer.Block> blocks = new CopyOnWriteArrayList<>();
        try (Leafd srv = new Leafd(own, env);
                LeafdClient c = LeafdClient.builder().servers(srv.url()).timeout(Duration.ofSeconds(5))
                        .localRanges(100).batchFallback(1000).refillInterval(Duration.ofHours(1)).build()) {
            c.onBlock = (tag, b) -> blocks.add(b);
            Set<Long> seen = new HashSet<>();
            for (int k = 0; k < 3000; k++) {
                assertTrue(seen.add(c.nextId("order")));
            }
            for (int k = 0; k < 200; k++) {
                assertTrue(seen.add(c.nextId("daily")));
            }
            long ranges = blocks.stream().filter(b -> b.ids == null).count();
            assertTrue(blocks.stream().allMatch(b -> b.ids != null ? b.size <= 40 : b.size <= 300), "sizes within limits");
            // 100, 200, then capped at 200 (400 was refused): 3,000 IDs in about 16 leases.
            assertTrue(ranges <= 20, ranges + " ranges");
            assertTrue(blocks.stream().anyMatch(b -> b.ids == null && b.size == 200), "capped at the last size that worked");
        }
    }

    @Test
    void closedClientThrows() {
        LeafdClient c = client().localRanges(100).build();
        long id = c.nextId("order");
        assertTrue(id > 0);
        assertTrue(c.nextId("order") > id); // the tag of the last lookup: close() must reach it too
        assertEquals(LeafdClient.REFILL_THREADS,
                ((java.util.concurrent.ThreadPoolExecutor) c.executor).getMaximumPoolSize(), "a bounded refill pool");
        c.close();
        assertTrue(c.executor.isShutdown() && c.timer.isShutdown() && c.httpExecutor.isShutdown(),
                "close() stops the client's threads, HttpClient's included");
        assertEquals(LeafdException.CLOSED, assertThrows(LeafdException.class, () -> c.nextId("order")).code());
        assertEquals(LeafdException.CLOSED, assertThrows(LeafdException.class, c::nextSnowflake).code());
    }

    @Test
    void builderRefusesBadSettings() {
        assertThrows(IllegalArgumentException.class, () -> LeafdClient.builder().build());
        assertThrows(IllegalArgumentException.class, () -> LeafdClient.builder().servers("leafd:8080"));
        assertThrows(IllegalArgumentException.class, () -> LeafdClient.builder().servers("http://leafd:8080/?a=b"));
        assertThrows(IllegalArgumentException.class, () -> LeafdClient.builder().timeout(Duration.ZERO));
        assertThrows(IllegalArgumentException.class,
                () -> LeafdClient.builder().servers("http://x:1").localRanges(300_000).build());
        assertThrows(IllegalArgumentException.class, () -> LeafdClient.builder().token("t\r\nX-Evil: 1"));
        assertThrows(IllegalArgumentException.class, () -> LeafdClient.builder().token("t\n"));
    }

    @Test
    void strictAnswers() {
        assertArrayEquals(new long[] {1, 2}, Ids.parseIds("{\"tag\":\"t\",\"ids\":[\"2\",\"1\"]}", 2, "t"));
        for (String bad : new String[] {
            "{\"tag\":\"t\",\"ids\":[1]}", "{\"tag\":\"t\",\"ids\":[\"01\"]}", "{\"tag\":\"t\",\"ids\":[\"-1\"]}",
            "{\"tag\":\"t\",\"ids\":[\"0\"]}", "{\"tag\":\"t\",\"ids\":[\"9223372036854775808\"]}",
            "{\"tag\":\"u\",\"ids\":[\"1\"]}", "{\"tag\":\"t\",\"ids\":[\"1\",\"2\"]}", "1\n", "<html>",
        }) {
            LeafdException e = assertThrows(LeafdException.class, () -> Ids.parseIds(bad, 1, "t"), bad);
            assertEquals(LeafdException.BAD_ANSWER, e.code());
        }
        assertThrows(LeafdException.class, () -> Ids.parseIds("{\"tag\":\"t\",\"ids\":[\"1\",\"1\"]}", 2, "t"));
        assertArrayEquals(new long[] {5, 15}, Ids.parseRange("{\"tag\":\"t\",\"start\":\"5\",\"end\":\"15\"}", "t", 10));
        assertThrows(LeafdException.class, () -> Ids.parseRange("{\"tag\":\"t\",\"start\":\"5\",\"end\":\"16\"}", "t", 10));
        assertEquals("A\u00e9", Json.parse("\"\\u0041\\u00E9\""));
        for (String bad : new String[] {"\"\\u+041\"", "\"\\u-041\"", "\"\\u 041\"", "\"\\u004\""}) {
            assertThrows(IllegalArgumentException.class, () -> Json.parse(bad), bad);
        }
        LeafdException e = Transport.errorOf("x", 502, "<html>bad gateway</html>");
        assertEquals(LeafdException.BAD_ANSWER, e.code());
        assertTrue(e.retryable(), "a proxy's 502 moves on to the next server");
        e = Transport.errorOf("x", 503, "{\"error\":{\"code\":\"tag_exhausted\",\"message\":\"m\"}}");
        assertEquals("tag_exhausted", e.code());
        assertFalse(e.retryable(), "tag_exhausted is the same on every server");
        assertTrue(Transport.errorOf("x", 503, "{\"error\":{\"code\":\"segment_unavailable\",\"message\":\"m\"}}").retryable());
    }

    static List<Long> box(long[] a) {
        List<Long> l = new ArrayList<>();
        for (long v : a) {
            l.add(v);
        }
        return l;
    }
}
