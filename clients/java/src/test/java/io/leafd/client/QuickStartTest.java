package io.leafd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The quick start of docs/clients-java.md, as written there, compiled and run against three real
 * servers over one MariaDB database (their URLs put in place of the example's).
 */
class QuickStartTest {
    @TempDir
    Path dir;

    @Test
    void quickStartProgramRuns() throws Exception {
        String doc = Files.readString(Leafd.repoRoot().resolve("docs/clients-java.md"));
        int at = doc.indexOf("## Quick start");
        assertTrue(at >= 0, "no quick start in docs/clients-java.md");
        Matcher m = Pattern.compile("```java\\n(.*?)```", Pattern.DOTALL).matcher(doc);
        assertTrue(m.find(at), "no java block in the quick start");
        String program = m.group(1);
        assertTrue(program.lines().count() <= 20, "the quick start is short: " + program.lines().count() + " lines");

        String db = Leafd.createMysqlDatabase();
        List<Leafd> servers = new ArrayList<>();
        try {
            Map<String, String> env = Leafd.mysqlEnv(db);
            env.put("LEAFD_SEGMENT_SEED_TAGS", "order:1000");
            Leafd.run(dir, env, "migrate");
            for (int k = 1; k <= 3; k++) {
                Leafd s = new Leafd(dir, env);
                servers.add(s);
                String example = "http://leafd" + k + ":8080";
                assertTrue(program.contains(example), "the quick start names " + example);
                program = program.replace(example, s.url());
            }
            Path src = dir.resolve("src/QuickStart.java");
            Path out = dir.resolve("out");
            Files.createDirectories(src.getParent());
            Files.createDirectories(out);
            Files.writeString(src, program);
            JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
            assertNotNull(javac, "no Java compiler in this JDK");
            String classes = Path.of(LeafdClient.class.getProtectionDomain().getCodeSource().getLocation().toURI())
                    .toString();
            ByteArrayOutputStream errors = new ByteArrayOutputStream();
            int rc = javac.run(null, null, errors, "-cp", classes, "-d", out.toString(), src.toString());
            assertEquals(0, rc, "the quick start does not compile: " + errors.toString(StandardCharsets.UTF_8));

            ByteArrayOutputStream printed = new ByteArrayOutputStream();
            PrintStream old = System.out;
            try (URLClassLoader loader = new URLClassLoader(new URL[] {out.toUri().toURL()},
                    LeafdClient.class.getClassLoader())) {
                System.setOut(new PrintStream(printed, true, StandardCharsets.UTF_8));
                loader.loadClass("QuickStart").getMethod("main", String[].class).invoke(null, (Object) new String[0]);
            } finally {
                System.setOut(old);
            }
            String line = printed.toString(StandardCharsets.UTF_8).trim();
            System.out.println("QuickStartTest: the program printed: " + line);
            Matcher p = Pattern.compile("(\\d+) \\[(\\d+), (\\d+), (\\d+), (\\d+), (\\d+)\\] SnowflakeId\\{id=(\\d+), .*")
                    .matcher(line);
            assertTrue(p.matches(), "the quick start printed: " + line);
            TreeSet<Long> ids = new TreeSet<>();
            long prev = 0;
            for (int g = 1; g <= 6; g++) {
                long id = Long.parseLong(p.group(g));
                assertTrue(id > 0, "ID " + id);
                if (g > 2) {
                    assertTrue(id > prev, "the batch ascends: " + line);
                }
                prev = id;
                ids.add(id);
            }
            assertEquals(6, ids.size(), "IDs twice: " + line);
            assertTrue(Long.parseLong(p.group(7)) > 0, line);
        } finally {
            for (Leafd s : servers) {
                s.close();
            }
            Leafd.dropMysqlDatabase(db);
        }
    }
}
