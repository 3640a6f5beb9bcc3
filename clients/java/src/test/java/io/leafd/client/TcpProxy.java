package io.leafd.client;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A TCP proxy on a free loopback port to one target, for the tests: it stands between leafd
 * servers and their database so that a test can make the database unreachable without stopping
 * it. {@link #cut} closes every proxied connection and refuses new ones (accepted and closed at
 * once) until {@link #restore}. Plain sockets and two threads per connection.
 */
final class TcpProxy implements AutoCloseable {
    private final String targetHost;
    private final int targetPort;
    private final ServerSocket listener;
    /** The connections proxied now: the accepted socket and the one to the target. */
    private final Map<Socket, Socket> open = new ConcurrentHashMap<>();
    private volatile boolean down;
    private volatile boolean closed;
    /** Connections proxied, proxied connections closed by cut(), connections refused while down. */
    final AtomicLong accepted = new AtomicLong();
    final AtomicLong cutOff = new AtomicLong();
    final AtomicLong refused = new AtomicLong();

    TcpProxy(String targetHost, int targetPort) throws IOException {
        this.targetHost = targetHost;
        this.targetPort = targetPort;
        this.listener = new ServerSocket(0, 200, InetAddress.getLoopbackAddress());
        Thread t = new Thread(this::acceptLoop, "tcp-proxy-accept");
        t.setDaemon(true);
        t.start();
    }

    int port() {
        return listener.getLocalPort();
    }

    /** The database is unreachable: every proxied connection is closed, new ones are refused. */
    void cut() {
        down = true;
        for (Socket c : open.keySet()) {
            Socket s = open.remove(c);
            if (s != null) {
                cutOff.incrementAndGet();
                closeQuietly(s);
            }
            closeQuietly(c);
        }
    }

    /** New connections are proxied again. */
    void restore() {
        down = false;
    }

    private void acceptLoop() {
        while (!closed) {
            Socket client;
            try {
                client = listener.accept();
            } catch (IOException e) {
                return; // closed
            }
            if (down) {
                refused.incrementAndGet();
                closeQuietly(client);
                continue;
            }
            Thread t = new Thread(() -> connect(client), "tcp-proxy-connect");
            t.setDaemon(true);
            t.start();
        }
    }

    private void connect(Socket client) {
        Socket server = new Socket();
        try {
            server.connect(new InetSocketAddress(targetHost, targetPort), 5000);
            client.setTcpNoDelay(true);
            server.setTcpNoDelay(true);
        } catch (IOException e) {
            closeQuietly(client);
            closeQuietly(server);
            return;
        }
        open.put(client, server);
        if (down) { // cut while connecting
            open.remove(client);
            refused.incrementAndGet();
            closeQuietly(client);
            closeQuietly(server);
            return;
        }
        accepted.incrementAndGet();
        pump(client, server, client, "tcp-proxy-up");
        pump(server, client, client, "tcp-proxy-down");
    }

    /** Copies from one socket to the other until either ends; then closes both. */
    private void pump(Socket from, Socket to, Socket key, String name) {
        Thread t = new Thread(() -> {
            byte[] buf = new byte[16 * 1024];
            try {
                InputStream in = from.getInputStream();
                OutputStream out = to.getOutputStream();
                int n;
                while ((n = in.read(buf)) >= 0) {
                    out.write(buf, 0, n);
                    out.flush();
                }
            } catch (IOException ignored) {
                // cut, or one side hung up
            } finally {
                open.remove(key);
                closeQuietly(from);
                closeQuietly(to);
            }
        }, name);
        t.setDaemon(true);
        t.start();
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException ignored) {
            // closing
        }
    }

    @Override
    public void close() {
        closed = true;
        try {
            listener.close();
        } catch (IOException ignored) {
            // closing
        }
        cut();
    }
}
