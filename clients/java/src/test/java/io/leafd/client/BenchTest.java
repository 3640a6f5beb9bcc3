package io.leafd.client;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * nextId and a supplier served from a local lease beside a bare AtomicLong.incrementAndGet, one
 * thread, against a real leafd over SQLite: one warm-up round, then three rounds, each printed
 * with ns per call and the ratios to AtomicLong. Asserts nothing on time (the machine may be
 * loaded); asserts that the IDs are consecutive within leases and that almost no call made a
 * request.
 */
class BenchTest {
    @TempDir
    Path dir;

    @Test
    void nextIdBesideAtomicLong() throws Exception {
        Map<String, String> env = Leafd.sqliteEnv(dir.resolve("leafd.db"));
        env.put("LEAFD_SEGMENT_SEED_TAGS", "bench:1000");
        try (Leafd server = new Leafd(dir, env);
                LeafdClient c = LeafdClient.builder().servers(server.url()).timeout(Duration.ofSeconds(5))
                        .localRanges(10_000).refillInterval(Duration.ofSeconds(10)).build()) {
            AtomicInteger blocks = new AtomicInteger();
            c.onBlock = (tag, b) -> blocks.incrementAndGet();
            LongSupplier s = c.supplier("bench");
            AtomicLong counter = new AtomicLong();
            int n = 10_000_000;
            long last = 0;
            long gaps = 0;
            int rounds = 4; // round 0 warms up
            for (int round = 0; round < rounds; round++) {
                long t0 = System.nanoTime();
                long prev = last;
                for (int k = 0; k < n; k++) {
                    long id = c.nextId("bench");
                    if (id != prev + 1) {
                        gaps++;
                    }
                    prev = id;
                }
                long t1 = System.nanoTime();
                for (int k = 0; k < n; k++) {
                    long id = s.getAsLong();
                    if (id != prev + 1) {
                        gaps++;
                    }
                    prev = id;
                }
                long t2 = System.nanoTime();
                last = prev;
                long sum = 0;
                for (int k = 0; k < n; k++) {
                    sum += counter.incrementAndGet();
                }
                long t3 = System.nanoTime();
                assertTrue(sum > 0);
                double idNs = (t1 - t0) / (double) n;
                double supNs = (t2 - t1) / (double) n;
                double atomicNs = (t3 - t2) / (double) n;
                System.out.printf("BenchTest %s: nextId %.2f ns/call, supplier %.2f ns/call,"
                        + " AtomicLong.incrementAndGet %.2f ns/call; ratios %.2f, %.2f%n",
                        round == 0 ? "warm-up" : "round " + round, idNs, supNs, atomicNs, idNs / atomicNs, supNs / atomicNs);
            }
            long ids = (long) rounds * 2 * n;
            System.out.printf("BenchTest: %d leases for %d IDs%n", blocks.get(), ids);
            // Every gap between consecutive IDs is a lease boundary.
            assertTrue(gaps <= blocks.get(), gaps + " gaps, " + blocks.get() + " leases");
            // Leases grow to maxRangeSize (250,000 by default): about ids / 250,000 of them.
            assertTrue(blocks.get() < ids / 250_000 + 50, "leases grow: " + blocks.get() + " for " + ids + " IDs");
        }
    }
}
