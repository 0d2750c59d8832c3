package io.oneshot.api;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.launch.Attempt;
import io.oneshot.testing.Api;
import io.oneshot.testing.RecordingLauncher;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** The HTTP API: what it accepts, what it refuses and how, and the runner's token rules. */
class ApiTest {
  private static final String SCRIPT =
      "{\"provisioner\": \"script\", \"command\": [\"sh\", \"-c\", \"true\"]}";
  private static TestServer t;
  private static final RecordingLauncher launcher = new RecordingLauncher();

  @BeforeAll
  static void start() {
    t =
        TestServer.with()
            .routes(TestServer.THREE_ROUTES)
            .limits(
                "maxInputBytes: 4KiB, maxRequestBytes: 80KiB, maxLogLineBytes: 256, maxLogBytes: 2KiB,"
                    + " maxStateBytes: 8KiB")
            .launcher(launcher)
            .start();
  }

  @AfterAll
  static void stop() {
    t.close();
  }

  @BeforeEach
  void empty() {
    // Ids keep counting across tests, so that an attempt recorded earlier never matches.
    Sql.emptyBuilds();
  }

  private static void nothingWritten() {
    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds")).isZero();
    assertThat(Sql.count("SELECT count(*) FROM oneshot.build_events")).isZero();
  }

  private static Api runner() {
    return new Api(t.api.base(), null);
  }

  private static double truncated(String how) {
    Double v =
        io.oneshot.testing.PromText.parse(t.server.metrics().scrape())
            .value("oneshot_log_lines_truncated_total", "how", how);
    return v == null ? 0 : v;
  }

  private Attempt launched(long id) {
    await()
        .atMost(10, TimeUnit.SECONDS)
        .until(() -> launcher.launched.stream().anyMatch(a -> a.buildId() == id));
    return launcher.launched.stream().filter(a -> a.buildId() == id).findFirst().orElseThrow();
  }

  @Test
  void createsABuildAndShowsItWithItsTimeline() {
    Api.Response r =
        t.api.post(
            "/api/v1/builds",
            "{\"tags\": {\"team\": \"b\"}, \"input\": "
                + SCRIPT
                + ", \"priority\": 3, \"workspace\": \"ws-1\"}");
    assertThat(r.status()).isEqualTo(201);
    assertThat(r.json().path("route").asText()).isEqualTo("b");
    assertThat(r.json().path("status").asText()).isEqualTo("pending");
    long id = r.json().path("id").asLong();
    launched(id);
    JsonNode b = t.api.get("/api/v1/builds/" + id).json();
    assertThat(b.path("tags").path("team").asText()).isEqualTo("b");
    assertThat(b.path("workspace").asText()).isEqualTo("ws-1");
    assertThat(b.path("priority").asInt()).isEqualTo(3);
    assertThat(b.path("createdAt").asText())
        .matches("\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z");
    assertThat(b.path("events").get(0).path("to").asText()).isEqualTo("pending");
    assertThat(b.path("events").get(1).path("from").asText()).isEqualTo("pending");
    assertThat(b.path("events").get(1).path("to").asText()).isEqualTo("launching");
    assertThat(b.path("launch").path("name").asText()).isEqualTo("oneshot-" + id + "-1");

    JsonNode list = t.api.get("/api/v1/builds?route=b&status=launching").json();
    assertThat(list.path("builds")).hasSize(1);
    assertThat(t.api.get("/api/v1/builds?route=a").json().path("builds")).isEmpty();

    JsonNode routes = t.api.get("/api/v1/routes").json();
    assertThat(routes).hasSize(3);
    assertThat(routes.get(1).path("name").asText()).isEqualTo("b");
    assertThat(routes.get(1).path("running").asInt()).isEqualTo(1);
    assertThat(routes.get(1).path("maxConcurrent").asInt()).isEqualTo(3);
  }

  @ParameterizedTest(name = "{0}")
  @CsvSource(
      delimiter = '|',
      quoteCharacter = '`',
      textBlock =
          """
          malformed JSON        | {"tags": {}, "input": | 400 | body | body: malformed JSON
          not an object         | [1, 2] | 400 | body | body: must be a JSON object
          empty body            | `` | 400 | body | body: a JSON object is required
          unknown field         | {"input": SCRIPT, "tag": {}} | 400 | tag | tag: unknown field
          priority type         | {"input": SCRIPT, "priority": "high"} | 400 | priority | priority: must be an integer from -1000 to 1000, got "high"
          priority fraction     | {"input": SCRIPT, "priority": 1.5} | 400 | priority | priority: must be an integer from -1000 to 1000, got 1.5
          workspace type        | {"input": SCRIPT, "workspace": 7} | 400 | workspace | workspace: must be a string, got 7
          tags type             | {"tags": "team=a", "input": SCRIPT} | 400 | tags | tags: must be an object of string values, like {"org": "default"}
          bad tag key           | {"tags": {"a b": "x"}, "input": SCRIPT} | 400 | tags | tags: "a b" is not a valid tag key
          bad tag value         | {"tags": {"team": "a/b"}, "input": SCRIPT} | 400 | tags.team | tags.team: "a/b" is not a valid tag value
          no route              | {"tags": {"team": "z"}, "input": SCRIPT} | 400 | tags | tags: no route matches {"team": "z"}
          missing input         | {"tags": {}} | 400 | input | input: must be an object, like {"provisioner": "script", "command": ["sh", "-c", "echo hi"]}
          command type          | {"input": {"provisioner": "script", "command": "ls"}} | 400 | input.command | input.command: is required: a non-empty array of strings, like ["sh", "-c", "echo hi"]
          NUL in a tag key      | {"tags": {"a\\u0000b": "c"}, "input": SCRIPT} | 400 | tags | tags: has a key with a NUL character (\\u0000): a?b
          NUL in a tag value    | {"tags": {"team": "a\\u0000"}, "input": SCRIPT} | 400 | tags.team | tags.team: must not contain a NUL character (\\u0000)
          NUL in the workspace  | {"input": SCRIPT, "workspace": "w\\u0000"} | 400 | workspace | workspace: must not contain a NUL character (\\u0000)
          NUL in the command    | {"input": {"provisioner": "script", "command": ["echo", "a\\u0000"]}} | 400 | input.command[1] | input.command[1]: must not contain a NUL character (\\u0000)
          NUL in an env name    | {"input": {"provisioner": "script", "command": ["true"], "env": {"A\\u0000": "1"}}} | 400 | input.env | input.env: has a key with a NUL character (\\u0000): A?
          """)
  void refusesBadInputNamingTheFieldAndWritesNothing(
      String name, String body, int status, String field, String error) {
    Api.Response r =
        t.api.post("/api/v1/builds", body == null ? "" : body.replace("SCRIPT", SCRIPT));
    assertThat(r.status()).as(r.text()).isEqualTo(status);
    assertThat(r.json().path("error").asText()).isEqualTo(error);
    assertThat(r.json().path("field").asText()).isEqualTo(field);
    assertThat(r.json().has("detail")).isTrue();
    nothingWritten();
  }

  @Test
  void anInputOverTheConfiguredCapIsRefused() {
    String big =
        "{\"input\": {\"provisioner\": \"script\", \"command\": [\"echo\", \""
            + "x".repeat(5000)
            + "\"]}}";
    Api.Response r = t.api.post("/api/v1/builds", big);
    assertThat(r.status()).isEqualTo(400);
    assertThat(r.json().path("field").asText()).isEqualTo("input");
    assertThat(r.json().path("error").asText()).endsWith("bytes; the limit is 4096 bytes");
    assertThat(r.json().path("detail").asText()).contains("limits.maxInputBytes");
    nothingWritten();
  }

  @Test
  void aBodyOverTheRequestCapIsRefusedBeforeItIsRead() {
    String huge =
        "{\"input\": {\"provisioner\": \"script\", \"command\": [\""
            + "x".repeat(100_000)
            + "\"]}}";
    Api.Response r = t.api.post("/api/v1/builds", huge);
    assertThat(r.status()).isEqualTo(413);
    assertThat(r.json().path("error").asText()).isEqualTo("body: larger than the limit of 80 KiB");
    nothingWritten();
  }

  @Test
  void adminCallsNeedTheAdminToken() {
    Api anonymous = new Api(t.api.base(), null);
    Api wrong = new Api(t.api.base(), "not-the-admin-token-at-all");
    for (Api a : List.of(anonymous, wrong)) {
      Api.Response r = a.post("/api/v1/builds", "{\"input\": " + SCRIPT + "}");
      assertThat(r.status()).isEqualTo(401);
      assertThat(r.json().path("error").asText()).isEqualTo("unauthorized");
      assertThat(a.get("/api/v1/builds").status()).isEqualTo(401);
      assertThat(a.get("/api/v1/routes").status()).isEqualTo(401);
    }
    nothingWritten();
    assertThat(anonymous.get("/healthz").status()).isEqualTo(200);
  }

  @Test
  void readinessSaysWhetherTheDatabaseAnswersAndWhoLeads() {
    await().atMost(10, TimeUnit.SECONDS).until(() -> t.server.leader());
    Api.Response r = new Api(t.api.base(), null).get("/readyz");
    assertThat(r.status()).isEqualTo(200);
    assertThat(r.json().path("ready").asBoolean()).isTrue();
    assertThat(r.json().path("database").asText()).isEqualTo("ok");
    assertThat(r.json().path("leader").asBoolean()).isTrue();
  }

  @Test
  void unknownBuildsAndBadQueriesAreNamed() {
    Api.Response r = t.api.get("/api/v1/builds/42");
    assertThat(r.status()).isEqualTo(404);
    assertThat(r.json().path("error").asText()).isEqualTo("build 42 not found");
    assertThat(t.api.get("/api/v1/builds/abc").status()).isEqualTo(404);
    assertThat(t.api.get("/api/v1/builds/42/logs").status()).isEqualTo(404);
    assertThat(t.api.post("/api/v1/builds/42/cancel", "{}").status()).isEqualTo(404);
    Api.Response s = t.api.get("/api/v1/builds?status=done");
    assertThat(s.status()).isEqualTo(400);
    assertThat(s.json().path("field").asText()).isEqualTo("status");
    assertThat(t.api.get("/api/v1/builds?limit=0").json().path("field").asText())
        .isEqualTo("limit");
    Api.Response nothing = t.api.get("/api/v1/nothing");
    assertThat(nothing.status()).isEqualTo(404);
    assertThat(nothing.json().path("error").asText())
        .isEqualTo("no such endpoint: GET /api/v1/nothing");
    // An endpoint asked with a method it does not have: 405, not 404.
    Api.Response delete = t.api.call("DELETE", "/api/v1/builds/42");
    assertThat(delete.status()).isEqualTo(405);
    assertThat(delete.json().path("error").asText())
        .isEqualTo("DELETE is not allowed on /api/v1/builds/42");
    assertThat(t.api.call("PUT", "/api/v1/routes").status()).isEqualTo(405);
    assertThat(t.api.get("/api/v1/builds/42/rerun").status()).isEqualTo(405);
  }

  @Test
  void cancelEndsAQueuedBuildAtOnceAndRefusesAFinishedOne() {
    Sql.exec("UPDATE oneshot.routes SET max_concurrent = 0 WHERE name = 'c'");
    try {
      long id = t.api.submitScript("{\"team\": \"c\"}", "true");
      Api.Response r = t.api.post("/api/v1/builds/" + id + "/cancel", "{}");
      assertThat(r.status()).isEqualTo(202);
      assertThat(r.json().path("status").asText()).isEqualTo("canceled");
      assertThat(TestServer.status(id)).isEqualTo("canceled");
      // The timeline says who canceled it.
      assertThat(
              Sql.value(
                  "SELECT reason FROM oneshot.build_events WHERE build_id = ? AND to_status ="
                      + " 'canceled'",
                  id))
          .isEqualTo("canceled by admin while pending");
      Api.Response again = t.api.post("/api/v1/builds/" + id + "/cancel", "{}");
      assertThat(again.status()).isEqualTo(409);
      assertThat(again.json().path("error").asText())
          .isEqualTo("build " + id + " already canceled");
    } finally {
      Sql.exec("UPDATE oneshot.routes SET max_concurrent = 2 WHERE name = 'c'");
    }
  }

  @Test
  void aFinishedBuildIsRerunWithItsInputTagsPriorityAndWorkspaceAndAnUnfinishedOneIsNot() {
    Sql.exec("UPDATE oneshot.routes SET max_concurrent = 0 WHERE name = 'c'");
    try {
      String input = "{\"provisioner\": \"script\", \"command\": [\"sh\", \"-c\", \"echo hi\"]}";
      Api.Response made =
          t.api.post(
              "/api/v1/builds",
              "{\"tags\": {\"team\": \"c\"}, \"input\": "
                  + input
                  + ", \"priority\": 7, \"workspace\": \"ws-9\"}");
      long id = made.json().path("id").asLong();

      Api.Response early = t.api.post("/api/v1/builds/" + id + "/rerun", "{}");
      assertThat(early.status()).isEqualTo(409);
      assertThat(early.json().path("error").asText())
          .isEqualTo("build " + id + " is pending, not finished");
      assertThat(Sql.count("SELECT count(*) FROM oneshot.builds")).isEqualTo(1);

      t.api.post("/api/v1/builds/" + id + "/cancel", "{}");
      Api.Response again = t.api.post("/api/v1/builds/" + id + "/rerun", "{}");
      assertThat(again.status()).isEqualTo(201);
      long rerun = again.json().path("id").asLong();
      assertThat(rerun).isNotEqualTo(id);
      assertThat(again.json().path("rerunOf").asLong()).isEqualTo(id);
      assertThat(again.json().path("route").asText()).isEqualTo("c");

      JsonNode shown = t.api.get("/api/v1/builds/" + rerun).json();
      assertThat(shown.path("status").asText()).isEqualTo("pending");
      assertThat(shown.path("rerunOf").asLong()).isEqualTo(id);
      assertThat(shown.has("input")).as("the build view leaves the input out").isFalse();
      Api.Response in = t.api.get("/api/v1/builds/" + rerun + "/input");
      assertThat(in.status()).isEqualTo(200);
      assertThat(in.json()).isEqualTo(Json.tree(input));
      assertThat(t.api.get("/api/v1/builds/" + id + "/input").json()).isEqualTo(Json.tree(input));
      assertThat(t.api.get("/api/v1/builds/999999/input").status()).isEqualTo(404);
      assertThat(shown.path("tags")).isEqualTo(Json.tree("{\"team\": \"c\"}"));
      assertThat(shown.path("priority").asInt()).isEqualTo(7);
      assertThat(shown.path("workspace").asText()).isEqualTo("ws-9");
      assertThat(t.api.get("/api/v1/builds/" + id).json().path("rerunOf").isNull()).isTrue();

      // Routed by today's routes: a rerun whose tags no route matches any more is refused.
      Sql.exec("UPDATE oneshot.routes SET tags = '{\"team\": \"z\"}' WHERE name = 'c'");
      t.api.post("/api/v1/builds/" + rerun + "/cancel", "{}");
      Api.Response refused = t.api.post("/api/v1/builds/" + rerun + "/rerun", "{}");
      assertThat(refused.status()).isEqualTo(400);
      assertThat(refused.json().path("error").asText())
          .isEqualTo("tags: no route matches {\"team\": \"c\"}");
      assertThat(Sql.count("SELECT count(*) FROM oneshot.builds")).isEqualTo(2);
      assertThat(t.api.post("/api/v1/builds/999999/rerun", "{}").status()).isEqualTo(404);
    } finally {
      Sql.exec(
          "UPDATE oneshot.routes SET max_concurrent = 2, tags = '{\"team\": \"c\"}' WHERE name = 'c'");
    }
  }

  @Test
  void theRunnerTokenIsGoodForItsOwnBuildAloneAndEndsWithComplete() {
    long a = t.api.submitScript("{\"team\": \"a\"}", "echo a");
    long b = t.api.submitScript("{\"team\": \"a\"}", "echo b");
    Attempt ta = launched(a);
    Attempt tb = launched(b);
    Api r = runner();

    Api.Response acq = r.post("/api/v1/runner/acquire", "{}", ta.token().value());
    assertThat(acq.status()).isEqualTo(200);
    assertThat(acq.json().path("buildId").asLong()).isEqualTo(a);
    assertThat(acq.json().path("input").path("command").get(2).asText()).isEqualTo("echo a");
    assertThat(acq.json().path("timeoutMs").asLong()).isEqualTo(3_600_000);
    // A retried acquire (its answer was lost) gets the same build.
    assertThat(
            r.post("/api/v1/runner/acquire", "{}", ta.token().value())
                .json()
                .path("buildId")
                .asLong())
        .isEqualTo(a);
    assertThat(
            r.post("/api/v1/runner/acquire", "{}", tb.token().value())
                .json()
                .path("buildId")
                .asLong())
        .isEqualTo(b);

    assertThat(r.post("/api/v1/runner/acquire", "{}", "osr_forged").status()).isEqualTo(401);
    assertThat(r.post("/api/v1/runner/acquire", "{}", null).status()).isEqualTo(401);
    assertThat(r.post("/api/v1/runner/acquire", "{}", TestServer.ADMIN_TOKEN).status())
        .isEqualTo(401);

    assertThat(
            r.post("/api/v1/runner/heartbeat", "{}", ta.token().value())
                .json()
                .path("cancelRequested")
                .asBoolean())
        .isFalse();
    Api.Response done =
        r.post(
            "/api/v1/runner/complete",
            "{\"outcome\": \"succeeded\", \"exitCode\": 0}",
            ta.token().value());
    assertThat(done.status()).isEqualTo(200);
    assertThat(done.json().path("status").asText()).isEqualTo("succeeded");
    // A retried complete is answered the same; everything else is over.
    assertThat(
            r.post("/api/v1/runner/complete", "{\"outcome\": \"failed\"}", ta.token().value())
                .json()
                .path("status")
                .asText())
        .isEqualTo("succeeded");
    assertThat(r.post("/api/v1/runner/acquire", "{}", ta.token().value()).status()).isEqualTo(410);
    assertThat(r.post("/api/v1/runner/heartbeat", "{}", ta.token().value()).status())
        .isEqualTo(410);
    assertThat(
            r.post("/api/v1/runner/logs", "{\"first\": 1, \"lines\": []}", ta.token().value())
                .status())
        .isEqualTo(410);
    assertThat(TestServer.status(b)).isEqualTo("running");

    // Only the token's hash is stored anywhere.
    for (Attempt x : List.of(ta, tb)) {
      assertThat(
              Sql.count(
                  "SELECT (SELECT count(*) FROM oneshot.builds b WHERE row_to_json(b)::text LIKE ?)"
                      + " + (SELECT count(*) FROM oneshot.build_events e WHERE row_to_json(e)::text LIKE ?)"
                      + " + (SELECT count(*) FROM oneshot.build_logs l WHERE row_to_json(l)::text LIKE ?)",
                  "%" + x.token().value() + "%",
                  "%" + x.token().value() + "%",
                  "%" + x.token().value() + "%"))
          .isZero();
    }
    assertThat(x256(ta.token().value())).isGreaterThanOrEqualTo(256);
  }

  private static int x256(String token) {
    return java.util.Base64.getUrlDecoder().decode(token.substring(4)).length * 8;
  }

  @Test
  void runnerCallsBeforeAcquireAreRefused() {
    long id = t.api.submitScript("{\"team\": \"a\"}", "true");
    Attempt a = launched(id);
    Api.Response r = runner().post("/api/v1/runner/heartbeat", "{}", a.token().value());
    assertThat(r.status()).isEqualTo(409);
    assertThat(r.json().path("error").asText()).isEqualTo("build " + id + " is launching");
  }

  @Test
  void logsAreKeptInOrderCutToTheLineLimitAndStopAtTheBuildLimit() {
    double cutBefore = truncated("cut");
    double droppedBefore = truncated("dropped");
    long id = t.api.submitScript("{\"team\": \"a\"}", "true");
    Attempt a = launched(id);
    Api r = runner();
    r.post("/api/v1/runner/acquire", "{}", a.token().value());
    Api.Response bad =
        r.post(
            "/api/v1/runner/logs", "{\"first\": 1, \"lines\": [{\"text\": 1}]}", a.token().value());
    assertThat(bad.status()).isEqualTo(400);
    assertThat(bad.json().path("field").asText()).isEqualTo("lines[0].text");
    Api.Response bad2 =
        r.post(
            "/api/v1/runner/logs",
            "{\"first\": 1, \"lines\": [{\"text\": \"x\", \"stream\": \"tty\"}]}",
            a.token().value());
    assertThat(bad2.json().path("field").asText()).isEqualTo("lines[0].stream");

    String lines =
        "{\"first\": 1, \"lines\": [{\"ts\": \"2026-01-01T00:00:00.000Z\", \"stream\": \"stdout\", \"text\": \"one\"},"
            + " {\"stream\": \"stderr\", \"text\": \"two\"},"
            + " {\"stream\": \"stdout\", \"text\": \""
            + "y".repeat(1000)
            + "\"}]}";
    Api.Response ok = r.post("/api/v1/runner/logs", lines, a.token().value());
    assertThat(ok.status()).isEqualTo(200);
    assertThat(ok.json().path("accepted").asInt()).isEqualTo(3);

    List<JsonNode> got = ndjson(t.api.get("/api/v1/builds/" + id + "/logs").text());
    assertThat(got)
        .extracting(l -> l.path("text").asText().length() > 20 ? "long" : l.path("text").asText())
        .containsExactly("one", "two", "long");
    assertThat(got.get(0).path("seq").asLong()).isLessThan(got.get(1).path("seq").asLong());
    assertThat(got.get(1).path("stream").asText()).isEqualTo("stderr");
    assertThat(got.get(2).path("text").asText()).endsWith(" …[truncated]");
    assertThat(
            got.get(2)
                .path("text")
                .asText()
                .getBytes(java.nio.charset.StandardCharsets.UTF_8)
                .length)
        .isLessThanOrEqualTo(256);

    // A batch sent again (its answer was lost) is not stored twice.
    Api.Response again = r.post("/api/v1/runner/logs", lines, a.token().value());
    assertThat(again.status()).isEqualTo(200);
    assertThat(again.json().path("accepted").asInt()).isZero();
    assertThat(ndjson(t.api.get("/api/v1/builds/" + id + "/logs").text())).hasSize(3);
    assertThat(truncated("cut") - cutBefore).isEqualTo(1);

    // The build's total is capped at 2 KiB: the rest is dropped, once noted.
    String zs =
        java.util.stream.IntStream.range(0, 20)
            .mapToObj(i -> "{\"text\": \"" + "z".repeat(200) + "\"}")
            .collect(Collectors.joining(","));
    Api.Response capped =
        r.post("/api/v1/runner/logs", "{\"first\": 4, \"lines\": [" + zs + "]}", a.token().value());
    assertThat(capped.json().path("accepted").asInt()).isLessThan(20);
    r.post("/api/v1/runner/logs", "{\"first\": 24, \"lines\": [" + zs + "]}", a.token().value());
    List<JsonNode> after =
        ndjson(
            t.api
                .get("/api/v1/builds/" + id + "/logs?after=" + got.get(2).path("seq").asLong())
                .text());
    assertThat(
            after.stream()
                .filter(l -> l.path("stream").asText().equals("system"))
                .map(l -> l.path("text").asText()))
        .containsExactly(
            "log truncated: this build's log reached its limit of 2 KiB (limits.maxLogBytes); later"
                + " output is dropped, the build goes on");
    int stored = ndjson(t.api.get("/api/v1/builds/" + id + "/logs").text()).size();
    // 40 lines sent after the first three; all but those stored (and the note) were dropped.
    assertThat(truncated("dropped") - droppedBefore).isEqualTo(40 - (stored - 3 - 1));
    Api.Response done =
        r.post(
            "/api/v1/runner/complete",
            "{\"outcome\": \"succeeded\", \"exitCode\": 0}",
            a.token().value());
    assertThat(done.json().path("status").asText()).isEqualTo("succeeded");
  }

  /**
   * A NUL (which PostgreSQL stores in no text) in a log line's text is stored as U+FFFD; anywhere
   * else in a runner's call it is a 400 naming the field, and nothing is written.
   */
  @Test
  void aRunnersNulIsReplacedInLogTextAndRefusedElsewhere() {
    long id = t.api.submitScript("{\"team\": \"a\"}", "true");
    Attempt a = launched(id);
    Api r = runner();
    r.post("/api/v1/runner/acquire", "{}", a.token().value());
    Api.Response ok =
        r.post(
            "/api/v1/runner/logs",
            "{\"first\": 1, \"lines\": [{\"text\": \"bin\\u0000ary\"}]}",
            a.token().value());
    assertThat(ok.status()).as(ok.text()).isEqualTo(200);
    assertThat(ndjson(t.api.get("/api/v1/builds/" + id + "/logs").text()))
        .extracting(l -> l.path("text").asText())
        .containsExactly("bin\uFFFDary");

    Api.Response stage =
        r.post(
            "/api/v1/runner/logs",
            "{\"first\": 2, \"lines\": [{\"text\": \"x\"}, {\"text\": \"y\", \"stage\": \"pl\\u0000an\"}]}",
            a.token().value());
    assertThat(stage.status()).isEqualTo(400);
    assertThat(stage.json().path("field").asText()).isEqualTo("lines[1].stage");
    assertThat(ndjson(t.api.get("/api/v1/builds/" + id + "/logs").text())).hasSize(1);

    Api.Response done =
        r.post(
            "/api/v1/runner/complete",
            "{\"outcome\": \"failed\", \"exitCode\": 1, \"error\": \"bad\\u0000\"}",
            a.token().value());
    assertThat(done.status()).isEqualTo(400);
    assertThat(done.json().path("field").asText()).isEqualTo("error");
    assertThat(io.oneshot.testing.TestServer.status(id)).isEqualTo("running");
  }

  @Test
  void followStreamsNewLinesUntilTheBuildEnds() throws Exception {
    long id = t.api.submitScript("{\"team\": \"a\"}", "true");
    Attempt a = launched(id);
    Api r = runner();
    r.post("/api/v1/runner/acquire", "{}", a.token().value());
    r.post(
        "/api/v1/runner/logs",
        "{\"first\": 1, \"lines\": [{\"text\": \"before\"}]}",
        a.token().value());

    HttpClient http = HttpClient.newHttpClient();
    CompletableFuture<HttpResponse<String>> follow =
        http.sendAsync(
            HttpRequest.newBuilder(
                    URI.create(t.api.base() + "/api/v1/builds/" + id + "/logs?follow=true"))
                .header("Authorization", "Bearer " + TestServer.ADMIN_TOKEN)
                .build(),
            HttpResponse.BodyHandlers.ofString());
    r.post(
        "/api/v1/runner/logs",
        "{\"first\": 2, \"lines\": [{\"text\": \"during\"}]}",
        a.token().value());
    assertThat(follow).isNotDone();
    r.post(
        "/api/v1/runner/complete",
        "{\"outcome\": \"succeeded\", \"exitCode\": 0}",
        a.token().value());
    HttpResponse<String> resp = follow.get(10, TimeUnit.SECONDS);
    assertThat(resp.headers().firstValue("Content-Type")).hasValue("application/x-ndjson");
    assertThat(ndjson(resp.body()))
        .extracting(l -> l.path("text").asText())
        .containsExactly("before", "during");
  }

  private static List<JsonNode> ndjson(String text) {
    return text.lines().filter(l -> !l.isBlank()).map(Json::tree).toList();
  }
}
