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
    env.put("FAKE_CODER_QUIET", tmp.resolve("quiet").toString());
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
    this.runDir = runDir;
    this.env = env;
    t = server(TestServer.Builder.DEFAULT_DISPATCH);
  }

  private Path runDir;
  private Map<String, String> env;

  /** The dispatcher under test, its dispatch settings {@code dispatch}. */
  private TestServer server(String dispatch) {
    return TestServer.with()
        .dispatch(dispatch)
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
    List<Map<String, Object>> runs = coder.taken();
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
            coder.count(
                "tags @> '{\"env\": \"a\"}' AND worker_id IN (SELECT id FROM"
                    + " provisioner_daemons)"))
        .isEqualTo(12);
    // Each build is marked as having taken its job once: by its own report, or by Coder's tables
    // at a look of the source (in a burst, often first).
    assertThat(
            count(
                "SELECT count(DISTINCT build_id) FROM oneshot.build_events WHERE reason LIKE"
                    + " 'took a Coder job%' OR reason LIKE 'took Coder job %, as Coder''s tables"
                    + " say'"))
        .isEqualTo(30);
    assertThat(
            count(
                "SELECT count(*) FROM oneshot.build_events WHERE reason LIKE 'took a Coder job%'"
                    + " OR reason LIKE 'took Coder job %, as Coder''s tables say'"))
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

  private static String status(long id) {
    return (String) Sql.value("SELECT status FROM oneshot.builds WHERE id = ?", id);
  }

  private static String error(long id) {
    return (String) Sql.value("SELECT error FROM oneshot.builds WHERE id = ?", id);
  }

  private static long buildOf(UUID job, CoderDatabase coder) {
    String daemon =
        (String)
            coder.taken().stream()
                .filter(r -> r.get("job").equals(job.toString()))
                .findFirst()
                .orElseThrow()
                .get("daemon");
    return Long.parseLong(daemon.split("-")[1]);
  }

  /**
   * A build ends as its Coder job did, read from Coder's tables: the daemon exits 0 whatever became
   * of its job (the stand-in does, as Coder's does). A job that fails is a failed build with
   * Coder's error; one canceled in Coder while it runs is a canceled build (Coder says failed, with
   * canceled_at set); one that succeeds, a succeeded one.
   */
  @Test
  void eachBuildEndsAsItsCoderJobDidNotAsItsDaemonExited() throws Exception {
    Files.writeString(gate, "");
    coder.failing = true;
    UUID failing = coder.post(org, CoderDatabase.jobTags(Map.of("env", "a")), 1).get(0);
    coder.failing = false;
    coder.applyMs = 120_000;
    UUID canceled = coder.post(org, CoderDatabase.jobTags(Map.of("env", "b")), 1).get(0);
    coder.applyMs = 200;
    UUID fine = coder.post(org, CoderDatabase.jobTags(Map.of()), 1).get(0);
    await()
        .atMost(Duration.ofMinutes(1))
        .until(() -> coder.count("id = '" + canceled + "' AND started_at IS NOT NULL") == 1);
    coder.cancel(canceled);
    await()
        .atMost(Duration.ofMinutes(1))
        .until(
            () ->
                count(
                        "SELECT count(*) FROM oneshot.builds WHERE status IN ('succeeded',"
                            + " 'failed', 'canceled')")
                    == 3);
    assertThat(
            coder.rows("SELECT job_status::text AS s FROM provisioner_jobs WHERE id = ?", failing))
        .containsExactly(Map.of("s", "failed"));
    assertThat(
            coder.rows("SELECT job_status::text AS s FROM provisioner_jobs WHERE id = ?", canceled))
        .as("Coder's own word for a job canceled while it ran")
        .containsExactly(Map.of("s", "failed"));
    long f = buildOf(failing, coder);
    long c = buildOf(canceled, coder);
    long ok = buildOf(fine, coder);
    assertThat(status(f)).isEqualTo("failed");
    assertThat(error(f))
        .isEqualTo(
            "Coder's job "
                + failing
                + " failed: terraform apply: exit status 1: Error: creating instance: quota"
                + " exceeded");
    assertThat(status(c)).isEqualTo("canceled");
    assertThat(error(c))
        .isEqualTo(
            "Coder's job "
                + canceled
                + " was canceled in Coder: terraform apply: context canceled");
    assertThat(status(ok)).isEqualTo("succeeded");
    assertThat(
            Sql.value(
                "SELECT reason FROM oneshot.build_events WHERE build_id = ? AND to_status ="
                    + " 'succeeded'",
                ok))
        .isEqualTo("Coder's job " + fine + " succeeded");
    assertThat(count("SELECT count(*) FROM oneshot.builds")).isEqualTo(3);
  }

  /**
   * A Coder build canceled in oneshot ends canceled: its daemon gets SIGINT, cancels its job and
   * reports the provision's error, which Coder records as a failed job.
   */
  @Test
  void aCoderBuildCanceledInOneshotEndsCanceledThoughCoderSaysItsJobFailed() throws Exception {
    Files.writeString(gate, "");
    coder.applyMs = 120_000;
    UUID job = coder.post(org, CoderDatabase.jobTags(Map.of("env", "a")), 1).get(0);
    await()
        .atMost(Duration.ofMinutes(1))
        .until(
            () ->
                count(
                        "SELECT count(*) FROM oneshot.build_events WHERE reason LIKE 'took a Coder"
                            + " job%' OR reason LIKE 'took Coder job %, as Coder''s tables say'")
                    == 1);
    long id = buildOf(job, coder);
    assertThat(t.api.post("/api/v1/builds/" + id + "/cancel", "{}").status()).isEqualTo(202);
    await().atMost(Duration.ofMinutes(1)).until(() -> "canceled".equals(status(id)));
    assertThat(coder.rows("SELECT job_status::text AS s FROM provisioner_jobs WHERE id = ?", job))
        .containsExactly(Map.of("s", "failed"));
    assertThat(error(id))
        .contains("Coder's job " + job + " failed: terraform apply: context canceled");
  }

  /**
   * Who took a job is Coder's word, not only its daemon's: a build whose provisionerd never heard
   * of its daemon's job (no sign of it reached it; a report to a dispatcher that died is the same)
   * still ends as that job did, counts as having taken it, and holds nothing back: the next job of
   * its tag set gets a build at once, not after the failure hold.
   */
  @Test
  void aJobTheDaemonNeverReportedIsStillTheBuildsByCodersTables() throws Exception {
    // Builds' transitions wake no look here (only Coder's postings do): a look while the build
    // runs would mark its job from Coder's tables first, and this is the mark made at its end.
    t.close();
    t = server(TestServer.Builder.DEFAULT_DISPATCH + ", wakeOnNotify: false");
    Files.writeString(tmp.resolve("quiet"), "");
    Files.writeString(gate, "");
    coder.applyMs = 200;
    UUID job = coder.post(org, CoderDatabase.jobTags(Map.of("env", "a")), 1).get(0);
    await()
        .atMost(Duration.ofMinutes(1))
        .until(() -> count("SELECT count(*) FROM oneshot.builds WHERE status = 'succeeded'") == 1);
    long id = buildOf(job, coder);
    assertThat(Sql.logLines(id, "system"))
        .as("its provisionerd saw no job")
        .anyMatch(l -> l.contains("no Coder job came within the idle timeout"));
    assertThat(
            Sql.value(
                "SELECT reason FROM oneshot.build_events WHERE build_id = ? AND reason LIKE"
                    + " 'took Coder job%'",
                id))
        .isEqualTo("took Coder job " + job + ", as Coder's tables say");
    assertThat(Sql.value("SELECT source_taken_at IS NOT NULL FROM oneshot.builds WHERE id = ?", id))
        .isEqualTo(true);
    // Held for the failure hold (a minute), the next job would wait that long for its build.
    Files.delete(tmp.resolve("quiet"));
    coder.post(org, CoderDatabase.jobTags(Map.of("env", "a")), 1);
    await()
        .atMost(Duration.ofSeconds(20))
        .until(() -> count("SELECT count(*) FROM oneshot.builds") == 2);
  }

  /**
   * A running build whose daemon's job was never reported (a report lost with a dispatcher that
   * died is the same) is marked from Coder's tables at the source's next look: it stops counting as
   * in flight, and the next job of its tag set gets a build while it still runs.
   */
  @Test
  void aRunningBuildsUnreportedJobIsCountedFromCodersTablesAtTheNextLook() throws Exception {
    Files.writeString(tmp.resolve("quiet"), "");
    Files.writeString(gate, "");
    coder.applyMs = 30_000;
    UUID first = coder.post(org, CoderDatabase.jobTags(Map.of("env", "a")), 1).get(0);
    await()
        .atMost(Duration.ofMinutes(1))
        .until(() -> coder.count("id = '" + first + "' AND started_at IS NOT NULL") == 1);
    long id = buildOf(first, coder);
    Files.delete(tmp.resolve("quiet"));
    coder.applyMs = 200;
    coder.post(org, CoderDatabase.jobTags(Map.of("env", "a")), 1);
    await()
        .atMost(Duration.ofSeconds(15))
        .until(() -> count("SELECT count(*) FROM oneshot.builds") == 2);
    assertThat(status(id)).as("the first build still runs its job").isEqualTo("running");
    assertThat(
            Sql.value(
                "SELECT reason FROM oneshot.build_events WHERE build_id = ? AND reason LIKE"
                    + " 'took Coder job%'",
                id))
        .isEqualTo("took Coder job " + first + ", as Coder's tables say");
  }

  /**
   * Jobs canceled in Coder while queued are still handed out by Coder's acquire: each is counted as
   * work a daemon will spend itself on, so that each live job behind them gets its daemon at once;
   * the builds whose daemons took them end canceled and say why.
   */
  @Test
  void jobsCanceledWhileQueuedEachCostADaemonAndLiveJobsStillGetTheirsAtOnce() throws Exception {
    // No daemon takes a job before the gate opens: every job is posted and counted first.
    coder.applyMs = 200;
    List<UUID> gone = coder.post(org, CoderDatabase.jobTags(Map.of()), 2);
    gone.forEach(coder::cancel);
    List<UUID> live = coder.post(org, CoderDatabase.jobTags(Map.of()), 2);
    await()
        .atMost(Duration.ofMinutes(1))
        .until(() -> count("SELECT count(*) FROM oneshot.builds") == 4);
    assertThat(
            Sql.rows("SELECT reason FROM oneshot.build_events WHERE reason LIKE 'enqueued%'")
                .stream()
                .map(r -> (String) r.get("reason")))
        .anyMatch(r -> r.contains("2 of them canceled in Coder while queued"));
    Files.writeString(gate, "");
    await()
        .atMost(Duration.ofMinutes(1))
        .until(
            () ->
                count(
                        "SELECT count(*) FROM oneshot.builds WHERE status IN ('succeeded',"
                            + " 'failed', 'canceled')")
                    == 4);
    // Coder's word: both live jobs ran, each on a daemon of its own, which succeeded.
    assertThat(coder.count("job_status = 'succeeded'")).isEqualTo(2);
    java.util.Set<Long> liveBuilds = new java.util.HashSet<>();
    for (UUID j : live) {
      long b = buildOf(j, coder);
      liveBuilds.add(b);
      assertThat(status(b)).isEqualTo("succeeded");
    }
    assertThat(liveBuilds).hasSize(2);
    // A daemon that took a canceled job ends it at once and may take another before its stop
    // signal reaches it (Coder's daemon acquires again at once): its build ends as the job it
    // ran did, or canceled, saying it spent itself, when it ran none.
    for (UUID j : gone) {
      long b = buildOf(j, coder);
      if (!liveBuilds.contains(b)) {
        assertThat(status(b)).isEqualTo("canceled");
        assertThat(error(b))
            .startsWith("Coder's job ")
            .contains("was canceled in Coder before any daemon took it")
            .contains("spent itself on it");
      }
    }
    // No build more than the jobs: the live ones were counted with the canceled ones at once.
    assertThat(count("SELECT count(*) FROM oneshot.builds")).isEqualTo(4);
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
      assertThat(coder.taken())
          .containsExactly(Map.of("daemon", "oneshot-" + id + "-1", "job", job.toString()));
      assertThat(
              count(
                  "SELECT count(*) FROM oneshot.build_events WHERE build_id = ? AND (reason LIKE"
                      + " 'took a Coder job%' OR reason LIKE 'took Coder job %, as Coder''s"
                      + " tables say')",
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
                            + " 'failed', 'canceled')")
                    == 2);
    // Coder's acquire does not skip a job canceled while pending (it reads started_at only): a
    // daemon takes it, and it ends at once; its build is canceled, as its job was. No apply ran.
    assertThat(count("SELECT count(*) FROM oneshot.builds WHERE status = 'canceled'"))
        .isEqualTo(coder.taken().stream().map(r -> r.get("daemon")).distinct().count());
    for (Map<String, Object> b : Sql.rows("SELECT id FROM oneshot.builds")) {
      assertThat(Sql.logLines((Long) b.get("id"), "stdout"))
          .noneMatch(l -> l.contains("Apply complete"));
    }
    assertThat(count("SELECT count(*) FROM oneshot.builds")).isEqualTo(2);
  }
}
