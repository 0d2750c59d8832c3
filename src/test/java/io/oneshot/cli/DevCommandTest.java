package io.oneshot.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.testing.Api;
import io.oneshot.testing.Ports;
import io.oneshot.testing.TestDatabase;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code oneshot dev} as a user runs it: its own process, its own PostgreSQL, killed and back. */
class DevCommandTest {
  @TempDir Path tmp;
  private final List<Process> started = new ArrayList<>();

  @AfterEach
  void stopAll() throws Exception {
    for (Process p : started) {
      if (p.isAlive()) {
        p.destroy();
        if (!p.waitFor(30, TimeUnit.SECONDS)) {
          p.destroyForcibly();
        }
      }
    }
    stopLeftoverPostgres(tmp.resolve("data"));
  }

  /** Starts {@code oneshot dev} and waits until it says where its API is. */
  private Dev startDev(Path data, int port) throws Exception {
    Path out = Files.createTempFile(tmp, "dev", ".out");
    Path err = Files.createTempFile(tmp, "dev", ".err");
    ProcessBuilder pb =
        new ProcessBuilder(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Dio.netty.noUnsafe=true",
                // Its temporary files (Vert.x's file cache, the run directory, the embedded
                // PostgreSQL's probe of the system) with the test's: a dev killed on purpose cannot
                // delete them. The PostgreSQL binaries, extracted once, stay shared.
                "-Djava.io.tmpdir=" + Files.createDirectories(tmp.resolve("java-tmp")),
                "-Dot.epg.working-dir="
                    + Path.of(System.getProperty("java.io.tmpdir"), "embedded-pg"),
                "-cp",
                System.getProperty("java.class.path"),
                "io.oneshot.cli.Main",
                "dev",
                "--data-dir",
                data.toString(),
                "--port",
                Integer.toString(port),
                "--demo=first")
            .redirectOutput(out.toFile())
            .redirectError(err.toFile());
    pb.environment().remove("ONESHOT_DATABASE_URL");
    Process p = pb.start();
    started.add(p);
    Pattern api = Pattern.compile("API: +(http://127\\.0\\.0\\.1:\\d+)");
    Pattern token = Pattern.compile("token: +(\\S+)");
    await()
        .atMost(90, TimeUnit.SECONDS)
        .failFast("oneshot dev exited", () -> !p.isAlive())
        .until(() -> Files.readString(out).contains("Ctrl-C stops"));
    String text = Files.readString(out);
    Matcher a = api.matcher(text);
    Matcher t = token.matcher(text);
    assertThat(a.find()).as(text).isTrue();
    assertThat(t.find()).as(text).isTrue();
    return new Dev(p, a.group(1), t.group(1), out, err);
  }

  record Dev(Process process, String url, String token, Path out, Path err) {
    Api api() {
      return new Api(url, token);
    }
  }

  private static String status(Dev d, long id) {
    return d.api().get("/api/v1/builds/" + id).json().path("status").asText();
  }

  @Test
  void runsOnItsOwnPostgresKeepsBuildsAcrossAKillAndStopsCleanly() throws Exception {
    Path data = tmp.resolve("data");
    // Started again on it after a kill: its running attempts report to this address.
    int port = Ports.stable();
    Dev dev = startDev(data, port);
    assertThat(dev.url()).isEqualTo("http://127.0.0.1:" + port);
    // The first start on a new data directory shows a demo build; later starts do not.
    await()
        .atMost(60, TimeUnit.SECONDS)
        .until(() -> Files.readString(dev.out()).contains("Demo: build 1 queued"));

    Path env = data.resolve("dev.env");
    assertThat(Files.readString(env))
        .isEqualTo(
            "ONESHOT_URL="
                + dev.url()
                + "\nONESHOT_TOKEN="
                + dev.token()
                + "\nexport ONESHOT_URL ONESHOT_TOKEN\n");
    assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(env)))
        .isEqualTo("rw-------");

    // Route demo takes two at a time: two builds run, the third waits in the queue. Each waits
    // for a file in its own work directory (an isolated attempt sees nothing else of the test's).
    List<Long> ids = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      ids.add(
          dev.api()
              .submitScript(
                  "{\"org\": \"demo\"}",
                  "while [ ! -e gate ]; do sleep 0.1; done; echo done-" + i));
    }
    await()
        .atMost(60, TimeUnit.SECONDS)
        .until(
            () ->
                status(dev, ids.get(0)).equals("running")
                    && status(dev, ids.get(1)).equals("running"));
    assertThat(status(dev, ids.get(2))).isEqualTo("pending");

    // A second dev on the same directory refuses before it touches the first one's database.
    StringWriter refused = new StringWriter();
    int code =
        Main.commandLine(new PrintWriter(new StringWriter()), new PrintWriter(refused, true))
            .execute("dev", "--data-dir", data.toString(), "--port", "0");
    assertThat(code).isEqualTo(Main.USAGE);
    assertThat(refused.toString())
        .contains(
            "oneshot dev is already running on "
                + data
                + " (pid "
                + dev.process().pid()
                + "); stop it first");
    assertThat(status(dev, ids.get(0))).isEqualTo("running");
    assertThat(status(dev, ids.get(2))).isEqualTo("pending");

    dev.process().destroyForcibly().waitFor();

    Dev again = startDev(data, port);
    assertThat(again.token()).isEqualTo(dev.token());
    assertThat(Files.readString(again.out())).doesNotContain("Demo:");
    await()
        .atMost(90, TimeUnit.SECONDS)
        .until(
            () -> {
              for (long id : ids) {
                Path work = data.resolve("runs").resolve("oneshot-" + id + "-1").resolve("work");
                if (Files.isDirectory(work) && !Files.exists(work.resolve("gate"))) {
                  Files.writeString(work.resolve("gate"), "open");
                }
              }
              return ids.stream().allMatch(id -> status(again, id).equals("succeeded"));
            });
    for (int i = 0; i < 3; i++) {
      JsonNode b = again.api().get("/api/v1/builds/" + ids.get(i)).json();
      assertThat(b.path("attempt").asInt()).isEqualTo(1);
      assertThat(again.api().get("/api/v1/builds/" + ids.get(i) + "/logs").text())
          .contains("done-" + i);
    }

    again.process().destroy();
    assertThat(again.process().waitFor(60, TimeUnit.SECONDS)).isTrue();
    assertThat(Files.readString(again.err())).contains("oneshot stopped.");
    assertThat(data.resolve("postgres/postmaster.pid")).doesNotExist();
  }

  @Test
  void aPortInUseIsAUsageErrorThatSaysSo() throws Exception {
    try (ServerSocket taken = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
      StringWriter err = new StringWriter();
      int code =
          Main.commandLine(new PrintWriter(new StringWriter()), new PrintWriter(err, true))
              .execute(
                  "dev",
                  "--data-dir",
                  tmp.resolve("d").toString(),
                  "--database-url",
                  TestDatabase.url(),
                  "--port",
                  Integer.toString(taken.getLocalPort()));
      assertThat(code).isEqualTo(Main.USAGE);
      assertThat(err.toString())
          .contains(
              "port "
                  + taken.getLocalPort()
                  + " on 127.0.0.1 is in use; pass --port with another one");
      // Said before anything is made: no embedded PostgreSQL started, no data directory left.
      StringWriter out = new StringWriter();
      int embedded =
          Main.commandLine(new PrintWriter(out, true), new PrintWriter(new StringWriter(), true))
              .execute(
                  "dev",
                  "--data-dir",
                  tmp.resolve("e").toString(),
                  "--port",
                  Integer.toString(taken.getLocalPort()));
      assertThat(embedded).isEqualTo(Main.USAGE);
      assertThat(out.toString()).doesNotContain("PostgreSQL");
      assertThat(tmp.resolve("e")).doesNotExist();
    }
  }

  /**
   * Where {@code oneshot dev} keeps its data when not told, in each environment: as a user's shell
   * would put it, after ONESHOT_DATA_DIR, XDG_DATA_HOME, then HOME (not the account's home from the
   * password database, which sudo, a container or a test's own HOME would not change).
   */
  @Test
  void theDefaultDataDirectoryFollowsTheEnvironment() throws Exception {
    assertThat(defaultDataDir(java.util.Map.of("HOME", "/h")))
        .isEqualTo("/h/.local/share/oneshot/dev");
    assertThat(defaultDataDir(java.util.Map.of("HOME", "/h", "XDG_DATA_HOME", "/x")))
        .isEqualTo("/x/oneshot/dev");
    assertThat(
            defaultDataDir(
                java.util.Map.of("HOME", "/h", "XDG_DATA_HOME", "/x", "ONESHOT_DATA_DIR", "/d")))
        .isEqualTo("/d");
  }

  /** The data directory {@code oneshot dev --help} names as its default, under {@code env}. */
  private static String defaultDataDir(java.util.Map<String, String> env) throws Exception {
    ProcessBuilder pb =
        new ProcessBuilder(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Xshare:auto",
                "-XX:TieredStopAtLevel=1",
                "-Dpicocli.usage.width=1000", // a path on one line
                "-cp",
                System.getProperty("java.class.path"),
                "io.oneshot.cli.Main",
                "dev",
                "--help")
            .redirectErrorStream(true);
    pb.environment().keySet().removeAll(List.of("HOME", "XDG_DATA_HOME", "ONESHOT_DATA_DIR"));
    pb.environment().putAll(env);
    Process p = pb.start();
    String help = new String(p.getInputStream().readAllBytes()).replaceAll("\\s+", " ");
    assertThat(p.waitFor()).as(help).isZero();
    Matcher m =
        Pattern.compile("Default: (\\S+)").matcher(help.substring(help.indexOf("--data-dir")));
    assertThat(m.find()).as(help).isTrue();
    return m.group(1);
  }

  private static void stopLeftoverPostgres(Path data) throws Exception {
    Path pid = data.resolve("postgres/postmaster.pid");
    if (Files.exists(pid)) {
      long p = Long.parseLong(Files.readAllLines(pid).get(0).strip());
      ProcessHandle.of(p).ifPresent(ProcessHandle::destroy);
    }
  }
}
