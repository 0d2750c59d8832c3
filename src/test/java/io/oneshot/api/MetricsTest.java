package io.oneshot.api;

import static io.oneshot.testing.TestServer.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.cli.Main;
import io.oneshot.launch.Attempt;
import io.oneshot.testing.Api;
import io.oneshot.testing.PromText;
import io.oneshot.testing.RecordingLauncher;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** What {@code /metrics} says after scenarios whose numbers are known. */
class MetricsTest {
  private static final String SCRIPT = "{\"provisioner\": \"script\", \"command\": [\"true\"]}";

  private TestServer t;

  @AfterEach
  void tearDown() {
    if (t != null) {
      t.close();
    }
  }

  private PromText scrape() {
    Api.Response r = t.api.get("/metrics");
    assertThat(r.status()).isEqualTo(200);
    return PromText.parse(r.text());
  }

  private static long enqueue(String tags) {
    return ((Number) Sql.value("SELECT id FROM oneshot.enqueue(?::jsonb, ?::jsonb)", tags, SCRIPT))
        .longValue();
  }

  @Test
  void theQueueGaugesCountWhatWaitsBehindAFullRoute() {
    RecordingLauncher launcher = new RecordingLauncher();
    t =
        TestServer.with()
            .routes(
                "routes: [{name: small, tags: {team: s}, maxConcurrent: 1},"
                    + " {name: idle, tags: {team: i}}]")
            .launcher(launcher)
            .start();
    await().atMost(10, TimeUnit.SECONDS).until(() -> t.server.leader());
    for (int i = 0; i < 4; i++) {
      enqueue("{\"team\": \"s\"}");
    }
    await().atMost(10, TimeUnit.SECONDS).until(() -> launcher.launched.size() == 1);

    PromText m = scrape();
    assertThat(m.value("oneshot_builds_queued", "route", "small")).isEqualTo(3.0);
    assertThat(m.value("oneshot_builds_running", "route", "small")).isEqualTo(1.0);
    assertThat(m.value("oneshot_builds_queued", "route", "idle")).isEqualTo(0.0);
    assertThat(m.value("oneshot_dispatcher_leader")).isEqualTo(1.0);
    // Nothing else is being served: the scrape counts itself.
    assertThat(m.value("oneshot_api_requests_in_flight")).isEqualTo(1.0);
    assertThat(m.sum("oneshot_build_queue_wait_seconds_count", "route", "small")).isEqualTo(1.0);
    assertThat(m.sum("oneshot_build_dispatch_seconds_count", "route", "small")).isEqualTo(1.0);

    // The gauges are read at scrape time: the next scrape sees the queue move.
    long waiting = (Long) Sql.value("SELECT max(id) FROM oneshot.builds WHERE status = 'pending'");
    assertThat(t.api.post("/api/v1/builds/" + waiting + "/cancel", "{}").status()).isEqualTo(202);
    await()
        .atMost(10, TimeUnit.SECONDS)
        .until(() -> scrape().value("oneshot_builds_queued", "route", "small") == 2.0);
  }

  @Test
  void oneRequeueIsCountedOnceWithItsReason() {
    RecordingLauncher launcher = new RecordingLauncher();
    t = TestServer.with().routes("routes: [{name: a, maxAttempts: 3}]").launcher(launcher).start();
    long id = enqueue("{}");
    await().atMost(10, TimeUnit.SECONDS).until(() -> launcher.launched.size() == 1);
    Attempt first = launcher.last();
    assertThat(scrape().samples("oneshot_build_requeues_total")).isEmpty();

    launcher.exit(first.name(), 1);
    await()
        .atMost(10, TimeUnit.SECONDS)
        .until(
            () ->
                Sql.count(
                            "SELECT count(*) FROM oneshot.build_launches"
                                + " WHERE build_id = ? AND attempt = 2",
                            id)
                        == 1
                    && !scrape().samples("oneshot_build_requeues_total").isEmpty());

    PromText m = scrape();
    assertThat(m.samples("oneshot_build_requeues_total")).hasSize(1);
    assertThat(
            m.value("oneshot_build_requeues_total", "route", "a", "reason", "ended_before_acquire"))
        .isEqualTo(1.0);
    assertThat(m.samples("oneshot_builds_total")).as("a requeue is not an outcome").isEmpty();
    assertThat(m.sum("oneshot_build_queue_wait_seconds_count"))
        .as("queue wait counts a build's first claim only")
        .isEqualTo(1.0);
    assertThat(m.sum("oneshot_build_dispatch_seconds_count"))
        .as("dispatch counts a build's first launch only")
        .isEqualTo(1.0);
  }

  @Test
  void histogramCountsEqualTheBuildsThatFinished() {
    t = TestServer.with().start();
    List<Long> ids = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      ids.add(t.api.submitScript("{\"team\": \"a\"}", "echo ok " + i));
    }
    ids.add(t.api.submitScript("{\"team\": \"a\"}", "exit 3"));
    ids.add(t.api.submitScript("{\"team\": \"b\"}", "echo b"));
    await()
        .atMost(60, TimeUnit.SECONDS)
        .until(() -> ids.stream().allMatch(id -> !status(id).matches("pending|launching|running")));

    PromText m = scrape();
    assertThat(m.value("oneshot_builds_total", "route", "a", "outcome", "succeeded"))
        .isEqualTo(3.0);
    assertThat(m.value("oneshot_builds_total", "route", "a", "outcome", "failed")).isEqualTo(1.0);
    assertThat(m.value("oneshot_builds_total", "route", "b", "outcome", "succeeded"))
        .isEqualTo(1.0);
    assertThat(
            m.value("oneshot_build_duration_seconds_count", "route", "a", "outcome", "succeeded"))
        .isEqualTo(3.0);
    assertThat(m.value("oneshot_build_duration_seconds_count", "route", "a", "outcome", "failed"))
        .isEqualTo(1.0);
    for (String h :
        List.of(
            "oneshot_build_queue_wait_seconds",
            "oneshot_build_dispatch_seconds",
            "oneshot_build_start_seconds",
            "oneshot_build_duration_seconds")) {
      assertThat(m.sum(h + "_count")).as(h).isEqualTo(5.0);
      assertThat(m.sum(h + "_bucket", "le", "+Inf")).as(h).isEqualTo(5.0);
      assertThat(m.sum(h + "_sum")).as(h).isPositive();
    }
    // Bounded labels: no series of ours names a build or a workspace (the JVM's name its pools).
    m.families().values().stream()
        .filter(f -> f.name().startsWith("oneshot_"))
        .forEach(
            f ->
                f.samples()
                    .forEach(
                        s ->
                            assertThat(s.labels().keySet())
                                .as(s.name())
                                .isSubsetOf(
                                    "route",
                                    "team",
                                    "outcome",
                                    "reason",
                                    "verb",
                                    "code",
                                    "le",
                                    "endpoint",
                                    "method",
                                    "how",
                                    "state")));
  }

  @Test
  void theMainPoolsUseIsReadAtEachScrapeForThisReplicaAlone() throws Exception {
    t = TestServer.with().start();
    // Another replica's pool on the same database: its connections are not this one's.
    TestServer other = TestServer.with().keepQueue().start();
    try {
      var sleeping = t.server.store().pool().query("SELECT pg_sleep(3)").execute();
      var elsewhere = other.server.store().pool().query("SELECT pg_sleep(3)").execute();
      // The replica's own background work (the dispatcher's cycle, the rescuer) may hold a
      // connection for a moment at any scrape, so each reading is awaited, not taken once:
      // a scrape seen while both sleeps run counts this replica's one, never the other's.
      await()
          .atMost(10, TimeUnit.SECONDS)
          .until(
              () ->
                  scrape().value("oneshot_database_connections", "state", "busy") == 1.0
                      && !sleeping.isComplete()
                      && !elsewhere.isComplete());
      assertThat(scrape().value("oneshot_database_pool_max"))
          .isEqualTo((double) t.config.database().poolSize());
      io.oneshot.build.Database.await(sleeping);
      io.oneshot.build.Database.await(elsewhere);
      await()
          .atMost(10, TimeUnit.SECONDS)
          .until(
              () -> {
                PromText after = scrape();
                return after.value("oneshot_database_connections", "state", "busy") == 0.0
                    && after.value("oneshot_database_connections", "state", "idle") > 0;
              });
    } finally {
      other.close();
    }
  }

  @Test
  void apiRequestsAreCountedByEndpointPatternAndLimitsAreGauges() {
    t = TestServer.with().start();
    long id = t.api.submitScript("{\"team\": \"a\"}", "true");
    t.api.get("/api/v1/builds/" + id);
    t.api.get("/api/v1/builds/" + (id + 1000));
    t.api.get("/api/v1/no/such/" + id);
    t.api.call("DELETE", "/api/v1/builds/" + id);

    PromText m = scrape();
    assertThat(
            m.value(
                "oneshot_api_requests_total",
                "endpoint",
                "/api/v1/builds",
                "method",
                "POST",
                "code",
                "201"))
        .isEqualTo(1.0);
    assertThat(
            m.value(
                "oneshot_api_requests_total",
                "endpoint",
                "/api/v1/builds/:id",
                "method",
                "GET",
                "code",
                "200"))
        .isEqualTo(1.0);
    assertThat(
            m.value(
                "oneshot_api_requests_total",
                "endpoint",
                "/api/v1/builds/:id",
                "method",
                "GET",
                "code",
                "404"))
        .isEqualTo(1.0);
    // Paths no endpoint has share one series, whatever they are.
    assertThat(m.sum("oneshot_api_requests_total", "endpoint", "other")).isEqualTo(1.0);
    assertThat(
            m.value(
                "oneshot_api_requests_total",
                "endpoint",
                "/api/v1/builds/:id",
                "method",
                "DELETE",
                "code",
                "405"))
        .isEqualTo(1.0);
    assertThat(m.samples("oneshot_api_requests_total"))
        .allSatisfy(s -> assertThat(s.labels().get("endpoint")).doesNotContain("/" + id));
    assertThat(
            m.value(
                "oneshot_api_request_duration_seconds_count",
                "endpoint",
                "/api/v1/builds/:id",
                "method",
                "GET"))
        .isEqualTo(2.0);

    // The JVM's own: memory and GC for the dashboard and the memory alert.
    assertThat(m.sampleNames())
        .contains(
            "jvm_memory_used_bytes",
            "jvm_memory_max_bytes",
            "jvm_gc_collection_seconds_count",
            "process_cpu_seconds_total");
    assertThat(m.value("jvm_memory_used_bytes", "area", "heap")).isPositive();
    assertThat(m.value("oneshot_route_max_concurrent", "route", "a")).isEqualTo(4.0);
    assertThat(m.value("oneshot_route_max_concurrent", "route", "c")).isEqualTo(2.0);
    assertThat(m.value("oneshot_max_concurrent"))
        .isEqualTo((double) t.config.dispatch().maxConcurrent());
  }

  @Test
  void aCanceledPendingBuildCountsAsCanceledWithoutADuration() {
    t = TestServer.with().routes("routes: [{name: a, maxConcurrent: 1}]").start();
    long blocker = t.api.submitScript("{}", "sleep 600");
    await().atMost(30, TimeUnit.SECONDS).until(() -> status(blocker).equals("running"));
    long waiting = t.api.submitScript("{}", "true");
    assertThat(t.api.post("/api/v1/builds/" + waiting + "/cancel", "{}").status()).isEqualTo(202);

    PromText m = scrape();
    assertThat(m.value("oneshot_builds_total", "route", "a", "outcome", "canceled")).isEqualTo(1.0);
    assertThat(m.samples("oneshot_build_duration_seconds_count")).isEmpty();
    assertThat(m.value("oneshot_builds_running", "route", "a")).isEqualTo(1.0);
    assertThat(m.value("oneshot_builds_queued", "route", "a")).isEqualTo(0.0);
    assertThat(t.api.post("/api/v1/builds/" + blocker + "/cancel", "{}").status()).isEqualTo(202);
    await().atMost(30, TimeUnit.SECONDS).until(() -> status(blocker).equals("canceled"));
  }

  @Test
  void routesShowTheOldestQueuedBuildAndTheWaitsOfTheLastHour() {
    t = TestServer.with().routes("routes: [{name: paused, maxConcurrent: 0}]").start();
    List<Long> ids = new ArrayList<>();
    for (int i = 0; i < 6; i++) {
      ids.add(enqueue("{}"));
    }
    // Four builds claimed after waiting 1, 2, 3 and 11 s; one claimed two hours ago (not counted).
    // Three of them ran 10, 20 and 30 s, and the last of those failed; the fourth was canceled
    // before it ran.
    int[] waited = {1, 2, 3, 11};
    String[] outcome = {"succeeded", "succeeded", "failed"};
    for (int i = 0; i < 3; i++) {
      Sql.exec("UPDATE oneshot.builds SET status = 'launching' WHERE id = ?", ids.get(i));
      Sql.exec(
          "UPDATE oneshot.builds SET status = 'running', runner_id = 'r' WHERE id = ?", ids.get(i));
      Sql.exec(
          "UPDATE oneshot.builds SET status = ?, finished_at = now(),"
              + " started_at = now() - make_interval(secs => ?) WHERE id = ?",
          outcome[i],
          10 * (i + 1),
          ids.get(i));
    }
    for (int i = 0; i < 4; i++) {
      Sql.exec(
          "UPDATE oneshot.builds SET status = CASE WHEN status = 'pending' THEN 'canceled'"
              + " ELSE status END, finished_at = coalesce(finished_at, now()),"
              + " created_at = now() - interval '20 minutes',"
              + " claimed_at = now() - interval '20 minutes' + make_interval(secs => ?)"
              + " WHERE id = ?",
          waited[i],
          ids.get(i));
    }
    Sql.exec(
        "UPDATE oneshot.builds SET status = 'canceled', finished_at = now(),"
            + " created_at = now() - interval '3 hours', claimed_at = now() - interval '2 hours'"
            + " WHERE id = ?",
        ids.get(4));
    Sql.exec(
        "UPDATE oneshot.builds SET created_at = now() - interval '40 seconds' WHERE id = ?",
        ids.get(5));

    JsonNode route = t.api.get("/api/v1/routes").json().get(0);
    assertThat(route.path("runP50Ms").asLong()).isEqualTo(20_000);
    assertThat(route.path("runP95Ms").asLong()).isEqualTo(29_000);
    assertThat(route.path("finishedLastHour").asLong()).isEqualTo(3);
    assertThat(route.path("failedLastHour").asLong()).isEqualTo(1);
    assertThat(route.path("oldestQueuedId").asLong()).isEqualTo(ids.get(5));
    assertThat(route.path("oldestQueuedReason").asText())
        .isEqualTo("route paused is at its limit 0/0; this build is next");
    assertThat(route.path("queued").asLong()).isEqualTo(1);
    assertThat(route.path("running").asLong()).isZero();
    assertThat(route.path("oldestQueuedMs").asLong()).isBetween(40_000L, 100_000L);
    assertThat(route.path("waitP50Ms").asLong()).isEqualTo(2500);
    assertThat(route.path("waitP95Ms").asLong()).isEqualTo(9800);

    StringWriter out = new StringWriter();
    int code =
        Main.commandLine(new PrintWriter(out, true), new PrintWriter(new StringWriter(), true))
            .execute("routes", "--url", t.api.base(), "--token", TestServer.ADMIN_TOKEN);
    assertThat(code).isZero();
    assertThat(out.toString().lines().toList())
        .first()
        .satisfies(
            h ->
                assertThat(h.split("\\s{2,}"))
                    .containsExactly(
                        "ROUTE",
                        "TAGS",
                        "LIMIT",
                        "RUNNING",
                        "QUEUED",
                        "OLDEST",
                        "WAIT P50",
                        "WAIT P95",
                        "RUN P50",
                        "RUN P95",
                        "FAILED"));
    assertThat(out.toString().lines().skip(1).findFirst().orElseThrow().split("\\s+"))
        .startsWith("paused", "-", "0", "0", "1")
        .endsWith("2.5s", "9.8s", "20.0s", "29.0s", "1/3");
  }
}
