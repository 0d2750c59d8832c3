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
