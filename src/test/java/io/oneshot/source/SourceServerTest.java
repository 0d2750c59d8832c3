package io.oneshot.source;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.cli.Main;
import io.oneshot.testing.Api;
import io.oneshot.testing.CoderDatabase;
import io.oneshot.testing.NoopLauncher;
import io.oneshot.testing.PromText;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A dispatcher with a coder source, as operators see it: builds appear as Coder posts jobs (woken
 * by Coder's NOTIFY, the poll an hour away), and {@code oneshot routes}, {@code /readyz} and the
 * metrics say what each source sees, including jobs no route takes and a source that is down.
 */
class SourceServerTest {
  private static final CoderDatabase coder = new CoderDatabase();
  private TestServer t;

  @AfterEach
  void tearDown() {
    if (t != null) {
      t.close();
    }
    coder.exec("DELETE FROM provisioner_jobs; DELETE FROM organizations");
  }

  private TestServer start(String url) {
    t =
        TestServer.with()
            .launcher(new NoopLauncher(false))
            .routes(
                """
                routes:
                  - {name: coder-prod, tags: {env: prod}, maxConcurrent: 50, launchTimeout: 1h}
                sources:
                  - {name: coder, kind: coder, databaseUrl: '%s', pollInterval: 1h,
                     routes: [{route: coder-prod, organization: acme}]}
                """
                    .formatted(url))
            .start();
    return t;
  }

  private static String oneshot(TestServer t, String... args) {
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    String[] all = new String[args.length + 4];
    System.arraycopy(args, 0, all, 0, args.length);
    all[args.length] = "--url";
    all[args.length + 1] = t.api.base();
    all[args.length + 2] = "--token";
    all[args.length + 3] = TestServer.ADMIN_TOKEN;
    int code =
        Main.commandLine(new PrintWriter(out, true), new PrintWriter(err, true)).execute(all);
    assertThat(code).as(err.toString()).isZero();
    return out.toString();
  }

  @Test
  void coderJobsGetBuildsAtOnceAndJobsNoRouteTakesAreShownWhereOperatorsLook() {
    UUID acme = coder.organization("acme");
    start(coder.url);
    await()
        .atMost(Duration.ofSeconds(30))
        .until(() -> t.server.sources().all().get(0).status().listening());
    coder.post(acme, CoderDatabase.jobTags(Map.of("env", "prod")), 3);
    coder.post(acme, CoderDatabase.jobTags(Map.of("env", "staging")), 2);
    await()
        .atMost(Duration.ofSeconds(30))
        .until(() -> Sql.count("SELECT count(*) FROM oneshot.builds") == 3);

    await()
        .atMost(Duration.ofSeconds(30))
        .until(() -> oneshot(t, "routes").contains("NO ROUTE TAKES THEM"));
    String routes = oneshot(t, "routes");
    assertThat(routes)
        .contains("SOURCE")
        .containsPattern("coder +ok +env=prod.* coder-prod +3 +3")
        .containsPattern("coder +ok +env=staging.* NO ROUTE TAKES THEM +2");

    Api.Response ready = t.api.get("/readyz");
    assertThat(ready.status()).isEqualTo(200);
    assertThat(ready.json().path("sources").path("coder").asText()).isEqualTo("ok");
    PromText m = PromText.parse(t.api.get("/metrics").text());
    assertThat(m.value("oneshot_source_jobs_waiting", "source", "coder", "route", "coder-prod"))
        .isEqualTo(3.0);
    assertThat(m.value("oneshot_source_jobs_unrouted", "source", "coder")).isEqualTo(2.0);
    assertThat(
            m.value(
                "oneshot_source_builds_enqueued_total", "source", "coder", "route", "coder-prod"))
        .isEqualTo(3.0);
    JsonNode sources = t.api.get("/api/v1/sources").json();
    assertThat(sources.get(0).path("up").asBoolean()).isTrue();
  }

  @Test
  void aSourceThatIsDownIsSaidInReadinessWhileTheRestOfTheDispatcherWorks() {
    String missing = coder.url.substring(0, coder.url.lastIndexOf('/') + 1) + "no_such_coder";
    start(missing);
    await()
        .atMost(Duration.ofSeconds(30))
        .until(
            () ->
                t.api
                    .get("/readyz")
                    .json()
                    .path("sources")
                    .path("coder")
                    .asText()
                    .contains("no_such_coder"));
    // Said, not failed: the API stays in its Service for every other route's runners.
    assertThat(t.api.get("/readyz").status()).isEqualTo(200);
    assertThat(
            PromText.parse(t.api.get("/metrics").text())
                .value("oneshot_source_up", "source", "coder"))
        .isEqualTo(0.0);
    assertThat(oneshot(t, "routes")).contains("DOWN: ").contains("no_such_coder");
    Api.Response b =
        t.api.post(
            "/api/v1/builds",
            "{\"tags\": {\"env\": \"prod\"}, \"input\": {\"provisioner\": \"script\","
                + " \"command\": [\"true\"]}}");
    assertThat(b.status()).isEqualTo(201);
  }

  @Test
  void aPostgresSourcesScriptSaysItTookItsJobAndTheNextJobGetsABuildOfItsOwn(
      @TempDir java.nio.file.Path tmp) throws Exception {
    String url = io.oneshot.testing.TestDatabase.fresh();
    String jdbc = io.oneshot.testing.TestDatabase.jdbcUrl(url);
    try (var c = java.sql.DriverManager.getConnection(jdbc)) {
      c.createStatement()
          .execute(
              "CREATE TABLE jobs (id serial PRIMARY KEY, taken boolean NOT NULL DEFAULT false);"
                  + " INSERT INTO jobs DEFAULT VALUES");
    }
    java.nio.file.Path go = tmp.resolve("go");
    // The script takes its job (says so), then waits for the test before it ends.
    t =
        TestServer.with()
            .routes(
                """
                routes:
                  - {name: jobs, maxConcurrent: 10}
                sources:
                  - name: own
                    kind: postgres
                    databaseUrl: '%s'
                    channel: jobs_posted
                    pollInterval: 1h
                    query: SELECT NULL::jsonb AS tags, count(*) AS waiting FROM jobs WHERE NOT taken
                    input:
                      provisioner: script
                      env: {JOBS: '%s'}
                      command:
                        - sh
                        - -c
                        - >-
                          job=$(psql -qtA "$JOBS" -c "UPDATE jobs SET taken = true WHERE id = (SELECT id
                          FROM jobs WHERE NOT taken ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id") &&
                          echo "job $job" > "$ONESHOT_JOB_TAKEN_FILE" &&
                          while [ ! -e %s ]; do sleep 0.05; done
                    routes: [jobs]
                """
                    .formatted(url, url, go))
            .start();
    await()
        .atMost(Duration.ofSeconds(60))
        .until(
            () ->
                // ... or the build ended without saying so: no point waiting.
                Sql.count(
                        "SELECT count(*) FROM oneshot.builds WHERE source_taken_at IS NOT NULL"
                            + " OR status IN ('failed', 'succeeded', 'canceled')")
                    > 0);
    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds WHERE source_taken_at IS NOT NULL"))
        .isEqualTo(1);
    long first = (Long) Sql.value("SELECT min(id) FROM oneshot.builds");
    assertThat(Sql.transitions(first)).isNotEmpty();
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.build_events WHERE build_id = ? AND reason = ?",
                first,
                "took a job: job 1"))
        .isEqualTo(1);
    // The job is taken at the source, and a new one waits: it gets a build of its own while the
    // first still runs.
    try (var c = java.sql.DriverManager.getConnection(jdbc)) {
      c.createStatement()
          .execute(
              "UPDATE jobs SET taken = true; INSERT INTO jobs DEFAULT VALUES; NOTIFY jobs_posted");
    }
    await()
        .atMost(Duration.ofSeconds(60))
        .until(() -> Sql.count("SELECT count(*) FROM oneshot.builds") == 2);
    assertThat(Sql.value("SELECT status FROM oneshot.builds WHERE id = ?", first))
        .isEqualTo("running");
    java.nio.file.Files.writeString(go, "");
    await()
        .atMost(Duration.ofSeconds(60))
        .until(
            () -> Sql.count("SELECT count(*) FROM oneshot.builds WHERE status = 'succeeded'") == 2);
    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds")).isEqualTo(2);
  }
}
