package io.leafd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Access tokens: a server with segment.require_token and snowflake.require_token. */
class TokenTest {
    @TempDir
    Path dir;

    @Test
    void tokens() throws Exception {
        Map<String, String> env = Leafd.sqliteEnv(dir.resolve("leafd.db"));
        env.put("LEAFD_SEGMENT_SEED_TAGS", "order:1000 pay:1000");
        env.put("LEAFD_SEGMENT_REQUIRE_TOKEN", "true");
        env.put("LEAFD_SNOWFLAKE_REQUIRE_TOKEN", "true");
        Leafd.run(dir, env, "migrate");
        String orderToken = Leafd.run(dir, env, "token", "add", "--tags", "order,snowflake");
        String payToken = Leafd.run(dir, env, "token", "add", "--tags", "pay");
        assertTrue(orderToken.startsWith("leafd_"), orderToken);
        try (Leafd server = new Leafd(dir, env)) {
            LeafdClient.Builder b = LeafdClient.builder().servers(server.url()).timeout(Duration.ofSeconds(5));
            try (LeafdClient c = b.build()) {
                LeafdException e = assertThrows(LeafdException.class, () -> c.nextId("order"));
                assertEquals("token_required", e.code());
                assertEquals(401, e.status());
                assertEquals("token_required", assertThrows(LeafdException.class, c::nextSnowflake).code());
            }
            for (int ranges : new int[] {0, 100}) {
                try (LeafdClient c = b.token(payToken).localRanges(ranges).build()) {
                    LeafdException e = assertThrows(LeafdException.class, () -> c.nextId("order"));
                    assertEquals("token_refused", e.code());
                    assertEquals(403, e.status());
                    assertFalse(e.retryable());
                    assertEquals("token_refused", assertThrows(LeafdException.class, c::nextSnowflake).code());
                    assertTrue(c.nextId("pay") > 0);
                }
                try (LeafdClient c = b.token(orderToken).localRanges(ranges).build()) {
                    long a = c.nextId("order");
                    assertTrue(c.nextId("order") > a);
                    assertTrue(c.nextSnowflake() > 0);
                    assertEquals("token_refused", assertThrows(LeafdException.class, () -> c.nextId("pay")).code());
                }
            }
            // A token that the server never made.
            try (LeafdClient c = b.token("leafd_0000000000000000_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
                    .localRanges(0).build()) {
                assertEquals("token_refused", assertThrows(LeafdException.class, () -> c.nextId("order")).code());
            }
        }
    }
}
