package io.oneshot.e2e;

import static io.oneshot.testing.TestServer.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.oneshot.launch.local.LocalCommand;
import io.oneshot.launch.local.LocalLauncher;
import io.oneshot.testing.Heavy;
import io.oneshot.testing.Limits;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Builds from enqueue to outcome through the local launcher: each attempt a real provisionerd
 * process running a real script.
 */
@Heavy
class EndToEndTest {
  private TestServer t;
  @TempDir Path tmp;

  @AfterEach
  void tearDown() {
    if (t != null) {
      t.close();
    }
  }

  private static List<String> log(long id, String stream) {
    return Sql.logLines(id, stream);
  }

  private static boolean logged(long id, String text) {
    return Sql.count(
            "SELECT count(*) FROM oneshot.build_logs WHERE build_id = ? AND text = ?", id, text)
        > 0;
  }

  private static long pidIn(Path file) throws Exception {
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(() -> Files.exists(file) && !Files.readString(file).isBlank());
    return Long.parseLong(Files.readString(file).strip());
  }

  private static boolean gone(long pid) {
    return ProcessHandle.of(pid).map(h -> !h.isAlive()).orElse(true);
  }

  @Test
  void twoHundredScriptBuildsAcrossThreeRoutesEndRightWithTheirWholeLogs() {
    t =
        TestServer.with()
            .dispatch(
                "maxConcurrent: 8, pollInterval: 500ms, rescueInterval: 1s, heartbeatInterval: 500ms")
            .start();
    Limits.track();
    int n = 200;
    List<Long> ids = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      String team = "abc".substring(i % 3, i % 3 + 1);
      int code = i % 5 == 0 ? 3 : 0;
      ids.add(
          t.api.submitScript(
              "{\"team\": \"" + team + "\"}",
              "echo out-" + i + "-1; echo err-" + i + " >&2; echo out-" + i + "-2; exit " + code));
    }
    await()
        .atMost(5, TimeUnit.MINUTES)
        .until(
            () -> Sql.count("SELECT count(*) FROM oneshot.builds WHERE finished_at IS NULL") == 0);

    for (int i = 0; i < n; i++) {
      long id = ids.get(i);
      boolean fails = i % 5 == 0;
      Map<String, Object> b =
          Sql.rows(
                  "SELECT status, exit_code, error, route, attempt FROM oneshot.builds WHERE id = ?",
                  id)
              .get(0);
      assertThat(b.get("status")).as("build %d", id).isEqualTo(fails ? "failed" : "succeeded");
      assertThat(b.get("exit_code")).isEqualTo(fails ? 3 : 0);
      assertThat(b.get("route")).isEqualTo("abc".substring(i % 3, i % 3 + 1));
      assertThat(b.get("attempt")).isEqualTo(1);
      if (fails) {
        assertThat(b.get("error")).isEqualTo("script exited with code 3");
      }
      assertThat(log(id, "stdout")).containsExactly("out-" + i + "-1", "out-" + i + "-2");
      assertThat(log(id, "stderr")).containsExactly("err-" + i);
    }
    Map<String, Integer> max = Limits.maxConcurrency();
    assertThat(max.get("global")).isLessThanOrEqualTo(8);
    assertThat(max.get("route:a")).isLessThanOrEqualTo(4);
    assertThat(max.get("route:b")).isLessThanOrEqualTo(3);
    assertThat(max.get("route:c")).isLessThanOrEqualTo(2);
    // Every provisionerd exited after reporting, and its directory went with it.
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(
            () -> {
              try (var files = Files.list(t.runDir)) {
                return files.findAny().isEmpty();
              }
            });
  }

  /**
   * The runner API as provisionerd sees it, in front of the real one: {@code complete} is answered
   * 503 for {@code refuseFor} from its first arrival; every other call passes. It counts the
   * heartbeats that pass while the outcome is being refused.
   */
  private static final class RefusesOutcomeFor implements AutoCloseable {
    private final com.sun.net.httpserver.HttpServer server;
    private final java.net.http.HttpClient http = java.net.http.HttpClient.newHttpClient();
    private final long refuseForNanos;
    private volatile String target;
    private volatile long firstComplete;
    final java.util.concurrent.atomic.AtomicInteger refused =
        new java.util.concurrent.atomic.AtomicInteger();
    final java.util.concurrent.atomic.AtomicInteger heartbeatsMeanwhile =
        new java.util.concurrent.atomic.AtomicInteger();

    RefusesOutcomeFor(java.time.Duration refuseFor) throws java.io.IOException {
      this.refuseForNanos = refuseFor.toNanos();
      server =
          com.sun.net.httpserver.HttpServer.create(
              new java.net.InetSocketAddress(java.net.InetAddress.getLoopbackAddress(), 0), 0);
      server.setExecutor(java.util.concurrent.Executors.newVirtualThreadPerTaskExecutor());
      server.createContext("/", this::handle);
      server.start();
    }

    String url() {
      return "http://127.0.0.1:" + server.getAddress().getPort();
    }

    private boolean refusing() {
      return firstComplete != 0 && System.nanoTime() - firstComplete < refuseForNanos;
    }

    private void handle(com.sun.net.httpserver.HttpExchange ex) throws java.io.IOException {
      try (ex) {
        String path = ex.getRequestURI().getPath();
        byte[] body = ex.getRequestBody().readAllBytes();
        if (path.equals("/api/v1/runner/complete")) {
          synchronized (this) {
            if (firstComplete == 0) {
              firstComplete = System.nanoTime();
            }
          }
          if (refusing()) {
            refused.incrementAndGet();
            ex.sendResponseHeaders(503, -1);
            return;
          }
        } else if (path.equals("/api/v1/runner/heartbeat") && refusing()) {
          heartbeatsMeanwhile.incrementAndGet();
        }
        java.net.http.HttpRequest.Builder forward =
            java.net.http.HttpRequest.newBuilder(java.net.URI.create(target + ex.getRequestURI()))
                .method(
                    ex.getRequestMethod(),
                    java.net.http.HttpRequest.BodyPublishers.ofByteArray(body))
                .header("Authorization", ex.getRequestHeaders().getFirst("Authorization"))
                .header("Content-Type", "application/json");
        ex.getRequestHeaders().entrySet().stream()
            .filter(
                h -> h.getKey().toLowerCase(java.util.Locale.ROOT).startsWith("oneshot-runner-"))
            .forEach(h -> forward.header(h.getKey(), h.getValue().get(0)));
        java.net.http.HttpResponse<byte[]> r =
            http.send(forward.build(), java.net.http.HttpResponse.BodyHandlers.ofByteArray());
        ex.sendResponseHeaders(r.statusCode(), r.body().length == 0 ? -1 : r.body().length);
        ex.getResponseBody().write(r.body());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }

    @Override
    public void close() {
      server.stop(0);
    }
  }

  @Test
  void anOutcomeRefusedForLongerThanTheHangTimeoutLandsBecauseHeartbeatsGoOn() throws Exception {
    // The API takes no outcome for 4 s, twice the route's hang timeout: provisionerd keeps
    // retrying it, and its heartbeats show the dispatcher that the attempt is alive meanwhile.
    try (RefusesOutcomeFor api = new RefusesOutcomeFor(java.time.Duration.ofSeconds(4))) {
      // The HTTP proxy's pooled connections say nothing of whose call each carries.
      io.oneshot.testing.CapturingLauncher launcher =
          io.oneshot.testing.CapturingLauncher.local(tmp, java.util.Map.of());
      launcher.takeRunnersAtTheirWord();
      t =
          TestServer.with()
              .launcher(launcher)
              .api(
                  "{listen: \"127.0.0.1:0\", publicUrl: \""
                      + api.url()
                      + "\", adminToken: \""
                      + TestServer.ADMIN_TOKEN
                      + "\"}")
              .routes("routes: [{name: a, hangTimeout: 2s}]")
              .start();
      api.target = "http://127.0.0.1:" + t.server.port();
      long id = t.api.submitScript("{}", "echo done");
      await()
          .atMost(60, TimeUnit.SECONDS)
          .until(() -> List.of("succeeded", "failed").contains(status(id)));
      assertThat(status(id))
          .as("%s", Sql.value("SELECT error FROM oneshot.builds WHERE id = ?", id))
          .isEqualTo("succeeded");
      assertThat(api.refused.get()).isPositive();
      assertThat(api.heartbeatsMeanwhile.get()).isPositive();
      assertThat(logged(id, "done")).isTrue();
    }
  }

  /** A running build whose script sleeps: its id, the script's pid and provisionerd's. */
  private record Sleeper(long id, long scriptPid, long provisionerd) {}

  private Sleeper startSleeper() throws Exception {
    Path pidFile = tmp.resolve("pid");
    long id = t.api.submitScript("{}", "echo $$ > " + pidFile + "; echo started; sleep 600");
    long scriptPid = pidIn(pidFile);
    await().atMost(30, TimeUnit.SECONDS).until(() -> logged(id, "started"));
    long provisionerd =
        ((LocalLauncher) t.server.launcher()).pid("oneshot-" + id + "-1").orElseThrow();
    return new Sleeper(id, scriptPid, provisionerd);
  }

  @Test
  void aCanceledRunningBuildEndsCanceledAndItsProcessesAreGone() throws Exception {
    t = TestServer.with().routes("routes: [{name: a, cancelGrace: 5s}]").start();
    Sleeper sleeper = startSleeper();
    long id = sleeper.id();
    long scriptPid = sleeper.scriptPid();
    long provisionerd = sleeper.provisionerd();

    assertThat(t.api.post("/api/v1/builds/" + id + "/cancel", "{}").status()).isEqualTo(202);
    await().atMost(15, TimeUnit.SECONDS).until(() -> status(id).equals("canceled"));
    await().atMost(15, TimeUnit.SECONDS).until(() -> gone(scriptPid) && gone(provisionerd));
    assertThat(log(id, "system"))
        .anyMatch(l -> l.startsWith("cancel requested; sending SIGTERM to process"));
    assertThat(Sql.value("SELECT error FROM oneshot.builds WHERE id = ?", id))
        .isEqualTo("canceled");
  }

  @Test
  void aProvisionerdKilledAfterAcquireFailsTheBuildAndTakesItsScriptAlong() throws Exception {
    // Lease 1s, grace 1s: the build fails 17s after its last heartbeat (lease, grace, margin).
    t = TestServer.with().routes("routes: [{name: a, hangTimeout: 2s, cancelGrace: 1s}]").start();
    Sleeper sleeper = startSleeper();
    long id = sleeper.id();
    long scriptPid = sleeper.scriptPid();
    long provisionerd = sleeper.provisionerd();

    new ProcessBuilder("kill", "-KILL", Long.toString(provisionerd)).start().waitFor();
    await().atMost(60, TimeUnit.SECONDS).until(() -> status(id).equals("failed"));
    assertThat((String) Sql.value("SELECT error FROM oneshot.builds WHERE id = ?", id))
        .startsWith(
            "provisionerd ended without reporting an outcome: process "
                + provisionerd
                + " exited with code 137");
    await().atMost(15, TimeUnit.SECONDS).until(() -> gone(scriptPid));
    assertThat(Sql.value("SELECT attempt FROM oneshot.builds WHERE id = ?", id)).isEqualTo(1);
  }

  @Test
  void aProvisionerdKilledBeforeAcquireIsReplacedByAttemptTwo() throws Exception {
    // An attempt that never acquires: provisionerd replaced by a process that only waits.
    Path marker = tmp.resolve("started");
    t =
        TestServer.with()
            .routes("routes: [{name: a, maxAttempts: 2}]")
            .launcher(
                new LocalLauncher(
                    tmp.resolve("runs"),
                    List.of("sh", "-c", "echo $$ >> " + marker + "; exec sleep 600"),
                    LocalCommand.baseEnvironment(List.of())))
            .start();
    long id = t.api.submitScript("{}", "true");
    LocalLauncher launcher = (LocalLauncher) t.server.launcher();
    await()
        .atMost(15, TimeUnit.SECONDS)
        .until(() -> launcher.pid("oneshot-" + id + "-1").isPresent());
    long first = launcher.pid("oneshot-" + id + "-1").orElseThrow();
    new ProcessBuilder("kill", "-KILL", Long.toString(first)).start().waitFor();

    await()
        .atMost(15, TimeUnit.SECONDS)
        .until(() -> launcher.pid("oneshot-" + id + "-2").isPresent());
    assertThat(status(id)).isEqualTo("launching");
    assertThat(Sql.value("SELECT attempt FROM oneshot.builds WHERE id = ?", id)).isEqualTo(2);
    assertThat(
            (String)
                Sql.value(
                    "SELECT reason FROM oneshot.build_events WHERE build_id = ? AND to_status = 'pending'"
                        + " AND from_status = 'launching'",
                    id))
        .startsWith(
            "requeued after attempt 1 of 2: attempt oneshot-"
                + id
                + "-1 ended before provisionerd acquired the build: process "
                + first
                + " exited with code 137");

    long second = launcher.pid("oneshot-" + id + "-2").orElseThrow();
    new ProcessBuilder("kill", "-KILL", Long.toString(second)).start().waitFor();
    await().atMost(15, TimeUnit.SECONDS).until(() -> status(id).equals("failed"));
    assertThat((String) Sql.value("SELECT error FROM oneshot.builds WHERE id = ?", id))
        .endsWith("(attempt 2 of 2)");
    Optional<Long> none = launcher.pid("oneshot-" + id + "-3");
    assertThat(none).isEmpty();
  }

  @Test
  void provisionerdEnforcesTheRouteTimeout() throws Exception {
    t = TestServer.with().routes("routes: [{name: a, timeout: 2s, cancelGrace: 1s}]").start();
    Path pidFile = tmp.resolve("pid");
    long id = t.api.submitScript("{}", "echo $$ > " + pidFile + "; sleep 600");
    long scriptPid = pidIn(pidFile);
    await().atMost(30, TimeUnit.SECONDS).until(() -> status(id).equals("failed"));
    assertThat(Sql.value("SELECT error FROM oneshot.builds WHERE id = ?", id))
        .isEqualTo("timed out after 2s");
    await().atMost(10, TimeUnit.SECONDS).until(() -> gone(scriptPid));
  }
}
