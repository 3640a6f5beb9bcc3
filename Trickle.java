import io.leafd.client.*;
import java.time.Duration;
public class Trickle {
    public static void main(String[] a) throws Exception {
        try (LeafdClient c = LeafdClient.builder().servers("http://127.0.0.1:" + a[0]).timeout(Duration.ofMillis(500)).build()) {
            long t0 = System.nanoTime();
            try { System.out.println("-> " + c.nextId("t")); }
            catch (LeafdException e) { System.out.println("-> " + e); }
            System.out.println("took ms " + (System.nanoTime() - t0) / 1_000_000);
        }
    }
}
