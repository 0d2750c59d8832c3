package io.oneshot.api;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.launch.Attempt;
import io.oneshot.testing.Api;
import io.oneshot.testing.RecordingLauncher;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** Workspace state through the runner API: versions, handover, and writers that must not write. */
class WorkspaceStateTest {
  private TestServer t;
  private final RecordingLauncher launcher = new RecordingLauncher();

  @BeforeEach
  void start() {
    t =
        TestServer.with()
            .routes("routes: [{name: tf, maxAttempts: 3}]")
            .limits("maxStateBytes: 4KiB, maxRequestBytes: 2MiB, maxLogBytes: 64KiB")
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

  private Attempt launched(long id, int attempt) {
    return launcher.awaitLaunched(id, attempt);
  }

  private Api.Response call(Attempt a, String what, String body) {
    return new Api(t.api.base(), null).post("/api/v1/runner/" + what, body, a.token().value());
  }

  private static String state(int serial, String marker) {
    return "{\"version\": 4, \"serial\": "
        + serial
        + ", \"lineage\": \"L\", \"resources\": [\""
        + marker
        + "\"]}";
  }

  private static String body(String state) {
    return "{\"state\": " + io.oneshot.api.Json.write(state) + "}";
  }

  private static final String CHECKPOINT =
      "{\"version\": 3, \"checkpoint\": {\"stack\": \"organization/web/dev\", \"latest\":"
          + " {\"manifest\": {\"time\": \"2026-12-07T01:00:00Z\", \"magic\": \"m\","
          + " \"version\": \"v3.205.0\"}, \"resources\": []}}}";

  private long submitPulumi(String workspace) {
    Api.Response r =
        t.api.post(
            "/api/v1/builds",
            "{\"workspace\": "
                + io.oneshot.api.Json.write(workspace)
                + ", \"input\": {\"provisioner\": \"pulumi\", \"project\": \"web\","
                + " \"stack\": \"dev\", \"files\": {\"Pulumi.yaml\": \"name: web\"}}}");
    assertThat(r.status()).as(r.text()).isEqualTo(201);
    return r.json().path("id").asLong();
  }

  @Test
  void aBuildKeepsOnlyItsOwnToolsStateAndAWorkspaceOneKind() {
    // A terraform build may not store a Pulumi checkpoint.
    Attempt tf = launched(submit("mixed"), 1);
    call(tf, "acquire", "{}");
    Api.Response wrong = call(tf, "state", body(CHECKPOINT));
    assertThat(wrong.status()).isEqualTo(409);
    assertThat(wrong.json().path("error").asText())
        .isEqualTo(
            "state: a terraform build's state must be a terraform state, not a Pulumi checkpoint");
    assertThat(call(tf, "state", body(state(1, "tf"))).status()).isEqualTo(200);
    assertThat(call(tf, "complete", "{\"outcome\": \"succeeded\"}").status()).isEqualTo(200);

    // A pulumi build may not store a terraform state, nor continue the terraform one.
    Attempt pu = launched(submitPulumi("mixed"), 1);
    assertThat(call(pu, "acquire", "{}").json().path("stateVersion").asInt()).isEqualTo(1);
    Api.Response tfState = call(pu, "state", body(state(2, "tf")));
    assertThat(tfState.status()).isEqualTo(409);
    assertThat(tfState.json().path("error").asText())
        .isEqualTo(
            "state: a pulumi build's state must be its stack's Pulumi checkpoint, not a terraform"
                + " state");
    Api.Response over = call(pu, "state", body(CHECKPOINT));
    assertThat(over.status()).isEqualTo(409);
    assertThat(over.json().path("error").asText())
        .isEqualTo(
            "state: version 1 of this workspace is a terraform state, which a pulumi build cannot"
                + " continue");
    assertThat(Sql.count("SELECT count(*) FROM oneshot.workspace_states WHERE workspace = 'mixed'"))
        .isEqualTo(1);

    // On a workspace of its own, the checkpoint is kept, as a Pulumi one.
    Attempt own = launched(submitPulumi("stack-dev"), 1);
    call(own, "acquire", "{}");
    assertThat(call(own, "state", body(CHECKPOINT)).json().path("version").asInt()).isEqualTo(1);
    assertThat(
            Sql.value("SELECT format FROM oneshot.workspace_states WHERE workspace = 'stack-dev'"))
        .isEqualTo("pulumi");
  }

  @Test
  void stateIsHandedOverVersionedAndKeptInHistory() {
    long first = submit("ws");
    Attempt a = launched(first, 1);
    JsonNode acq = call(a, "acquire", "{}").json();
    assertThat(acq.path("stateVersion").asInt()).isZero();
    assertThat(acq.path("state").isNull()).isTrue();
    // Uploads while running update this build's version in place.
    assertThat(call(a, "state", body(state(1, "partial"))).json().path("version").asInt())
        .isEqualTo(1);
    assertThat(call(a, "state", body(state(2, "more"))).json().path("version").asInt())
        .isEqualTo(1);
    // An upload older than the stored one (a late retry) changes nothing.
    call(a, "state", body(state(1, "late")));
    assertThat(
            call(
                    a,
                    "complete",
                    "{\"outcome\": \"succeeded\", \"state\": "
                        + io.oneshot.api.Json.write(state(3, "final"))
                        + "}")
                .status())
        .isEqualTo(200);

    long second = submit("ws");
    Attempt b = launched(second, 1);
    JsonNode acq2 = call(b, "acquire", "{}").json();
    assertThat(acq2.path("stateVersion").asInt()).isEqualTo(1);
    assertThat(acq2.path("state").asText()).contains("\"final\"");
    call(
        b,
        "complete",
        "{\"outcome\": \"failed\", \"state\": "
            + io.oneshot.api.Json.write(state(4, "second"))
            + "}");

    JsonNode versions = t.api.get("/api/v1/workspaces/states?workspace=ws").json().path("versions");
    assertThat(versions).hasSize(2);
    assertThat(versions.get(0).path("version").asInt()).isEqualTo(2);
    assertThat(versions.get(0).path("serial").asInt()).isEqualTo(4);
    assertThat(versions.get(0).path("finished").asBoolean()).isTrue();
    assertThat(versions.get(1).path("serial").asInt()).isEqualTo(3);
    assertThat(t.api.get("/api/v1/workspaces/state?workspace=ws&version=1").text())
        .contains("\"final\"");
    assertThat(t.api.get("/api/v1/workspaces/state?workspace=ws").text()).contains("\"second\"");
    JsonNode shown = t.api.get("/api/v1/builds/" + second).json();
    assertThat(shown.path("stateRead").asInt()).isEqualTo(1);
    assertThat(shown.path("stateWritten").asInt()).isEqualTo(2);
  }

  @Test
  void aStaleAttemptCanNeitherCompleteNorWriteState() {
    long id = submit("ws-stale");
    Attempt old = launched(id, 1);
    launcher.exit(old.name(), 1);
    Attempt current = launched(id, 2);
    call(current, "acquire", "{}");
    call(current, "state", body(state(7, "current")));

    assertThat(call(old, "state", body(state(99, "stale"))).status()).isEqualTo(401);
    assertThat(
            call(
                    old,
                    "complete",
                    "{\"outcome\": \"succeeded\", \"state\": "
                        + io.oneshot.api.Json.write(state(99, "stale"))
                        + "}")
                .status())
        .isEqualTo(401);
    assertThat(
            Sql.rows(
                "SELECT serial, state LIKE '%current%' AS cur FROM oneshot.workspace_states WHERE workspace = 'ws-stale'"))
        .singleElement()
        .satisfies(
            r -> {
              assertThat(r.get("serial")).isEqualTo(7L);
              assertThat(r.get("cur")).isEqualTo(true);
            });
    assertThat(Sql.value("SELECT status FROM oneshot.builds WHERE id = ?", id))
        .isEqualTo("running");
  }

  @Test
  void badStateIsRefusedAndWritesNothing() {
    long id = submit("ws-bad");
    Attempt a = launched(id, 1);
    call(a, "acquire", "{}");
    Api.Response notString = call(a, "state", "{\"state\": {\"serial\": 1}}");
    assertThat(notString.status()).isEqualTo(400);
    assertThat(notString.json().path("field").asText()).isEqualTo("state");
    assertThat(call(a, "state", body("not json")).status()).isEqualTo(400);
    Api.Response big = call(a, "state", body(state(1, "x".repeat(5000))));
    assertThat(big.status()).isEqualTo(413);
    assertThat(big.json().path("error").asText()).contains("the limit is 4096 bytes");
    assertThat(Sql.count("SELECT count(*) FROM oneshot.workspace_states")).isZero();
  }

  @Test
  void logsResumeWithAfterWithoutGapsOrDuplicates() {
    long id = submit("ws-logs");
    Attempt a = launched(id, 1);
    call(a, "acquire", "{}");
    int n = 0;
    for (int batch = 0; batch < 5; batch++) {
      StringBuilder lines = new StringBuilder();
      for (int i = 0; i < 50; i++) {
        lines.append(i == 0 ? "" : ",").append("{\"text\": \"line ").append(n + i).append("\"}");
      }
      call(a, "logs", "{\"first\": " + (n + 1) + ", \"lines\": [" + lines + "]}");
      n += 50;
    }
    List<String> all = texts(t.api.get("/api/v1/builds/" + id + "/logs").text());
    assertThat(all).hasSize(250);
    List<String> resumed = new ArrayList<>();
    long after = 0;
    for (int step : new int[] {7, 93, 1, 60, 200}) {
      List<JsonNode> page =
          ndjson(t.api.get("/api/v1/builds/" + id + "/logs?after=" + after).text());
      for (JsonNode l : page.subList(0, Math.min(step, page.size()))) {
        resumed.add(l.path("text").asText());
        after = l.path("seq").asLong();
      }
    }
    assertThat(resumed).isEqualTo(all);
  }

  private static List<JsonNode> ndjson(String text) {
    return text.lines().filter(l -> !l.isBlank()).map(io.oneshot.api.Json::tree).toList();
  }

  private static List<String> texts(String text) {
    return ndjson(text).stream().map(l -> l.path("text").asText()).toList();
  }
}
