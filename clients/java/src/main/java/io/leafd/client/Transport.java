package io.leafd.client;

import java.io.ByteArrayOutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Flow;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Sends GET requests to leafd servers in turn. A server that cannot be reached or does not answer
 * within the timeout (the whole exchange: connection, headers and body) is passed over for
 * {@code retryAfter}; requests then start at the server that answered last. A 5xx that another server may not give moves on to the next server; any other
 * answer is the answer.
 */
final class Transport {
    static final class Server {
        final String base;
        /** System.nanoTime() before which the server is passed over; 0 when it is not. */
        volatile long downUntil;

        Server(String base) {
            this.base = base;
        }
    }

    private final Server[] servers;
    private final AtomicInteger preferred = new AtomicInteger();
    private final HttpClient http;
    private final Duration timeout;
    private final long retryAfterNanos;
    private final String auth;

    /** The most of an error answer's body that is read. */
    static final int MAX_ERROR_BODY = 64 * 1024;

    Transport(List<String> bases, String token, Duration timeout, Duration retryAfter, HttpClient http) {
        this.servers = new Server[bases.size()];
        for (int k = 0; k < servers.length; k++) {
            servers[k] = new Server(bases.get(k));
        }
        this.timeout = timeout;
        this.retryAfterNanos = retryAfter.toNanos();
        this.auth = token == null ? null : "Bearer " + token;
        this.http = http;
    }

    /** The servers' base URLs, for messages and tests. */
    List<String> bases() {
        List<String> l = new ArrayList<>();
        for (Server s : servers) {
            l.add(s.base);
        }
        return l;
    }

    /**
     * GETs path (starting with '/') from the servers, and returns the body of the first 200
     * answer. Servers passed over when the call starts are asked last, so a call fails only when
     * every server failed; each server is asked at most once per call.
     */
    String get(String path) {
        int n = servers.length;
        int start = preferred.get();
        long now = System.nanoTime();
        // Which servers are passed over is decided once, at the start of the call: a server that
        // fails during the call is not asked again in the second pass.
        boolean[] down = new boolean[n];
        for (int k = 0; k < n; k++) {
            long u = servers[k].downUntil;
            down[k] = u != 0 && u - now > 0;
        }
        LeafdException last = null;
        // First the servers not passed over, in order from the preferred one; then the others.
        for (int pass = 0; pass < 2; pass++) {
            for (int k = 0; k < n; k++) {
                int idx = (start + k) % n;
                Server s = servers[idx];
                if ((pass == 0) == down[idx]) {
                    continue;
                }
                try {
                    String body = send(s, path);
                    s.downUntil = 0;
                    if (idx != start) {
                        preferred.set(idx);
                    }
                    return body;
                } catch (LeafdException e) {
                    if (!e.retryable()) {
                        throw e;
                    }
                    if (LeafdException.UNREACHABLE.equals(e.code())) {
                        long until = System.nanoTime() + retryAfterNanos;
                        s.downUntil = until == 0 ? 1 : until;
                    }
                    last = e;
                }
            }
        }
        throw last;
    }

    private String send(Server s, String path) {
        HttpRequest.Builder rb = HttpRequest.newBuilder(URI.create(s.base + path))
                .timeout(timeout)
                .header("Accept", "application/json")
                .GET();
        if (auth != null) {
            rb.header("Authorization", auth);
        }
        // HttpClient's request timeout covers the headers only: the whole exchange, body
        // included, is bounded here, and a stalled one is cancelled.
        CompletableFuture<HttpResponse<String>> f = http.sendAsync(rb.build(), info -> info.statusCode() == 200
                ? HttpResponse.BodySubscribers.ofString(StandardCharsets.UTF_8)
                : new Capped(MAX_ERROR_BODY));
        HttpResponse<String> resp;
        try {
            resp = f.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            f.cancel(true);
            throw new LeafdException(LeafdException.UNREACHABLE, 0,
                    "GET " + s.base + path + ": no whole answer within " + timeout.toMillis() + " ms", e);
        } catch (ExecutionException e) {
            Throwable c = e.getCause() == null ? e : e.getCause();
            throw new LeafdException(LeafdException.UNREACHABLE, 0,
                    "GET " + s.base + path + ": " + c, c);
        } catch (InterruptedException e) {
            f.cancel(true);
            Thread.currentThread().interrupt();
            throw new LeafdException(LeafdException.INTERRUPTED, 0, "GET " + s.base + path + ": interrupted", e);
        }
        int st = resp.statusCode();
        if (st == 200) {
            return resp.body();
        }
        throw errorOf(s.base + path, st, resp.body());
    }

    /** A body read up to a limit; the rest is not read (the connection is dropped). */
    static final class Capped implements HttpResponse.BodySubscriber<String> {
        private final int cap;
        private final ByteArrayOutputStream buf = new ByteArrayOutputStream();
        private final CompletableFuture<String> result = new CompletableFuture<>();
        private Flow.Subscription sub;

        Capped(int cap) {
            this.cap = cap;
        }

        @Override
        public CompletionStage<String> getBody() {
            return result;
        }

        @Override
        public void onSubscribe(Flow.Subscription s) {
            sub = s;
            s.request(Long.MAX_VALUE);
        }

        @Override
        public void onNext(List<ByteBuffer> items) {
            if (result.isDone()) {
                return;
            }
            for (ByteBuffer b : items) {
                int take = Math.min(b.remaining(), cap - buf.size());
                byte[] a = new byte[take];
                b.get(a);
                buf.write(a, 0, take);
            }
            if (buf.size() >= cap) {
                result.complete(text());
                sub.cancel();
            }
        }

        @Override
        public void onError(Throwable t) {
            result.completeExceptionally(t);
        }

        @Override
        public void onComplete() {
            result.complete(text());
        }

        private String text() {
            return new String(buf.toByteArray(), StandardCharsets.UTF_8);
        }
    }

    /** The error of a non-200 answer: leafd's {"error":{"code","message"}}, or a bad answer. */
    static LeafdException errorOf(String where, int status, String body) {
        try {
            Object v = Json.parse(body);
            if (v instanceof Map) {
                Object e = ((Map<?, ?>) v).get("error");
                if (e instanceof Map) {
                    Object code = ((Map<?, ?>) e).get("code");
                    Object msg = ((Map<?, ?>) e).get("message");
                    if (code instanceof String && !((String) code).isEmpty()) {
                        return new LeafdException((String) code, status,
                                msg instanceof String ? (String) msg : "");
                    }
                }
            }
        } catch (IllegalArgumentException ignored) {
            // not leafd's JSON: a proxy's page
        }
        String snippet = body.length() > 200 ? body.substring(0, 200) + "…" : body;
        // Without a code, a 5xx is taken as a server that cannot serve now (a proxy's 502),
        // which another server may serve: keep its status so that it is retryable.
        return new LeafdException(LeafdException.BAD_ANSWER, status,
                "GET " + where + ": HTTP " + status + " without leafd's error body: " + snippet.strip());
    }
}
