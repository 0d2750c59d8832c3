package io.oneshot.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.oneshot.api.Json;
import io.oneshot.api.Metrics;
import io.oneshot.build.Database;
import io.oneshot.build.QueueStore;
import io.oneshot.config.OneshotConfig;
import io.oneshot.testing.CoderDatabase;
import io.oneshot.testing.PromText;
import io.oneshot.testing.Sql;
import io.oneshot.testing.StoreFixture;
import io.oneshot.testing.TestDatabase;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A queue source keeps, per tag set, exactly as many builds in flight as jobs wait: against a
 * database shaped like Coder's ({@link CoderDatabase}) and a plain table of the test's own. Looks
 * are driven one at a time ({@link QueueSource#look}), except where the wake on NOTIFY is the
 * point.
 */
class QueueSourceTest {
  private static final CoderDatabase coder = new CoderDatabase();
  private final List<AutoCloseable> closing = new ArrayList<>();
  private StoreFixture f;
  private final Metrics metrics = new Metrics();
  private String yaml;

  @AfterEach
  void tearDown() throws Exception {
    for (AutoCloseable c : closing.reversed()) {
      c.close();
    }
    if (f != null) {
      f.close();
    }
    coder.exec("DELETE FROM provisioner_jobs; DELETE FROM organizations");
  }

  private static final String CODER_ROUTES =
      """
      routes:
        - {name: coder-a, tags: {env: a}, maxConcurrent: 100}
        - {name: coder-b, tags: {env: b}, maxConcurrent: 100}
        - {name: coder-plain, maxConcurrent: 100}
      """;

  /** A fixture whose configuration has {@code routes} and a coder source feeding {@code feeds}. */
  private QueueSource coderSource(String routes, String feeds) {
    yaml =
        routes
            + "sources:\n  - {name: coder, kind: coder, databaseUrl: '"
            + coder.url
            + "', pollInterval: 1h, routes: "
            + feeds
            + "}\n";
    f = new StoreFixture(yaml);
    return source(f.config.sources().get(0));
  }

  /** The fixture's source {@code s}, through {@link Sources} (which exports its metrics). */
  private QueueSource source(OneshotConfig.Source s) {
    Sources all = new Sources(f.vertx, f.config, f.store.sources(), null, metrics);
    closing.add(all);
    return all.all().stream().filter(q -> q.name().equals(s.name())).findFirst().orElseThrow();
  }

  private static long builds(String route) {
    return Sql.count("SELECT count(*) FROM oneshot.builds WHERE route = ?", route);
  }

  private static long builds() {
    return Sql.count("SELECT count(*) FROM oneshot.builds");
  }

  @Test
  void thirtyJobsInThreeTagSetsPostedInBurstsGetExactlyThirtyBuilds() {
    UUID org = coder.organization("acme");
    QueueSource s =
        coderSource(
            CODER_ROUTES,
            "[{route: coder-a, organization: acme}, {route: coder-b, organization: acme},"
                + " {route: coder-plain, organization: acme}]");
    for (int burst = 0; burst < 2; burst++) {
      coder.post(org, CoderDatabase.jobTags(Map.of("env", "a")), 5);
      s.look();
      coder.post(org, CoderDatabase.jobTags(Map.of("env", "b")), 5);
      coder.post(org, CoderDatabase.jobTags(Map.of()), 5);
      s.look();
      s.look();
    }
    assertThat(builds("coder-a")).isEqualTo(10);
    assertThat(builds("coder-b")).isEqualTo(10);
    assertThat(builds("coder-plain")).isEqualTo(10);
    // Looking again, whatever wakes it, adds nothing: the jobs have their builds.
    s.look();
    assertThat(builds()).isEqualTo(30);
    // Each build says what it is for: the coder provisioner, its organization and tags.
    Map<String, Object> b =
        Sql.rows(
                "SELECT input::text AS input, source, source_key::text AS key, reason"
                    + " FROM oneshot.builds WHERE route = 'coder-b' LIMIT 1")
            .get(0);
    assertThat(Json.tree((String) b.get("input")).path("provisioner").asText()).isEqualTo("coder");
    assertThat(Json.tree((String) b.get("input")).path("organization").asText())
        .isEqualTo(org.toString());
    assertThat(Json.tree((String) b.get("input")).path("tags").path("env").asText()).isEqualTo("b");
    assertThat(b.get("source")).isEqualTo("coder");
    assertThat((String) b.get("reason")).contains("source coder").contains("acme");
  }

  @Test
  void aBuildHoldingAJobNoLongerCountsSoTheNextJobGetsABuildOfItsOwn() {
    UUID org = coder.organization("acme");
    QueueSource s = coderSource(CODER_ROUTES, "[{route: coder-a, organization: acme}]");
    Map<String, String> tags = CoderDatabase.jobTags(Map.of("env", "a"));
    coder.post(org, tags, 2);
    s.look();
    assertThat(builds("coder-a")).isEqualTo(2);

    // One build's runner starts and its daemon takes a job: the job no longer waits.
    QueueStore.Claimed c = f.claim(100, 1, "local").get(0);
    long id = running(c);
    byte[] token = c.token().hash();
    assertThat(coder.acquire(org, TagRules.daemonTags(Map.of("env", "a")), UUID.randomUUID()))
        .isNotNull();
    // Not yet reported: the build still counts, and the job no longer waits: nothing is added.
    s.look();
    assertThat(builds("coder-a")).isEqualTo(2);
    assertThat(Database.await(f.store.sources().tookJob(token, "runner-1", "took a Coder job")))
        .contains(true);
    assertThat(Database.await(f.store.sources().tookJob(token, "runner-1", "again")))
        .contains(false);
    s.look();
    assertThat(builds("coder-a")).isEqualTo(2);

    coder.post(org, tags, 1);
    s.look();
    assertThat(builds("coder-a")).isEqualTo(3);
    assertThat(Sql.transitions(id)).isNotEmpty();
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.build_events WHERE build_id = ? AND reason = ?",
                id,
                "took a Coder job"))
        .isEqualTo(1);
  }

  @Test
  void onlyTheRunningAttemptsOwnRunnerMarksItsBuildAsHoldingAJob() {
    UUID org = coder.organization("acme");
    QueueSource s = coderSource(CODER_ROUTES, "[{route: coder-a, organization: acme}]");
    coder.post(org, CoderDatabase.jobTags(Map.of("env", "a")), 1);
    s.look();
    QueueStore.Claimed c = f.claim(100, 1, "local").get(0);
    byte[] token = c.token().hash();
    // Launching, not yet running: no runner holds it.
    assertThat(Database.await(f.store.sources().tookJob(token, "runner-1", "x"))).isEmpty();
    long id = running(c);
    assertThat(Database.await(f.store.sources().tookJob(token, "someone-else", "x"))).isEmpty();
    assertThat(
            Database.await(
                f.store
                    .sources()
                    .tookJob(io.oneshot.build.BuildToken.generate().hash(), "runner-1", "x")))
        .isEmpty();
    assertThat(Sql.value("SELECT source_taken_at FROM oneshot.builds WHERE id = ?", id)).isNull();
    assertThat(Database.await(f.store.sources().tookJob(token, "runner-1", "x"))).contains(true);
  }

  /** Moves a claimed build to running, acquired by runner-1, as provisionerd's acquire does. */
  private static long running(QueueStore.Claimed c) {
    Sql.exec(
        "UPDATE oneshot.builds SET status = 'running', runner_id = 'runner-1', started_at = now()"
            + " WHERE id = ?",
        c.id());
    return c.id();
  }

  /**
   * A job canceled in Coder before any daemon took it is still handed out by Coder's acquire
   * (AcquireProvisionerJob checks started_at only): it counts as work a daemon will spend itself
   * on, so that the live jobs behind it each get their daemon in the same look.
   */
  @Test
  void jobsCanceledInCoderBeforePickupAreCountedAsTheWorkADaemonSpends() {
    UUID org = coder.organization("acme");
    QueueSource s = coderSource(CODER_ROUTES, "[{route: coder-a, organization: acme}]");
    List<UUID> jobs = coder.post(org, CoderDatabase.jobTags(Map.of("env", "a")), 5);
    coder.cancel(jobs.get(0));
    coder.cancel(jobs.get(1));
    s.look();
    assertThat(builds("coder-a")).isEqualTo(5);
    assertThat(
            Sql.value(
                "SELECT reason FROM oneshot.build_events WHERE reason LIKE 'enqueued%' LIMIT 1"))
        .asString()
        .contains("5 jobs wait (2 of them canceled in Coder while queued");
  }

  /**
   * A tag with an empty value is dropped from a daemon's tags, as Coder's MutateTags does
   * (provisionersdk/provisionertags.go): a route {region: ""} serves what its key serves, the
   * untagged jobs, which need a daemon with no tag but scope and owner.
   */
  @Test
  void aRouteTagWithAnEmptyValueIsDroppedAsCoderDropsItFromTheKeysTags() {
    UUID org = coder.organization("acme");
    QueueSource s =
        coderSource(
            """
            routes:
              - {name: coder-blank, tags: {region: ""}, maxConcurrent: 100}
            """,
            "[{route: coder-blank, organization: acme}]");
    coder.post(org, CoderDatabase.jobTags(Map.of()), 2);
    s.look();
    assertThat(builds("coder-blank")).isEqualTo(2);
    assertThat(TagRules.daemonTags(Map.of("region", "", "env", "a")))
        .isEqualTo(Map.of("env", "a", "scope", "organization", "owner", ""));
  }

  @Test
  void organizationsAreKeptApartAndATagSetNoRouteTakesIsReported() {
    UUID acme = coder.organization("acme");
    UUID other = coder.organization("other");
    QueueSource s =
        coderSource(
            CODER_ROUTES,
            "[{route: coder-a, organization: acme}, {route: coder-plain, organization: "
                + acme
                + "}]");
    coder.post(acme, CoderDatabase.jobTags(Map.of("env", "a")), 2);
    coder.post(other, CoderDatabase.jobTags(Map.of("env", "a")), 3);
    // A job with a tag no route's key has: a daemon with {env: a} cannot take it.
    coder.post(acme, CoderDatabase.jobTags(Map.of("env", "a", "gpu", "true")), 4);
    QueueSource.Status st = s.look();
    assertThat(st.up()).isTrue();
    assertThat(builds("coder-a")).isEqualTo(2);
    assertThat(builds()).isEqualTo(2);
    List<QueueSource.TagSet> unrouted =
        st.tagSets().stream().filter(t -> t.route() == null).toList();
    assertThat(unrouted).extracting(QueueSource.TagSet::waiting).containsExactlyInAnyOrder(3L, 4L);
    PromText m = PromText.parse(metrics.scrape());
    assertThat(m.value("oneshot_source_jobs_waiting", "source", "coder", "route", "coder-a"))
        .isEqualTo(2.0);

    assertThat(m.value("oneshot_source_jobs_unrouted", "source", "coder")).isEqualTo(7.0);
  }

  @Test
  void anUntaggedCoderJobGoesOnlyToARouteWithoutTags() {
    UUID org = coder.organization("acme");
    QueueSource s =
        coderSource(
            CODER_ROUTES,
            "[{route: coder-a, organization: acme}, {route: coder-plain, organization: acme}]");
    coder.post(org, CoderDatabase.jobTags(Map.of()), 3);
    s.look();
    // A daemon with tags {env: a} would take it by the subset rule; Coder's untagged rule does not.
    assertThat(builds("coder-a")).isZero();
    assertThat(builds("coder-plain")).isEqualTo(3);
  }

  @Test
  void eachLookAddsNoMoreThanTheRoutesFreeSlots() {
    UUID org = coder.organization("acme");
    QueueSource s =
        coderSource(
            "routes:\n  - {name: coder-a, tags: {env: a}, maxConcurrent: 4}\n",
            "[{route: coder-a, organization: acme}]");
    coder.post(org, CoderDatabase.jobTags(Map.of("env", "a")), 10);
    s.look();
    s.look();
    assertThat(builds("coder-a")).isEqualTo(4);
    // Two builds end without a job (taken elsewhere): their slots are free again.
    Sql.exec(
        "UPDATE oneshot.builds SET status = 'canceled', finished_at = now() WHERE id IN (SELECT id"
            + " FROM oneshot.builds ORDER BY id LIMIT 2)");
    s.look();
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.builds WHERE status IN ('pending', 'launching',"
                    + " 'running')"))
        .isEqualTo(4);
  }

  @Test
  void buildsThatFailWithoutTakingAJobHoldTheirJobsForTheFailureHoldNotAStorm() {
    UUID org = coder.organization("acme");
    QueueSource s = coderSource(CODER_ROUTES, "[{route: coder-a, organization: acme}]");
    coder.post(org, CoderDatabase.jobTags(Map.of("env", "a")), 3);
    s.look();
    // Every build fails before its daemon takes a job (a wrong key, an image that cannot start).
    failAll();
    s.look();
    s.look();
    assertThat(builds("coder-a")).isEqualTo(3);

    // With no hold, each look replaces them: the hold is what stops the storm.
    StoreFixture g = new StoreFixture(yaml.replace("pollInterval: 1h,", "failureHold: 0s,"), false);
    closing.add(g);
    Sources all = new Sources(g.vertx, g.config, g.store.sources(), null, new Metrics());
    closing.add(all);
    QueueSource noHold = all.all().get(0);
    noHold.look();
    assertThat(builds("coder-a")).isEqualTo(6);
    failAll();
    noHold.look();
    assertThat(builds("coder-a")).isEqualTo(9);
  }

  private static void failAll() {
    Sql.exec(
        "UPDATE oneshot.builds SET status = 'failed', finished_at = now(), reason = 'x' WHERE"
            + " status = 'pending'");
  }

  @Test
  void twoReplicasLookingAtOnceNeverLaunchMoreBuildsThanJobsWait() throws Exception {
    UUID org = coder.organization("acme");
    QueueSource one =
        coderSource(
            CODER_ROUTES,
            "[{route: coder-a, organization: acme}, {route: coder-b, organization: acme}]");
    StoreFixture second = new StoreFixture(yaml, false);
    closing.add(second);
    QueueSource two =
        new QueueSource(
            second.vertx,
            second.config.sources().get(0),
            second.config,
            second.store.sources(),
            null,
            new Metrics());
    closing.add(two);
    ExecutorService pool = Executors.newFixedThreadPool(2);
    closing.add(pool::shutdownNow);
    for (int burst = 0; burst < 5; burst++) {
      coder.post(org, CoderDatabase.jobTags(Map.of("env", burst % 2 == 0 ? "a" : "b")), 4);
      CountDownLatch go = new CountDownLatch(1);
      List<Future<?>> looks = new ArrayList<>();
      for (QueueSource q : List.of(one, two)) {
        looks.add(
            pool.submit(
                () -> {
                  go.await();
                  for (int i = 0; i < 5; i++) {
                    q.look();
                  }
                  return null;
                }));
      }
      go.countDown();
      for (Future<?> l : looks) {
        l.get();
      }
    }
    assertThat(builds("coder-a")).isEqualTo(12);
    assertThat(builds("coder-b")).isEqualTo(8);
  }

  @Test
  void aTopUpWaitsForAnotherReplicasTopUpToCommitAndCountsItsBuilds() throws Exception {
    UUID org = coder.organization("acme");
    QueueSource s = coderSource(CODER_ROUTES, "[{route: coder-a, organization: acme}]");
    Map<String, String> tags = CoderDatabase.jobTags(Map.of("env", "a"));
    coder.post(org, tags, 4);
    String key = Json.write(Map.of("organization", org.toString(), "tags", tags));
    ExecutorService pool = Executors.newSingleThreadExecutor();
    closing.add(pool::shutdownNow);
    try (java.sql.Connection other = Sql.connect()) {
      // Another replica's top-up, under the sources lock, has added builds for these 4 jobs and
      // not yet committed.
      other.setAutoCommit(false);
      Sql.rows(
          other,
          "SELECT pg_advisory_xact_lock(?, ?)",
          io.oneshot.build.AdvisoryLocks.CLASS,
          io.oneshot.build.AdvisoryLocks.SOURCES);
      Sql.rows(
          other,
          "INSERT INTO oneshot.builds (route, tags, input, reason, source, source_key) SELECT"
              + " 'coder-a', ?::jsonb, '{\"provisioner\": \"coder\"}', 'other replica', 'coder',"
              + " ?::jsonb FROM generate_series(1, 4)",
          Json.write(tags),
          key);
      Future<QueueSource.Status> look = pool.submit(s::look);
      // This replica's look either waits for the lock or (were there no lock) is done already.
      await()
          .atMost(Duration.ofSeconds(30))
          .until(
              () ->
                  look.isDone()
                      || Sql.count(
                              "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT"
                                  + " granted AND classid = ? AND objid = ? AND database ="
                                  + " (SELECT oid FROM pg_database WHERE datname ="
                                  + " current_database())",
                              (long) io.oneshot.build.AdvisoryLocks.CLASS,
                              (long) io.oneshot.build.AdvisoryLocks.SOURCES)
                          > 0);
      other.commit();
      look.get();
    }
    assertThat(builds("coder-a")).isEqualTo(4);
  }

  @Test
  void thePostgresKindRunsTheOperatorsQueryOnATableOfItsOwn() {
    String url = TestDatabase.fresh();
    coderLikeExec(
        url,
        "CREATE TABLE report_jobs (id serial PRIMARY KEY, kind text, taken boolean NOT NULL"
            + " DEFAULT false);"
            + " INSERT INTO report_jobs (kind) SELECT 'pdf' FROM generate_series(1, 3);"
            + " INSERT INTO report_jobs (kind) SELECT 'csv' FROM generate_series(1, 2);"
            + " INSERT INTO report_jobs (kind, taken) VALUES ('pdf', true)");
    f =
        new StoreFixture(
            """
            routes:
              - {name: pdf, tags: {kind: pdf}}
              - {name: plain}
            sources:
              - name: reports
                kind: postgres
                databaseUrl: '%s'
                channel: report_jobs
                query: >-
                  SELECT CASE WHEN kind = 'pdf' THEN jsonb_build_object('kind', kind) END AS tags,
                  count(*) AS waiting FROM report_jobs WHERE NOT taken GROUP BY kind
                input: {provisioner: script, command: [./take-one-report]}
                routes: [pdf, plain]
            """
                .formatted(url));
    QueueSource s = source(f.config.sources().get(0));
    QueueSource.Status st = s.look();
    assertThat(st.up()).as(String.valueOf(st.error())).isTrue();
    assertThat(builds("pdf")).isEqualTo(3);
    assertThat(builds("plain")).isEqualTo(2);
    assertThat(
            Json.tree(
                    (String)
                        Sql.value(
                            "SELECT input::text FROM oneshot.builds WHERE route = 'plain' LIMIT 1"))
                .path("command")
                .get(0)
                .asText())
        .isEqualTo("./take-one-report");
  }

  @Test
  void aQueryThatWritesIsRefused() {
    String url = TestDatabase.fresh();
    coderLikeExec(url, "CREATE TABLE jobs (id serial PRIMARY KEY)");
    f =
        new StoreFixture(
            """
            routes:
              - {name: plain}
            sources:
              - name: sneaky
                kind: postgres
                databaseUrl: '%s'
                channel: jobs
                query: "WITH x AS (INSERT INTO jobs DEFAULT VALUES RETURNING id) SELECT NULL::jsonb AS tags, count(*) AS waiting FROM x"
                input: {provisioner: script, command: ["true"]}
                routes: [plain]
            """
                .formatted(url));
    QueueSource.Status st = source(f.config.sources().get(0)).look();
    assertThat(st.up()).isFalse();
    assertThat(st.error()).contains("read-only");
    assertThat(builds()).isZero();
  }

  @Test
  void aCountThatCannotBeBelievedIsAnErrorNamingTheSourceNeverALaunchStorm() {
    String url = TestDatabase.fresh();
    for (String waiting : List.of("-1", "2.5", "NULL::bigint", "5000000")) {
      f =
          new StoreFixture(
              """
              routes:
                - {name: plain, maxConcurrent: 1000}
              sources:
                - name: broken
                  kind: postgres
                  databaseUrl: '%s'
                  channel: jobs
                  query: "SELECT NULL::jsonb AS tags, 1 AS waiting UNION ALL SELECT '{}'::jsonb, %s"
                  input: {provisioner: script, command: ["true"]}
                  routes: [plain]
              """
                  .formatted(url, waiting));
      try (Sources all = new Sources(f.vertx, f.config, f.store.sources(), null, new Metrics())) {
        QueueSource.Status st = all.all().get(0).look();
        assertThat(st.up()).as(waiting).isFalse();
        assertThat(st.error())
            .as(waiting)
            .contains("waiting")
            .containsIgnoringCase(waiting.split("::")[0]);
        assertThat(builds()).as(waiting).isZero();
      }
      f.close();
      f = null;
    }
  }

  @Test
  void anUnreachableSourceIsDownAndComesBackWhenItsDatabaseDoes() {
    String server = TestDatabase.fresh();
    String missing = server.substring(0, server.lastIndexOf('/') + 1) + "coder_not_yet";
    f =
        new StoreFixture(
            CODER_ROUTES
                + "sources:\n  - {name: coder, kind: coder, databaseUrl: '"
                + missing
                + "', routes: [{route: coder-a, organization: acme}]}\n");
    Sources all = new Sources(f.vertx, f.config, f.store.sources(), null, metrics);
    closing.add(all);
    QueueSource s = all.all().get(0);
    QueueSource.Status st = s.look();
    assertThat(st.up()).isFalse();
    assertThat(st.error()).contains("coder_not_yet");
    assertThat(all.readiness().get("coder")).isEqualTo(st.error());
    assertThat(PromText.parse(metrics.scrape()).value("oneshot_source_up", "source", "coder"))
        .isEqualTo(0.0);
    // The rest of the queue keeps working meanwhile.
    f.enqueueNoops(1);
    assertThat(f.claim(100, 1, "local")).hasSize(1);
  }

  @Test
  void aNotifyOnTheSourcesChannelWakesItAtOnce() {
    UUID org = coder.organization("acme");
    QueueSource s = coderSource(CODER_ROUTES, "[{route: coder-a, organization: acme}]");
    s.start();
    await().atMost(Duration.ofSeconds(30)).until(() -> s.status().listening());
    coder.post(org, CoderDatabase.jobTags(Map.of("env", "a")), 3);
    // The poll is an hour away: only the NOTIFY can have woken it.
    await().atMost(Duration.ofSeconds(30)).until(() -> builds("coder-a") == 3);
  }

  private static void coderLikeExec(String url, String sql) {
    try (var c = java.sql.DriverManager.getConnection(TestDatabase.jdbcUrl(url));
        var st = c.createStatement()) {
      st.execute(sql);
    } catch (java.sql.SQLException e) {
      throw new IllegalStateException(e);
    }
  }
}
