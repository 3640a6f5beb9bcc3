package io.leafd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Three servers over one MariaDB database, several clients on several threads, one server killed
 * with -9 mid-load and started again, then the database unreachable for 2.5 s (a TCP proxy between
 * the servers and MariaDB cuts every connection and refuses new ones): no ID twice, every leased ID
 * inside a lease a server granted, every segment ID below the tag's max_id in the database; no call
 * fails before the outage, and a call that fails during it fails with the contract's code.
 */
class ClusterTest {
    @TempDir
    Path dir;

    @Test
    void testDatabaseDsn() {
        Leafd.MysqlDsn d = new Leafd.MysqlDsn("u:p@ss@tcp(db.local:3307)/");
        assertEquals("u", d.user);
        assertEquals("p@ss", d.password);
        assertEquals("db.local", d.host);
        assertEquals("3307", d.port);
        assertEquals("u:p@ss@tcp(db.local:3307)/x?parseTime=true", d.forDb("x"));
        d = new Leafd.MysqlDsn("root@tcp(127.0.0.1:3306)/");
        assertEquals(null, d.password);
        assertEquals("root@tcp(127.0.0.1:3306)/x?parseTime=true", d.forDb("x"));
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> new Leafd.MysqlDsn("127.0.0.1:3306"));
    }

    @Test
    void threeServersKillNineMidLoadThenDatabaseOutage() throws Exception {
        String db = Leafd.createMysqlDatabase();
        List<Leafd> servers = new ArrayList<>();
        Leafd.MysqlDsn dsn = Leafd.MysqlDsn.fromEnv();
        TcpProxy proxy = new TcpProxy(dsn.host, Integer.parseInt(dsn.port));
        try {
            Map<String, String> env = Leafd.mysqlEnv(db);
            env.put("LEAFD_SEGMENT_SEED_TAGS", "load:1000");
            Leafd.run(dir, env, "migrate");
            Leafd.run(dir, env, "tag", "add", "day", "--format", "dated", "--period", "day");
            // The servers reach the database through the proxy, and load small ranges (a step of
            // at most 20,000) so that they load often, during the outage too.
            env.put("LEAFD_STORE_DSN", dsn.forDb(db, "127.0.0.1", String.valueOf(proxy.port())));
            env.put("LEAFD_SEGMENT_MAX_STEP", "20000");
            for (int k = 0; k < 3; k++) {
                servers.add(new Leafd(dir, env));
            }
            String[] urls = servers.stream().map(Leafd::url).toArray(String[]::new);
            // Each client starts at another server, as clients of a fleet do.
            List<LeafdClient> clients = new ArrayList<>();
            List<long[]> leases = new CopyOnWriteArrayList<>();
            for (int k = 0; k < 4; k++) {
                String[] order = {urls[k % 3], urls[(k + 1) % 3], urls[(k + 2) % 3]};
                LeafdClient.Builder b = LeafdClient.builder().servers(order).timeout(Duration.ofSeconds(3))
                        .retryAfter(Duration.ofSeconds(1));
                if (k < 3) {
                    // Leases that turn over every 200 ms, and (client 2) leases that last about a
                    // second: they hold IDs through the first part of the outage.
                    b.localRanges(k == 0 ? 37 : 500).refillInterval(Duration.ofMillis(k == 2 ? 2000 : 200));
                }
                LeafdClient c = b.build();
                c.onBlock = (tag, blk) -> {
                    if (tag.equals("load")) {
                        leases.add(new long[] {blk.start, blk.start + blk.size});
                    }
                };
                clients.add(c);
            }
            // Every thread records its IDs in arrays of its own; duplicates are found by sorting.
            LongList[] segIds = new LongList[8];
            LongList[] directIds = new LongList[8];
            LongList[] datedIds = new LongList[8];
            LongList[] sfIds = new LongList[8];
            List<Failure> failures = new CopyOnWriteArrayList<>();
            AtomicBoolean stop = new AtomicBoolean();
            AtomicLong calls = new AtomicLong();
            AtomicLong segCount = new AtomicLong();
            AtomicLong leasedCount = new AtomicLong();
            ExecutorService pool = Executors.newFixedThreadPool(8);
            List<Future<?>> fs = new ArrayList<>();
            for (int t = 0; t < 8; t++) {
                LeafdClient c = clients.get(t % 4);
                boolean leased = t % 4 < 3;
                int kind = t;
                LongList mine = segIds[t] = new LongList();
                LongList mineDirect = directIds[t] = new LongList();
                LongList mineDated = datedIds[t] = new LongList();
                LongList mineSf = sfIds[t] = new LongList();
                fs.add(pool.submit(() -> {
                    long n = 0;
                    while (!stop.get()) {
                        try {
                            if (kind == 1 && n % 50 == 0) {
                                mineSf.add(c.nextSnowflake());
                            } else if (kind == 2 && n % 20 == 0) {
                                mineDated.add(c.nextId("day"));
                            } else if (kind >= 4 && n % 3 == 0) {
                                for (long id : c.nextIds("load", 5)) {
                                    (leased ? mine : mineDirect).add(id);
                                }
                                segCount.addAndGet(5);
                                if (leased) {
                                    leasedCount.addAndGet(5);
                                }
                            } else {
                                (leased ? mine : mineDirect).add(c.nextId("load"));
                                segCount.incrementAndGet();
                                if (leased) {
                                    leasedCount.incrementAndGet();
                                }
                            }
                            calls.incrementAndGet();
                        } catch (Throwable e) {
                            failures.add(new Failure(System.nanoTime(), e));
                        }
                        n++;
                        if (n % 100 == 0) {
                            Thread.sleep(1); // bounds the IDs recorded: about 100 calls per ms per thread
                        }
                    }
                    return null;
                }));
            }
            Thread.sleep(2500);
            // The first server of clients 0 (leases of 37) and 3 (no leases).
            Leafd victim = servers.get(0);
            victim.kill9();
            long atKill = segCount.get();
            Thread.sleep(2500);
            assertTrue(segCount.get() > atKill, "IDs kept coming with a server killed");
            victim.start();
            Thread.sleep(2000);

            // The database unreachable for 2.5 s: every connection of the servers cut, new ones refused.
            double loadErrorsBefore = sum(servers, "leafd_segment_all_range_load_errors_total");
            double requestErrorsBefore = sum(servers, "leafd_segment_all_request_errors_total");
            long atCut = System.nanoTime();
            long leasedAtCut = leasedCount.get();
            proxy.cut();
            StringBuilder timeline = new StringBuilder(" before " + leasedAtCut + " seg " + segCount.get() + ";");
            for (int k = 0; k < 10; k++) {
                Thread.sleep(250);
                timeline.append(' ').append(leasedCount.get() - leasedAtCut).append('/').append(segCount.get());
            }
            long leasedDuringOutage = leasedCount.get() - leasedAtCut;
            proxy.restore();
            long segAtRestore = segCount.get();
            Thread.sleep(3500);
            long segAfterRestore = segCount.get() - segAtRestore;
            double loadErrors = sum(servers, "leafd_segment_all_range_load_errors_total") - loadErrorsBefore;
            double requestErrors = sum(servers, "leafd_segment_all_request_errors_total") - requestErrorsBefore;
            stop.set(true);
            for (Future<?> f : fs) {
                f.get();
            }
            pool.shutdown();
            for (LeafdClient c : clients) {
                c.close();
            }

            long[] leased = LongList.sorted(segIds);
            long[] directOnes = LongList.sorted(directIds);
            long[] all = LongList.sorted(segIds, directIds);
            long[] datedAll = LongList.sorted(datedIds);
            long[] sfAll = LongList.sorted(sfIds);
            List<String> dups = new ArrayList<>();
            LongList.duplicates("load", all, dups);
            LongList.duplicates("day", datedAll, dups);
            LongList.duplicates("snowflake", sfAll, dups);
            assertEquals(List.of(), dups, "IDs handed out twice");
            // No call fails before the outage (a server killed is passed over); during it and until
            // the calls that waited through it end, a call fails only with the contract's codes
            // of an unreachable store, never with anything else and never with an ID.
            java.util.Map<String, Integer> codes = new java.util.TreeMap<>();
            for (Failure f : failures) {
                if (f.at < atCut || !(f.error instanceof LeafdException)
                        || !OUTAGE_CODES.contains(((LeafdException) f.error).code())) {
                    f.error.printStackTrace();
                    org.junit.jupiter.api.Assertions.fail("a call failed "
                            + (f.at < atCut ? "before the outage" : (f.at - atCut) / 1_000_000 + " ms after the cut")
                            + ": " + f.error);
                }
                codes.merge(((LeafdException) f.error).code(), 1, Integer::sum);
            }
            // The outage happened: connections were cut, and the servers' loads of ranges (into
            // their buffers, or of a lease straight from the database) failed.
            assertTrue(proxy.cutOff.get() > 0, "no connection was cut");
            assertTrue(loadErrors + requestErrors > 0, "no range load and no segment request failed during the outage");
            assertTrue(leasedDuringOutage > 0, "the leases served nothing during the outage:" + timeline + " failures " + failures.size());
            assertTrue(segAfterRestore > 1000, "IDs after the database came back: " + segAfterRestore);
            assertTrue(all.length > 10_000, "too few IDs: " + all.length);
            assertTrue(directOnes.length > 100, "too few IDs without leases: " + directOnes.length);
            assertTrue(sfAll.length > 10 && datedAll.length > 10, "snowflake " + sfAll.length + ", dated " + datedAll.length);
            long maxId = Long.parseLong(Leafd.mysqlQuery(db, "SELECT max_id FROM leaf_alloc WHERE biz_tag='load'"));
            for (long id : all) {
                assertTrue(id >= 1 && id < maxId, "ID " + id + " beyond max_id " + maxId);
            }
            long[][] ls = leases.toArray(new long[0][]);
            java.util.Arrays.sort(ls, (x, y) -> Long.compare(x[0], y[0]));
            for (int k = 1; k < ls.length; k++) {
                assertTrue(ls[k][0] >= ls[k - 1][1], "leases overlap: " + java.util.Arrays.toString(ls[k - 1])
                        + " and " + java.util.Arrays.toString(ls[k]));
            }
            for (long id : leased) {
                int i = java.util.Arrays.binarySearch(ls, new long[] {id, id + 1}, (x, y) -> Long.compare(x[0], y[0]));
                int at = i >= 0 ? i : -i - 2;
                assertTrue(at >= 0 && id >= ls[at][0] && id < ls[at][1], "leased ID " + id + " from no lease");
            }
            System.out.printf("ClusterTest: %d calls, %d segment IDs (%d leases, %d direct), %d dated, %d snowflake;"
                    + " outage: %d connections cut, %d refused, %.0f range loads and %.0f segment requests failed,"
                    + " %d leased IDs served,"
                    + " failed calls by code %s, %d segment IDs in the 3.5 s after it%n",
                    calls.get(), all.length, ls.length, directOnes.length, datedAll.length, sfAll.length,
                    proxy.cutOff.get(), proxy.refused.get(), loadErrors, requestErrors, leasedDuringOutage, codes, segAfterRestore);
        } finally {
            for (Leafd s : servers) {
                s.close();
            }
            proxy.close();
            Leafd.dropMysqlDatabase(db);
        }
    }

    /** The codes a call may fail with while the database cannot be reached. */
    static final java.util.Set<String> OUTAGE_CODES = java.util.Set.of("segment_unavailable", "store_unavailable",
            "snowflake_unavailable", LeafdException.UNREACHABLE);

    static final class Failure {
        final long at;
        final Throwable error;

        Failure(long at, Throwable error) {
            this.at = at;
            this.error = error;
        }
    }

    private static double sum(List<Leafd> servers, String metric) throws Exception {
        double s = 0;
        for (Leafd l : servers) {
            s += l.metric(metric);
        }
        return s;
    }

    /** A growable array of longs, for one thread. */
    static final class LongList {
        long[] a = new long[1024];
        int n;

        void add(long v) {
            if (n == a.length) {
                a = java.util.Arrays.copyOf(a, n * 2);
            }
            a[n++] = v;
        }

        static long[] sorted(LongList[]... groups) {
            int total = 0;
            for (LongList[] g : groups) {
                for (LongList l : g) {
                    total += l.n;
                }
            }
            long[] out = new long[total];
            int at = 0;
            for (LongList[] g : groups) {
                for (LongList l : g) {
                    System.arraycopy(l.a, 0, out, at, l.n);
                    at += l.n;
                }
            }
            java.util.Arrays.sort(out);
            return out;
        }

        static void duplicates(String what, long[] sorted, List<String> out) {
            for (int k = 1; k < sorted.length && out.size() < 20; k++) {
                if (sorted[k] == sorted[k - 1]) {
                    out.add(what + " " + sorted[k]);
                }
            }
        }
    }
}
