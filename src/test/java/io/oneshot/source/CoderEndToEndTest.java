package io.oneshot.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.oneshot.launch.local.LocalCommand;
import io.oneshot.launch.local.LocalLauncher;
import io.oneshot.testing.ChildJvm;
import io.oneshot.testing.CoderDatabase;
import io.oneshot.testing.FakeCoder;
import io.oneshot.testing.Heavy;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Coder's workspace builds run one pod (here: one local provisionerd) per build, through the coder
 * provisioner and the stand-in {@code coder} daemon ({@link FakeCoder}), against a database shaped
 * like Coder's: every job is run exactly once, by a daemon of its own build, and a build whose job
 * went elsewhere ends after its idle timeout.
 */
@Heavy
class CoderEndToEndTest {
  private final CoderDatabase coder = new CoderDatabase();
  private TestServer t;
  @TempDir Path tmp;
  private UUID org;
  private Path gate;
  private Path portFile;

  @BeforeEach
  void setUp() throws Exception {
    org = coder.organization("acme");
    Path runDir = Files.createDirectories(tmp.resolve("runs"));
    gate = tmp.resolve("gate");
    Map<String, String> env = LocalCommand.baseEnvironment(List.of());
    env.put("CODER_URL", coder.jdbcUrl());
    env.put("ONESHOT_CODER_BIN", FakeCoder.install(tmp.resolve("bin")).toString());
    env.put("FAKE_CODER_GATE", gate.toString());
    // Daemons bind their metrics port at once unless a test removes "port.go" first.
    portFile = tmp.resolve("port");
    Files.writeString(tmp.resolve("port.go"), "");
    env.put("FAKE_CODER_PORT_FILE", portFile.toString());
    env.put(
        "CODER_PROVISIONER_DAEMON_KEY_CODER_A",
        coder.provisionerKey(org, "key-a", Map.of("env", "a")));
    env.put(
        "CODER_PROVISIONER_DAEMON_KEY_CODER_B",
        coder.provisionerKey(org, "key-b", Map.of("env", "b")));
    env.put(
        "CODER_PROVISIONER_DAEMON_KEY_CODER_PLAIN",
        coder.provisionerKey(org, "key-plain", Map.of()));
    t =
        TestServer.with()
            .launchers(
                (vertx, cfg) ->
                    new LocalLauncher(
                        runDir,
                        LocalCommand.defaultCommand(
                            List.of(), ChildJvm.archive("provisionerd"), ChildJvm.classPath()),
                        env))
            .routes(
                """
                routes:
                  - {name: coder-a, tags: {env: a}, maxConcurrent: 4}
                  - {name: coder-b, tags: {env: b}, maxConcurrent: 4}
                  - {name: coder-plain, maxConcurrent: 4}
                sources:
                  - name: coder
                    kind: coder
                    databaseUrl: '%s'
                    pollInterval: 1h
                    idleTimeout: 3s
                    routes:
                      - {route: coder-a, organization: acme}
                      - {route: coder-b, organization: acme}
                      - {route: coder-plain, organization: acme}
                """
                    .formatted(coder.url))
            .start();
  }

  @AfterEach
  void tearDown() {
    if (t != null) {
      t.close();
    }
  }

  private static long count(String sql, Object... args) {
    return Sql.count(sql, args);
  }

  @Test
  void thirtyJobsInThreeTagSetsPostedInBurstsRunOncePerBuildAndBuildPerJob() throws Exception {
    // A job takes as long as a short terraform apply: a daemon is told to stop (SIGTERM) within
    // moments of taking its job, so it never finishes one and takes another first. Moments on a
    // 2-core machine starting two dozen JVMs at once (a provisionerd and a daemon a build) can be
    // seconds: with 1.5 s, once in CI, a daemon finished its job before it heard the signal.
    coder.applyMs = CoderDatabase.SHORT_APPLY_MS;
    Files.writeString(gate, "");
    for (int burst = 0; burst < 3; burst++) {
      coder.post(org, CoderDatabase.jobTags(Map.of("env", "a")), 4);
      coder.post(org, CoderDatabase.jobTags(Map.of("env", "b")), 3);
      coder.post(org, CoderDatabase.jobTags(Map.of()), 3);
    }
    await()
        .atMost(Duration.ofMinutes(4))
        .until(
            () ->
                // ... or a daemon took a second job: no point waiting for the rest.
                coder.aDaemonTookTwoJobs()
                    || coder.count("completed_at IS NOT NULL") == 30
                        && count(
                                "SELECT count(*) FROM oneshot.builds WHERE status IN ('pending',"
                                    + " 'launching', 'running')")
                            == 0);
    assertThat(coder.count("error IS NULL AND completed_at IS NOT NULL")).isEqualTo(30);
    assertThat(count("SELECT count(*) FROM oneshot.builds")).isEqualTo(30);
    assertThat(count("SELECT count(*) FROM oneshot.builds WHERE status = 'succeeded'"))
        .isEqualTo(30);
    // Every job ran once, each on a daemon of its own, each daemon a build's attempt.
    List<Map<String, Object>> runs =
        coder.rows("SELECT daemon, job::text AS job FROM fake_coder_runs");
    assertThat(runs).hasSize(30);
    assertThat(runs.stream().map(r -> r.get("job")).distinct()).hasSize(30);
    assertThat(runs.stream().map(r -> r.get("daemon")).distinct()).hasSize(30);
    List<String> attempts =
        Sql.rows("SELECT 'oneshot-' || id || '-' || attempt AS name FROM oneshot.builds").stream()
            .map(r -> (String) r.get("name"))
            .toList();
    assertThat(runs.stream().map(r -> (String) r.get("daemon")).toList())
        .containsExactlyInAnyOrderElementsOf(attempts);
    // Jobs went to the route of their tags: the daemon of a coder-a build ran an env=a job.
    assertThat(
            coder.count("tags @> '{\"env\": \"a\"}' AND id IN (SELECT job FROM fake_coder_runs)"))
        .isEqualTo(12);
    assertThat(
            count(
                "SELECT count(*) FROM oneshot.build_events WHERE reason LIKE 'took a Coder job%'"))
        .isEqualTo(30);
    // The Coder build's output is the build's log.
    long id = (Long) Sql.value("SELECT min(id) FROM oneshot.builds");
    assertThat(String.join("\n", Sql.logLines(id, "stdout"))).contains("Apply complete!");
  }

  @Test
  void aBuildWhoseJobWentElsewhereEndsAfterItsIdleTimeoutAndIsNotReplaced() throws Exception {
    List<UUID> jobs = coder.post(org, CoderDatabase.jobTags(Map.of("env", "a")), 2);
    await()
        .atMost(Duration.ofMinutes(1))
        .until(() -> count("SELECT count(*) FROM oneshot.builds WHERE status = 'running'") == 2);
    // Another daemon takes both jobs while this route's daemons are still starting.
    UUID elsewhere = UUID.randomUUID();
    assertThat(
            coder.acquire(org, Map.of("env", "a", "scope", "organization", "owner", ""), elsewhere))
        .isIn(jobs);
    assertThat(
            coder.acquire(org, Map.of("env", "a", "scope", "organization", "owner", ""), elsewhere))
        .isIn(jobs);
    Files.writeString(gate, "");
    await()
        .atMost(Duration.ofMinutes(1))
        .until(() -> count("SELECT count(*) FROM oneshot.builds WHERE status = 'failed'") == 2);
    assertThat(
            Sql.rows("SELECT error FROM oneshot.builds").stream().map(r -> (String) r.get("error")))
        .allSatisfy(e -> assertThat(e).contains("no Coder job came within the idle timeout of 3s"));
    assertThat(coder.count("TRUE")).isEqualTo(2);
    // Nothing waits: no build replaces them.
    t.server.sources().wakeAll();
    await()
        .atMost(Duration.ofSeconds(30))
        .until(() -> t.server.sources().all().get(0).status().at() != null);
    assertThat(count("SELECT count(*) FROM oneshot.builds")).isEqualTo(2);
  }

  @Test
  void metricsAnotherProcessServesOnTheDaemonsPortAreNotTakenForTheDaemons() throws Exception {
    Files.delete(tmp.resolve("port.go"));
    coder.applyMs = 200;
    UUID job = coder.post(org, CoderDatabase.jobTags(Map.of("env", "a")), 1).get(0);
    await().atMost(Duration.ofMinutes(1)).until(() -> Files.exists(portFile));
    long id = (Long) Sql.value("SELECT min(id) FROM oneshot.builds");
    // Another daemon took the port before this one bound it, and it holds a job.
    int port = Integer.parseInt(Files.readString(portFile).strip());
    java.util.concurrent.atomic.AtomicInteger asked =
        new java.util.concurrent.atomic.AtomicInteger();
    com.sun.net.httpserver.HttpServer other =
        com.sun.net.httpserver.HttpServer.create(
            new java.net.InetSocketAddress("127.0.0.1", port), 0);
    other.createContext(
        "/metrics",
        x -> {
          asked.incrementAndGet();
          byte[] body =
              "coderd_provisionerd_jobs_current{provisioner=\"terraform\"} 1\n"
                  .getBytes(java.nio.charset.StandardCharsets.UTF_8);
          x.sendResponseHeaders(200, body.length);
          x.getResponseBody().write(body);
          x.close();
        });
    other.start();
    try {
      Files.writeString(tmp.resolve("port.go"), "");
      // The build's daemon cannot listen; it waits for the gate before it takes a job. The build
      // is not taken for holding one (nor ended) meanwhile.
      String warning = "another process listens on port " + port;
      await()
          .atMost(Duration.ofMinutes(1))
          .until(
              () ->
                  Sql.logLines(id, "system").stream().anyMatch(l -> l.contains(warning))
                      || count(
                              "SELECT count(*) FROM oneshot.builds WHERE id = ? AND"
                                  + " (source_taken_at IS NOT NULL OR status <> 'running')",
                              id)
                          > 0);
      assertThat(Sql.value("SELECT source_taken_at FROM oneshot.builds WHERE id = ?", id)).isNull();
      assertThat(Sql.value("SELECT status FROM oneshot.builds WHERE id = ?", id))
          .isEqualTo("running");
      assertThat(Sql.logLines(id, "system")).anyMatch(l -> l.contains(warning));
      Files.writeString(gate, "");
      await()
          .atMost(Duration.ofMinutes(1))
          .until(
              () ->
                  "succeeded"
                      .equals(Sql.value("SELECT status FROM oneshot.builds WHERE id = ?", id)));
      // Its own job, seen in its log, ended its wait; the other daemon's metrics were never read.
      assertThat(coder.rows("SELECT daemon, job::text AS job FROM fake_coder_runs"))
          .containsExactly(Map.of("daemon", "oneshot-" + id + "-1", "job", job.toString()));
      assertThat(
              count(
                  "SELECT count(*) FROM oneshot.build_events WHERE build_id = ? AND reason LIKE"
                      + " 'took a Coder job%'",
                  id))
          .isEqualTo(1);
      assertThat(asked.get()).isZero();
      assertThat(count("SELECT count(*) FROM oneshot.builds")).isEqualTo(1);
    } finally {
      other.stop(0);
    }
  }

  @Test
  void aJobCanceledInCoderBeforeItsDaemonStartsEndsItsBuildWithoutAnApply() throws Exception {
    List<UUID> jobs = coder.post(org, CoderDatabase.jobTags(Map.of("env", "b")), 2);
    await()
        .atMost(Duration.ofMinutes(1))
        .until(() -> count("SELECT count(*) FROM oneshot.builds WHERE status = 'running'") == 2);
    jobs.forEach(coder::cancel);
    Files.writeString(gate, "");
    await()
        .atMost(Duration.ofMinutes(1))
        .until(
            () ->
                count(
                        "SELECT count(*) FROM oneshot.builds WHERE status IN ('succeeded',"
                            + " 'failed')")
                    == 2);
    // Coder's acquire does not skip a job canceled while pending (it reads started_at only): a
    // daemon may take it, and it ends at once. Either way no apply ran.
    for (Map<String, Object> b : Sql.rows("SELECT id FROM oneshot.builds")) {
      assertThat(Sql.logLines((Long) b.get("id"), "stdout"))
          .noneMatch(l -> l.contains("Apply complete"));
    }
    assertThat(count("SELECT count(*) FROM oneshot.builds")).isEqualTo(2);
  }
}
