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
 * nextId served from a local lease beside a bare AtomicLong.incrementAndGet, one thread, against a
 * real leafd over SQLite. Prints ns per call and the ratio; asserts that the IDs are consecutive
 * within leases and that almost no call made a request.
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
            int n = 20_000_000;
            double idNs = 0;
            double atomicNs = 0;
            long last = 0;
            long gaps = 0;
            for (int round = 0; round < 3; round++) { // the first rounds warm up
                long t0 = System.nanoTime();
                long prev = last;
                for (int k = 0; k < n; k++) {
                    long id = s.getAsLong();
                    if (id != prev + 1) {
                        gaps++;
                    }
                    prev = id;
                }
                long t1 = System.nanoTime();
                last = prev;
                long sum = 0;
                for (int k = 0; k < n; k++) {
                    sum += counter.incrementAndGet();
                }
                long t2 = System.nanoTime();
                assertTrue(sum > 0);
                idNs = (t1 - t0) / (double) n;
                atomicNs = (t2 - t1) / (double) n;
            }
            System.out.printf("BenchTest: nextId from a lease %.2f ns/call, AtomicLong.incrementAndGet %.2f ns/call,"
                    + " ratio %.2f; %d leases for %d IDs%n", idNs, atomicNs, idNs / atomicNs, blocks.get(), 3L * n);
            // Every gap between consecutive IDs is a lease boundary.
            assertTrue(gaps <= blocks.get(), gaps + " gaps, " + blocks.get() + " leases");
            assertTrue(blocks.get() < 200, "leases grow: " + blocks.get() + " for " + 3 * n + " IDs");
        }
    }
}
