package io.oneshot.api;

import static io.oneshot.testing.TestServer.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.launch.Attempt;
import io.oneshot.testing.Api;
import io.oneshot.testing.Audit;
import io.oneshot.testing.RecordingLauncher;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * An attempt belongs to the runner that acquired it first: every runner call from another runner
 * holding the same token is refused, changes nothing, and is visible.
 */
class RunnerBindingTest {
  private static final String FIRST = "runner-first-0001";
  private static final String SECOND = "runner-second-0002";

  private TestServer t;
  private final RecordingLauncher launcher = new RecordingLauncher();

  @BeforeEach
  void start() {
    t =
        TestServer.with()
            .routes("routes: [{name: tf, maxAttempts: 3}]")
            .limits("maxStateBytes: 4KiB")
            .launcher(launcher)
            .start();
  }

  @AfterEach
  void stop() {
    t.close();
  }

  private long submit(String workspace) {
    return t.api.submitTerraform(workspace, "");
  }

  private Attempt launched(long id) {
    return launcher.awaitLaunched(id, 1);
  }

  private Api.Response call(Attempt a, String runner, String what, String body) {
    return new Api(t.api.base(), null)
        .post("/api/v1/runner/" + what, body, a.token().value(), runner);
  }

  private static String state(int serial, String lineage, String marker) {
    return "{\"state\": "
        + Json.write(
            "{\"version\": 4, \"serial\": "
                + serial
                + ", \"lineage\": \""
                + lineage
                + "\", \"resources\": [\""
                + marker
                + "\"]}")
        + "}";
  }

  private static List<String> log(long id) {
    return Sql.rows("SELECT text FROM oneshot.build_logs WHERE build_id = ? ORDER BY seq", id)
        .stream()
        .map(r -> (String) r.get("text"))
        .toList();
  }

  private static Object heartbeat(long id) {
    return Sql.value("SELECT heartbeat_at FROM oneshot.builds WHERE id = ?", id);
  }

  @Test
  void aSecondRunnerIsRefusedAtAcquireAndTheConflictIsInTheLogTimelineAndMetrics() {
    long id = submit("ws-a");
    Attempt a = launched(id);
    assertThat(call(a, FIRST, "acquire", "{}").status()).isEqualTo(200);

    Api.Response second = call(a, SECOND, "acquire", "{}");
    assertThat(second.status()).isEqualTo(409);
    assertThat(second.json().path("error").asText())
        .startsWith("attempt 1 of build " + id + " is held by runner " + fingerprint(FIRST))
        .contains(" since ");
    assertThat(second.json().path("holder").path("runner").asText()).isEqualTo(fingerprint(FIRST));
    assertThat(second.text()).as("the holder's id, which would pass for it").doesNotContain(FIRST);

    String line =
        "a second runner was refused: runner " + fingerprint(SECOND) + " tried to acquire";
    assertThat(log(id)).anyMatch(l -> l.startsWith(line));
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.build_events WHERE build_id = ? AND reason LIKE ?",
                id,
                line + "%"))
        .isEqualTo(1);
    assertThat(t.api.get("/metrics").text())
        .contains("oneshot_runner_conflicts_total{route=\"tf\"} 1.0");
    await()
        .atMost(10, TimeUnit.SECONDS)
        .until(() -> launcher.removedRunners.contains(a.name() + " " + SECOND));
    assertThat(Sql.value("SELECT runner_id FROM oneshot.builds WHERE id = ?", id)).isEqualTo(FIRST);
    JsonNode bound = t.api.get("/api/v1/builds/" + id).json().path("runner");
    assertThat(bound.path("runner").asText()).isEqualTo(fingerprint(FIRST));
    assertThat(bound.path("since").asText()).isNotBlank();
    assertThat(t.api.get("/api/v1/builds/" + id).text()).doesNotContain(FIRST);
  }

  private static String fingerprint(String runnerId) {
    return new io.oneshot.build.Runner(runnerId, null, null, null, null).fingerprint();
  }

  @Test
  void aRepeatedAcquireByTheHolderGetsTheSameAnswer() {
    long id = submit("ws-b");
    Attempt a = launched(id);
    JsonNode first = call(a, FIRST, "acquire", "{}").json();
    Api.Response again = call(a, FIRST, "acquire", "{}");
    assertThat(again.status()).isEqualTo(200);
    assertThat(again.json().path("stateVersion")).isEqualTo(first.path("stateVersion"));
    assertThat(again.json().path("leaseMs").asLong()).isEqualTo(30_000);
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.build_events WHERE build_id = ? AND to_status = 'running'"
                    + " AND from_status = 'launching'",
                id))
        .isEqualTo(1);
  }

  @Test
  void everyRunnerCallFromASecondRunnerIsRefusedAndChangesNothing() {
    long id = submit("ws-c");
    Attempt a = launched(id);
    call(a, FIRST, "acquire", "{}");
    assertThat(call(a, FIRST, "state", state(1, "L", "first")).status()).isEqualTo(200);
    Object beat = heartbeat(id);

    assertThat(call(a, SECOND, "heartbeat", "{}").status()).isEqualTo(409);
    assertThat(heartbeat(id)).as("a refused heartbeat renews nothing").isEqualTo(beat);
    assertThat(
            call(a, SECOND, "logs", "{\"first\": 1, \"lines\": [{\"text\": \"intruder\"}]}")
                .status())
        .isEqualTo(409);
    assertThat(call(a, SECOND, "state", state(9, "L", "intruder")).status()).isEqualTo(409);
    assertThat(
            call(
                    a,
                    SECOND,
                    "complete",
                    "{\"outcome\": \"succeeded\", \"exitCode\": 0, \"state\": "
                        + Json.write(Json.tree(state(9, "L", "intruder")).path("state").asText())
                        + "}")
                .status())
        .isEqualTo(409);
    assertThat(status(id)).isEqualTo("running");
    assertThat(log(id)).noneMatch(l -> l.equals("intruder"));
    assertThat(Sql.value("SELECT state FROM oneshot.workspace_states WHERE build_id = ?", id))
        .asString()
        .contains("first")
        .doesNotContain("intruder");

    // The holder goes on, and only its repeated complete is answered as a success.
    assertThat(call(a, FIRST, "logs", "{\"first\": 1, \"lines\": [{\"text\": \"mine\"}]}").status())
        .isEqualTo(200);
    assertThat(call(a, FIRST, "complete", "{\"outcome\": \"failed\", \"exitCode\": 3}").status())
        .isEqualTo(200);
    assertThat(call(a, FIRST, "complete", "{\"outcome\": \"failed\", \"exitCode\": 3}").status())
        .isEqualTo(200);
    assertThat(
            call(a, SECOND, "complete", "{\"outcome\": \"succeeded\", \"exitCode\": 0}").status())
        .isEqualTo(409);
    assertThat(Sql.value("SELECT exit_code FROM oneshot.builds WHERE id = ?", id)).isEqualTo(3);
    assertThat(log(id)).contains("mine");
  }

  @Test
  void aCallThatNamesNoRunnerIsRefusedAndWritesNothing() {
    long id = submit("ws-d");
    Attempt a = launched(id);
    Api.Response r = call(a, null, "acquire", "{}");
    assertThat(r.status()).isEqualTo(400);
    assertThat(r.json().path("field").asText()).isEqualTo("Oneshot-Runner-Id");
    assertThat(call(a, "short", "acquire", "{}").status()).isEqualTo(400);
    assertThat(status(id)).isEqualTo("launching");
  }

  @Test
  void withinAnAttemptStateOnlyMovesForwardOnOneLineage() {
    long first = submit("ws-e");
    Attempt a = launched(first);
    call(a, FIRST, "acquire", "{}");
    assertThat(call(a, FIRST, "state", state(5, "L1", "five")).status()).isEqualTo(200);
    Api.Response lower = call(a, FIRST, "state", state(4, "L1", "four"));
    assertThat(lower.status()).isEqualTo(409);
    assertThat(lower.json().path("error").asText())
        .isEqualTo("state: serial 4 is lower than serial 5, which this attempt stored already");
    Api.Response other = call(a, FIRST, "state", state(6, "L2", "other"));
    assertThat(other.status()).isEqualTo(409);
    assertThat(other.json().path("error").asText())
        .isEqualTo("state: lineage L2 differs from lineage L1, which this attempt stored already");
    assertThat(call(a, FIRST, "state", state(6, "L1", "six")).status()).isEqualTo(200);
    call(a, FIRST, "complete", "{\"outcome\": \"succeeded\"}");

    // The next build starts from version 1 (lineage L1, serial 6): it must continue it.
    long next = submit("ws-e");
    Attempt b = launched(next);
    call(b, FIRST, "acquire", "{}");
    Api.Response foreign = call(b, FIRST, "state", state(7, "L9", "foreign"));
    assertThat(foreign.status()).isEqualTo(409);
    assertThat(foreign.json().path("error").asText())
        .startsWith("state: lineage L9 differs from lineage L1 of version 1, which this build");
    Api.Response older = call(b, FIRST, "state", state(2, "L1", "older"));
    assertThat(older.status()).isEqualTo(409);
    assertThat(older.json().path("error").asText())
        .isEqualTo(
            "state: serial 2 is lower than serial 6 of version 1, which this build started from");
    assertThat(call(b, FIRST, "state", state(7, "L1", "seven")).status()).isEqualTo(200);
    assertThat(
            Sql.rows(
                "SELECT version, serial, lineage FROM oneshot.workspace_states"
                    + " WHERE workspace = 'ws-e' ORDER BY version"))
        .extracting(r -> r.get("serial") + "/" + r.get("lineage"))
        .containsExactly("6/L1", "7/L1");
  }

  /**
   * Terraform starts a new lineage only when it is given no state: a build that started from none
   * while the workspace has versions (here the version it was given was removed by hand) may store
   * a new lineage, and its log says so.
   */
  @Test
  void aNewLineageIsStoredOnlyWhereTerraformStartsOneAndIsLogged() {
    long first = submit("ws-f");
    Attempt a = launched(first);
    call(a, FIRST, "acquire", "{}");
    assertThat(call(a, FIRST, "state", state(3, "L1", "three")).status()).isEqualTo(200);
    call(a, FIRST, "complete", "{\"outcome\": \"succeeded\"}");

    long next = submit("ws-f");
    Attempt b = launched(next);
    call(b, FIRST, "acquire", "{}");
    assertThat(Sql.value("SELECT state_read_version FROM oneshot.builds WHERE id = ?", next))
        .isEqualTo(1);
    Sql.exec("UPDATE oneshot.builds SET state_read_version = 0 WHERE id = ?", next);
    Api.Response fresh = call(b, FIRST, "state", state(1, "L2", "fresh"));
    assertThat(fresh.status()).as(fresh.text()).isEqualTo(200);
    assertThat(log(next))
        .anyMatch(
            l ->
                l.contains(
                    "terraform started a new lineage L2; the previous version 1 had lineage L1"));
    assertThat(log(first)).noneMatch(l -> l.contains("new lineage"));
    // Within the attempt the new lineage is then the one to continue.
    assertThat(call(b, FIRST, "state", state(2, "L1", "back")).status()).isEqualTo(409);
    assertThat(call(b, FIRST, "state", state(2, "L2", "on")).status()).isEqualTo(200);
  }

  /**
   * A runner the launcher proves to be another attempt's (a build's own provisionerd, holding a
   * token it should not have) binds nothing with that token: its acquire is refused and visible,
   * and the attempt is still its own runner's to take.
   */
  @Test
  void aRunnerProvenForOneAttemptCannotTakeAnothersWithItsToken() {
    long a = submit("ws-a");
    long b = submit("ws-b");
    Attempt ofA = launched(a);
    Attempt ofB = launched(b);
    launcher.prover =
        call ->
            new io.oneshot.launch.RunnerProof.Proven(
                new io.oneshot.build.Runner("local-4242-1", null, null, null, 4242L), ofA.ref());
    Api.Response stolen = call(ofB, FIRST, "acquire", "{}");
    assertThat(stolen.status()).isEqualTo(401);
    assertThat(stolen.json().path("error").asText())
        .contains(
            "(process 4242) was started for attempt oneshot-" + a + "-1, not for this token's");
    assertThat(TestServer.status(b)).isEqualTo("launching");
    assertThat(Audit.unproven(b)).isEqualTo(1);
    assertThat(call(ofA, FIRST, "acquire", "{}").status()).isEqualTo(200);
    assertThat(TestServer.status(a)).isEqualTo("running");
  }

  /**
   * A runner proven once is answered with a session secret, and its later calls on new connections
   * carry it instead of being proven again; the secret speaks for that runner alone, and one nobody
   * was given speaks for nobody.
   */
  @Test
  void aProvenRunnerGetsASessionThatSparesItsLaterCallsAProofAndNobodyElses() throws Exception {
    long id = submit("ws-session");
    Attempt a = launched(id);
    java.util.concurrent.atomic.AtomicInteger proofs =
        new java.util.concurrent.atomic.AtomicInteger();
    launcher.prover =
        call -> {
          proofs.incrementAndGet();
          return io.oneshot.testing.StatedRunner.prove(call);
        };
    java.util.function.BiFunction<String, String, java.net.http.HttpResponse<String>> send =
        (runner, session) -> {
          // A client of its own each time: a new connection, which nothing has proven yet.
          java.net.http.HttpRequest.Builder r =
              java.net.http.HttpRequest.newBuilder(
                      java.net.URI.create(
                          t.api.base()
                              + "/api/v1/runner/"
                              + (session == null ? "acquire" : "heartbeat")))
                  .header("Authorization", "Bearer " + a.token().value())
                  .header(RunnerHeaders.ID, runner)
                  .header("Content-Type", "application/json")
                  .POST(java.net.http.HttpRequest.BodyPublishers.ofString("{}"));
          if (session != null) {
            r.header(RunnerHeaders.SESSION, session);
          }
          try (java.net.http.HttpClient c = java.net.http.HttpClient.newHttpClient()) {
            return c.send(r.build(), java.net.http.HttpResponse.BodyHandlers.ofString());
          } catch (java.io.IOException | InterruptedException e) {
            throw new IllegalStateException(e);
          }
        };
    java.net.http.HttpResponse<String> acquired = send.apply(FIRST, null);
    assertThat(acquired.statusCode()).isEqualTo(200);
    assertThat(proofs.get()).isEqualTo(1);
    String session = acquired.headers().firstValue(RunnerHeaders.SESSION).orElseThrow();

    assertThat(send.apply(FIRST, session).statusCode()).isEqualTo(200);
    assertThat(proofs.get()).as("its session spoke for it").isEqualTo(1);
    assertThat(send.apply(SECOND, session).statusCode()).isEqualTo(409);
    assertThat(proofs.get()).as("not for another runner").isEqualTo(2);
    assertThat(send.apply(FIRST, "made-up-" + session).statusCode()).isEqualTo(200);
    assertThat(proofs.get()).as("a secret nobody was given speaks for nobody").isEqualTo(3);
  }
}
