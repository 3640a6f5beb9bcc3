package io.leafd.client;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.File;
import java.io.IOException;
import java.net.HttpURLConnection;
import java.net.ServerSocket;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

/**
 * A real leafd process for the tests: built once per test run with {@code go build ./cmd/leafd}
 * from the repository that holds clients/java, started with LEAFD_* variables on a free port.
 */
final class Leafd implements AutoCloseable {
    private static Path binary;

    /** The repository's root: clients/java's grandparent. */
    static Path repoRoot() {
        Path p = Path.of(System.getProperty("user.dir")).toAbsolutePath();
        for (Path q = p; q != null; q = q.getParent()) {
            if (Files.exists(q.resolve("go.mod")) && Files.isDirectory(q.resolve("cmd/leafd"))) {
                return q;
            }
        }
        throw new IllegalStateException("no leafd repository (go.mod, cmd/leafd) above " + p);
    }

    /** Builds leafd once; LEAFD_JAVA_TEST_BINARY names a binary built already. */
    static synchronized Path binary() throws Exception {
        if (binary != null) {
            return binary;
        }
        String given = System.getenv("LEAFD_JAVA_TEST_BINARY");
        if (given != null && !given.isEmpty()) {
            binary = Path.of(given);
            return binary;
        }
        Path root = repoRoot();
        Path out = root.resolve("clients/java/target/leafd-test/leafd");
        Files.createDirectories(out.getParent());
        Process p = new ProcessBuilder("go", "build", "-o", out.toString(), "./cmd/leafd")
                .directory(root.toFile())
                .redirectErrorStream(true)
                .start();
        String log = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(300, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IllegalStateException("go build ./cmd/leafd failed: " + log);
        }
        binary = out;
        return binary;
    }

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            s.setReuseAddress(true);
            return s.getLocalPort();
        }
    }

    /** The LEAFD_* variables of a server over a SQLite file. */
    static Map<String, String> sqliteEnv(Path db) {
        Map<String, String> env = new HashMap<>();
        env.put("LEAFD_STORE_DRIVER", "sqlite");
        env.put("LEAFD_STORE_DSN", "file:" + db);
        return env;
    }

    /**
     * The test database server: LEAFD_TEST_MYSQL_DSN in go-sql-driver's form
     * {@code user[:password]@tcp(host:port)/}, default {@code root@tcp(127.0.0.1:3306)/}, as the
     * Go tests take it.
     */
    static final class MysqlDsn {
        final String user;
        final String password; // null: none
        final String host;
        final String port;

        MysqlDsn(String dsn) {
            java.util.regex.Matcher m = java.util.regex.Pattern
                    .compile("([^:@/]*)(?::(.*))?@tcp\\(([^:()]+)(?::([0-9]+))?\\)/[^?]*(\\?.*)?")
                    .matcher(dsn);
            if (!m.matches()) {
                throw new IllegalArgumentException("LEAFD_TEST_MYSQL_DSN " + dsn
                        + " is not of the form user[:password]@tcp(host:port)/");
            }
            user = m.group(1);
            password = m.group(2);
            host = m.group(3);
            port = m.group(4) == null ? "3306" : m.group(4);
        }

        static MysqlDsn fromEnv() {
            String d = System.getenv("LEAFD_TEST_MYSQL_DSN");
            return new MysqlDsn(d == null || d.isEmpty() ? "root@tcp(127.0.0.1:3306)/" : d);
        }

        /** A DSN for leafd of database db. */
        String forDb(String db) {
            return forDb(db, host, port);
        }

        /** A DSN for leafd of database db at another address (a proxy in front of the server). */
        String forDb(String db, String atHost, String atPort) {
            return user + (password != null ? ":" + password : "") + "@tcp(" + atHost + ":" + atPort + ")/" + db
                    + "?parseTime=true";
        }

        /** A mysql client command with args after the connection's. */
        Process mysql(String... args) throws IOException {
            List<String> cmd = new ArrayList<>(List.of("mysql", "--protocol=tcp", "-h" + host, "-P" + port, "-u" + user));
            cmd.addAll(List.of(args));
            ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
            if (password != null) {
                pb.environment().put("MYSQL_PWD", password);
            }
            return pb.start();
        }

        @Override
        public String toString() {
            return user + "@" + host + ":" + port;
        }
    }

    /**
     * A fresh MariaDB database on the LEAFD_TEST_MYSQL_DSN server, made with the mysql client;
     * skips the test when the database cannot be reached, unless LEAFD_TEST_REQUIRE_MYSQL=1, when
     * it fails.
     */
    static String createMysqlDatabase() throws Exception {
        String name = "leafd_java_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
        String err;
        MysqlDsn dsn;
        try {
            dsn = MysqlDsn.fromEnv();
        } catch (IllegalArgumentException e) {
            throw new IllegalStateException(e.getMessage(), e); // a wrong setting fails, never skips
        }
        try {
            Process p = dsn.mysql("-e", "CREATE DATABASE " + name);
            err = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (p.waitFor(30, TimeUnit.SECONDS) && p.exitValue() == 0) {
                return name;
            }
        } catch (IOException e) {
            err = e.toString();
        }
        if ("1".equals(System.getenv("LEAFD_TEST_REQUIRE_MYSQL"))) {
            throw new IllegalStateException("LEAFD_TEST_REQUIRE_MYSQL=1 but MariaDB at " + dsn + " is not usable: " + err);
        }
        assumeTrue(false, "MariaDB at " + dsn + " is not usable (set LEAFD_TEST_REQUIRE_MYSQL=1 to fail): " + err);
        return null;
    }

    /** One value of a SQL query with the mysql client. */
    static String mysqlQuery(String db, String sql) throws Exception {
        Process p = MysqlDsn.fromEnv().mysql("-N", "-B", db, "-e", sql);
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
        if (!p.waitFor(30, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IllegalStateException("mysql " + sql + ": " + out);
        }
        return out;
    }

    static void dropMysqlDatabase(String name) {
        try {
            MysqlDsn.fromEnv().mysql("-e", "DROP DATABASE IF EXISTS " + name).waitFor(30, TimeUnit.SECONDS);
        } catch (Exception ignored) {
            // best effort
        }
    }

    static Map<String, String> mysqlEnv(String db) {
        Map<String, String> env = new HashMap<>();
        env.put("LEAFD_STORE_DRIVER", "mysql");
        env.put("LEAFD_STORE_DSN", MysqlDsn.fromEnv().forDb(db));
        return env;
    }

    /** Runs a leafd command (tag add, token add) to its end and returns its stdout. */
    static String run(Path dir, Map<String, String> env, String... args) throws Exception {
        List<String> cmd = new ArrayList<>();
        cmd.add(binary().toString());
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).directory(dir.toFile());
        environment(pb, env);
        File errFile = Files.createTempFile(dir, "cmd", ".err").toFile();
        pb.redirectError(errFile);
        Process p = pb.start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IllegalStateException("leafd " + String.join(" ", args) + " failed: " + out
                    + Files.readString(errFile.toPath()));
        }
        return out.trim();
    }

    /**
     * The process's environment: the test's own without LEAFD_JAVA_TEST_BINARY (leafd refuses
     * LEAFD_ variables it does not know), and env.
     */
    private static void environment(ProcessBuilder pb, Map<String, String> env) {
        pb.environment().remove("LEAFD_JAVA_TEST_BINARY");
        pb.environment().putAll(env);
    }

    final Path dir;
    final Map<String, String> env;
    final int port;
    private Process process;
    private int starts;

    /** A server on a free port with env (store, tags, …), started and ready. */
    Leafd(Path dir, Map<String, String> env) throws Exception {
        this(dir, env, freePort());
    }

    /** A server on the given port. */
    Leafd(Path dir, Map<String, String> env, int port) throws Exception {
        this.dir = dir;
        this.env = new HashMap<>(env);
        this.port = port;
        start();
    }

    String url() {
        return "http://127.0.0.1:" + port;
    }

    /** Starts the process (again, after kill) on the same port, and waits for /readyz. */
    void start() throws Exception {
        Map<String, String> e = new HashMap<>(env);
        e.put("LEAFD_HTTP_ADDR", "127.0.0.1:" + port);
        ProcessBuilder pb = new ProcessBuilder(binary().toString(), "serve").directory(dir.toFile());
        environment(pb, e);
        File log = dir.resolve("leafd-" + port + "-" + (++starts) + ".log").toFile();
        pb.redirectErrorStream(true).redirectOutput(log);
        process = pb.start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline) {
            if (!process.isAlive()) {
                throw new IllegalStateException("leafd exited " + process.exitValue() + ": " + Files.readString(log.toPath()));
            }
            if (status("/readyz") == 200) {
                return;
            }
            Thread.sleep(50);
        }
        throw new IllegalStateException("leafd not ready within 30 s: " + Files.readString(log.toPath()));
    }

    int status(String path) {
        try {
            HttpURLConnection c = (HttpURLConnection) new URL(url() + path).openConnection();
            c.setConnectTimeout(500);
            c.setReadTimeout(2000);
            int st = c.getResponseCode();
            c.disconnect();
            return st;
        } catch (IOException e) {
            return -1;
        }
    }

    /**
     * The sum of an unlabelled counter or gauge in the server's /metrics (Prometheus text); 0 when
     * the metric is not there.
     */
    double metric(String name) throws IOException {
        HttpURLConnection c = (HttpURLConnection) new URL(url() + "/metrics").openConnection();
        c.setConnectTimeout(2000);
        c.setReadTimeout(5000);
        String body;
        try (java.io.InputStream in = c.getInputStream()) {
            body = new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } finally {
            c.disconnect();
        }
        double sum = 0;
        for (String line : body.split("\n")) {
            if (line.startsWith(name + " ")) {
                sum += Double.parseDouble(line.substring(name.length() + 1).trim());
            }
        }
        return sum;
    }

    /** kill -9: no shutdown, the buffers' IDs and the snowflake lease are left as they are. */
    void kill9() throws Exception {
        process.destroyForcibly(); // SIGKILL on Unix
        process.waitFor(10, TimeUnit.SECONDS);
    }

    @Override
    public void close() throws Exception {
        if (process != null && process.isAlive()) {
            process.destroy(); // SIGTERM
            if (!process.waitFor(15, TimeUnit.SECONDS)) {
                process.destroyForcibly();
            }
        }
    }
}
