package io.leafd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * nextId and a supplier served from a local lease beside a bare AtomicLong.incrementAndGet, one
 * thread, against a real leafd over SQLite: two warm-up rounds, then five rounds, each printed
 * with ns per call and the ratios to AtomicLong. nextId is timed twice: with the tag's literal
 * (the reference the client holds) and with an equal string built at run time (as a tag read from
 * a request would be), which the client compares by equals.
 *
 * <p>Each of the four loops is a method of its own, called on chunks of 10,000 calls, so that
 * each is compiled as a whole method (no on-stack replacement of one large method favouring one
 * side); the four do the same work around the call (the check that the ID follows the last one).
 * A round is 1,000 chunks of each, interleaved (AtomicLong, nextId, nextId of the copy, supplier,
 * AtomicLong, ...), and a round's ns per call is the median chunk's: load from elsewhere on the
 * machine falls on the four alike, and a chunk that lost the CPU does not count. Asserts nothing
 * on time; asserts that the IDs are consecutive within leases and that almost no call made a
 * request.
 */
class BenchTest {
    private static final int CHUNK = 10_000;
    private static final int CHUNKS = 1_000; // 10 million calls per loop and round
    private static final int WARMUPS = 2;
    private static final int ROUNDS = 5;

    @TempDir
    Path dir;

    /** The last ID of a loop and the number of IDs that did not follow the one before. */
    private static final class Run {
        long prev;
        long gaps;
    }

    private static void nextIdLoop(LeafdClient c, Run r) {
        long prev = r.prev;
        long gaps = 0;
        for (int k = 0; k < CHUNK; k++) {
            long id = c.nextId("bench");
            if (id != prev + 1) {
                gaps++;
            }
            prev = id;
        }
        r.prev = prev;
        r.gaps += gaps;
    }

    private static void nextIdCopyLoop(LeafdClient c, String tag, Run r) {
        long prev = r.prev;
        long gaps = 0;
        for (int k = 0; k < CHUNK; k++) {
            long id = c.nextId(tag);
            if (id != prev + 1) {
                gaps++;
            }
            prev = id;
        }
        r.prev = prev;
        r.gaps += gaps;
    }

    private static void supplierLoop(LongSupplier s, Run r) {
        long prev = r.prev;
        long gaps = 0;
        for (int k = 0; k < CHUNK; k++) {
            long id = s.getAsLong();
            if (id != prev + 1) {
                gaps++;
            }
            prev = id;
        }
        r.prev = prev;
        r.gaps += gaps;
    }

    private static void atomicLoop(AtomicLong a, Run r) {
        long prev = r.prev;
        long gaps = 0;
        for (int k = 0; k < CHUNK; k++) {
            long id = a.incrementAndGet();
            if (id != prev + 1) {
                gaps++;
            }
            prev = id;
        }
        r.prev = prev;
        r.gaps += gaps;
    }

    /** The median of ns per call of chunks. */
    private static double median(long[] chunkNs) {
        long[] a = chunkNs.clone();
        Arrays.sort(a);
        return (a[(a.length - 1) / 2] + a[a.length / 2]) / 2.0 / CHUNK;
    }

    @Test
    void nextIdBesideAtomicLong() throws Exception {
        Map<String, String> env = Leafd.sqliteEnv(dir.resolve("leafd.db"));
        env.put("LEAFD_SEGMENT_SEED_TAGS", "bench:1000");
        try (Leafd server = new Leafd(dir, env);
                LeafdClient c = LeafdClient.builder().servers(server.url()).timeout(Duration.ofSeconds(5))
                        .localRanges(10_000).refillInterval(Duration.ofSeconds(10)).build()) {
            AtomicInteger blocks = new AtomicInteger();
            c.onBlock = (tag, b) -> blocks.incrementAndGet();
            // nextId is timed with the literal, the reference the client holds, and with a copy
            // built at run time, as a tag read from a request would be, which it compares by equals.
            String copy = new String("bench".toCharArray());
            LongSupplier s = c.supplier("bench");
            AtomicLong counter = new AtomicLong();
            Run ids = new Run();
            Run atomic = new Run();
            long[] atomicNs = new long[CHUNKS];
            long[] idNs = new long[CHUNKS];
            long[] copyNs = new long[CHUNKS];
            long[] supNs = new long[CHUNKS];
            double worstId = 0;
            double worstCopy = 0;
            double worstSup = 0;
            for (int round = 0; round < WARMUPS + ROUNDS; round++) {
                long wall = System.nanoTime();
                for (int k = 0; k < CHUNKS; k++) {
                    long t0 = System.nanoTime();
                    atomicLoop(counter, atomic);
                    long t1 = System.nanoTime();
                    nextIdLoop(c, ids);
                    long t2 = System.nanoTime();
                    nextIdCopyLoop(c, copy, ids);
                    long t3 = System.nanoTime();
                    supplierLoop(s, ids);
                    long t4 = System.nanoTime();
                    atomicNs[k] = t1 - t0;
                    idNs[k] = t2 - t1;
                    copyNs[k] = t3 - t2;
                    supNs[k] = t4 - t3;
                }
                wall = System.nanoTime() - wall;
                double a = median(atomicNs);
                double i = median(idNs);
                double e = median(copyNs);
                double p = median(supNs);
                boolean warm = round < WARMUPS;
                if (!warm) {
                    worstId = Math.max(worstId, i / a);
                    worstCopy = Math.max(worstCopy, e / a);
                    worstSup = Math.max(worstSup, p / a);
                }
                System.out.printf("BenchTest %s: AtomicLong.incrementAndGet %.2f ns/call, nextId %.2f (%.2f×),"
                        + " nextId of an equal tag %.2f (%.2f×), supplier %.2f (%.2f×) (%.0f ms)%n",
                        warm ? "warm-up " + (round + 1) : "round " + (round - WARMUPS + 1), a, i, i / a, e, e / a,
                        p, p / a, wall / 1e6);
            }
            long calls = (long) (WARMUPS + ROUNDS) * CHUNK * CHUNKS;
            long total = 3 * calls;
            System.out.printf("BenchTest: highest ratios of the %d rounds: nextId %.2f, nextId of an equal tag %.2f,"
                    + " supplier %.2f; %d leases for %d IDs%n", ROUNDS, worstId, worstCopy, worstSup, blocks.get(), total);
            assertEquals(0, atomic.gaps);
            assertEquals(calls, atomic.prev);
            // Every gap between consecutive IDs is a lease boundary.
            assertTrue(ids.gaps <= blocks.get(), ids.gaps + " gaps, " + blocks.get() + " leases");
            // Leases grow to maxRangeSize (250,000 by default): about total / 250,000 of them.
            assertTrue(blocks.get() < total / 250_000 + 50, "leases grow: " + blocks.get() + " for " + total + " IDs");
        }
    }
}
