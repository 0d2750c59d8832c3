package io.oneshot.api;

import static io.oneshot.testing.TestServer.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.testing.Api;
import io.oneshot.testing.RecordingLauncher;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** A pending build says why it waits: its workspace, its route's limit, the global limit. */
class WaitingReasonTest {
  private TestServer t;
  private final RecordingLauncher launcher = new RecordingLauncher();

  @BeforeEach
  void start() {
    t =
        TestServer.with()
            .dispatch("maxConcurrent: 3, pollInterval: 200ms")
            .routes(
                "routes: [{name: small, tags: {team: s}, maxConcurrent: 1},"
                    + " {name: wide, tags: {team: w}, maxConcurrent: 5}]")
            .launcher(launcher)
            .start();
  }

  @AfterEach
  void stop() {
    t.close();
  }

  private String reason(long id) {
    return t.api.get("/api/v1/builds/" + id).json().path("reason").asText();
  }

  private long submit(String team, String workspace) {
    String body =
        "{\"tags\": {\"team\": \""
            + team
            + "\"}, \"input\": {\"provisioner\": \"script\", \"command\": [\"true\"]}"
            + (workspace == null ? "" : ", \"workspace\": \"" + workspace + "\"")
            + "}";
    Api.Response r = t.api.post("/api/v1/builds", body);
    assertThat(r.status()).as(r.text()).isEqualTo(201);
    return r.json().path("id").asLong();
  }

  private static void awaitStatus(long id, String status) {
    await().atMost(10, TimeUnit.SECONDS).until(() -> status(id).equals(status));
  }

  @Test
  void aPendingBuildSaysWhyItWaits() {
    long s1 = submit("s", null);
    awaitStatus(s1, "launching");
    long s2 = submit("s", null);
    long s3 = submit("s", null);
    assertThat(reason(s2)).isEqualTo("route small is at its limit 1/1; this build is next");
    assertThat(reason(s3))
        .isEqualTo("route small is at its limit 1/1; 1 build ahead of this one on route small");

    long w1 = submit("w", "ws-1");
    awaitStatus(w1, "launching");
    long w2 = submit("w", "ws-1");
    assertThat(reason(w2))
        .isEqualTo(
            "workspace ws-1 is busy with build "
                + w1
                + " (launching); it runs when that one has ended");

    long w3 = submit("w", null);
    awaitStatus(w3, "launching");
    long w4 = submit("w", null);
    assertThat(reason(w4))
        .isEqualTo(
            "the global limit 3/3 is reached (dispatch.maxConcurrent); next to be claimed on"
                + " route wide");
    // The timeline keeps what happened; only the reason of a pending build is computed.
    assertThat(
            t.api.get("/api/v1/builds/" + w4).json().path("events").get(0).path("reason").asText())
        .isEqualTo("enqueued");
    assertThat(status(w2)).isEqualTo("pending");
  }

  /** The reason of the build's claim (its step to launching) in its timeline. */
  private String claimReason(long id) {
    for (JsonNode e : t.api.get("/api/v1/builds/" + id).json().path("events")) {
      if (e.path("from").asText().equals("pending") && e.path("to").asText().equals("launching")) {
        return e.path("reason").asText();
      }
    }
    throw new AssertionError("build " + id + " has no claim in its timeline");
  }

  /**
   * Once claimed, a build's timeline still says how long it was queued and, when it waited for its
   * workspace, behind which build: the reason it had while queued is computed, and gone.
   */
  @Test
  void theTimelineKeepsHowLongABuildWaitedAndBehindWhichBuild() {
    long w1 = submit("w", "ws-3");
    awaitStatus(w1, "launching");
    // A workspace of the same name on another route is another workspace.
    long s1 = submit("s", "ws-3");
    awaitStatus(s1, "launching");
    long w2 = submit("w", "ws-3");
    long s2 = submit("s", null);
    // Waits of two minutes, as a busy queue would have made them.
    Sql.exec(
        "UPDATE oneshot.build_events SET at = at - interval '2 minutes'"
            + " WHERE build_id IN (?, ?) AND to_status = 'pending'",
        w2,
        s2);
    // w2 is claimed once its route is released, after both w1 and s1 have ended.
    assertThat(t.api.post("/api/v1/routes/wide/hold", "{\"why\": \"a test\"}").status())
        .isEqualTo(200);
    assertThat(t.api.post("/api/v1/builds/" + w1 + "/cancel", "{}").status()).isEqualTo(202);
    awaitStatus(w1, "canceled");
    assertThat(t.api.post("/api/v1/builds/" + s1 + "/cancel", "{}").status()).isEqualTo(202);
    awaitStatus(s1, "canceled");
    assertThat(t.api.post("/api/v1/routes/wide/release", "{}").status()).isEqualTo(200);
    awaitStatus(w2, "launching");
    awaitStatus(s2, "launching");
    assertThat(claimReason(w2))
        .matches(
            "claimed by the dispatcher after 2m(\\d+s)? queued, behind build "
                + w1
                + " of workspace ws-3");
    assertThat(claimReason(s2)).matches("claimed by the dispatcher after 2m(\\d+s)? queued");
    assertThat(claimReason(w1)).doesNotContain("behind");
  }

  /**
   * A workspace without state yet is listed once it has an unfinished build: the build that holds
   * it and those waiting behind it, busy workspaces first; the CLI says the same.
   */
  @Test
  void theWorkspacesListSaysWhoHoldsEachAndWhoWaits() {
    long w1 = submit("w", "ws-4");
    awaitStatus(w1, "launching");
    long w2 = submit("w", "ws-4");
    long w3 = submit("w", "ws-4");
    Sql.exec(
        "INSERT INTO oneshot.workspace_states (route, workspace, version, build_id, attempt, state,"
            + " bytes, final) VALUES ('wide', 'idle', 1, ?, 9, '', 0, true)",
        w1);
    JsonNode list = t.api.get("/api/v1/workspaces").json().path("workspaces");
    assertThat(list).hasSize(2);
    JsonNode busy = list.get(0);
    assertThat(busy.path("workspace").asText()).isEqualTo("ws-4");
    assertThat(busy.path("route").asText()).isEqualTo("wide");
    assertThat(busy.path("heldBy").asLong()).isEqualTo(w1);
    assertThat(busy.path("heldByStatus").asText()).isEqualTo("launching");
    assertThat(busy.path("waiting").asLong()).isEqualTo(2);
    assertThat(busy.path("waitingBuilds").toString()).isEqualTo("[" + w2 + "," + w3 + "]");
    assertThat(busy.path("latest").isNull()).isTrue();
    assertThat(busy.path("versions").asLong()).isZero();
    JsonNode idle = list.get(1);
    assertThat(idle.path("workspace").asText()).isEqualTo("idle");
    assertThat(idle.path("heldBy").isNull()).isTrue();
    assertThat(idle.path("latest").asInt()).isEqualTo(1);

    java.io.StringWriter out = new java.io.StringWriter();
    int code =
        io.oneshot.cli.Main.commandLine(
                new java.io.PrintWriter(out, true),
                new java.io.PrintWriter(new java.io.StringWriter(), true))
            .execute(
                "workspaces", "list", "--url", t.api.base(), "--token", TestServer.ADMIN_TOKEN);
    assertThat(code).isZero();
    List<String> lines = out.toString().lines().toList();
    assertThat(lines.get(0).split("\\s{2,}"))
        .containsExactly(
            "WORKSPACE", "ROUTE", "LATEST", "VERSIONS", "CHANGED", "HELD BY", "WAITING");
    assertThat(lines.get(1))
        .startsWith("ws-4")
        .contains("build " + w1 + " (launching)")
        .endsWith(" 2");
  }

  /** Each listed build's reason by id, from one page of {@code GET /api/v1/builds?query}. */
  private Map<Long, String> listed(String query) {
    Map<Long, String> out = new HashMap<>();
    for (JsonNode b : t.api.get("/api/v1/builds?" + query).json().path("builds")) {
      out.put(b.path("id").asLong(), b.path("reason").asText());
    }
    return out;
  }

  @Test
  void aListSaysWhyEachOfItsPendingBuildsWaits() {
    long s1 = submit("s", null);
    awaitStatus(s1, "launching");
    long s2 = submit("s", null);
    long s3 = submit("s", "ws-2");
    long s4 = submit("s", "ws-2");

    Map<Long, String> page = listed("route=small");
    assertThat(page).containsOnlyKeys(s1, s2, s3, s4);
    // A build that no longer waits keeps the reason it was given.
    assertThat(page.get(s1)).doesNotContain("ahead", "limit", "next");
    assertThat(page.get(s2)).isEqualTo("route small is at its limit 1/1; this build is next");
    assertThat(page.get(s3))
        .isEqualTo("route small is at its limit 1/1; 1 build ahead of this one on route small");
    assertThat(page.get(s4))
        .isEqualTo(
            "workspace ws-2 is busy with build "
                + s3
                + " (pending); it runs when that one has ended");

    // Past a thousand ahead the count stops, so a page of a long queue reads as fast as a short
    // one.
    Sql.exec(
        "SELECT oneshot.enqueue('{\"team\": \"s\"}'::jsonb,"
            + " '{\"provisioner\": \"script\", \"command\": [\"true\"]}'::jsonb)"
            + " FROM generate_series(1, 1001)");
    assertThat(listed("route=small&status=pending&limit=1").values())
        .containsExactly(
            "route small is at its limit 1/1; more than 1000 builds ahead of this one on route"
                + " small");
  }
}
