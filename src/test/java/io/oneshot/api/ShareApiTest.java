package io.oneshot.api;

import static io.oneshot.testing.TestServer.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.testing.Api;
import io.oneshot.testing.RecordingLauncher;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Fair share over the API: the teams with their shares, use and queues; holds and releases of
 * routes and teams, by whom they may be made, what a held build says, and the audit trail. Team
 * platform has routes p1 and p2 (weight 2, borrowLimit 1); route solo is a team of its own.
 */
class ShareApiTest {
  private TestServer t;
  private final RecordingLauncher launcher = new RecordingLauncher();

  @BeforeEach
  void start() {
    t =
        TestServer.with()
            // A poll far off: a release is heard at once, or the test times out.
            .dispatch("maxConcurrent: 6, pollInterval: 1h")
            .routes(
                """
                teams:
                  - {name: platform, weight: 2, borrowLimit: 1}
                routes:
                  - {name: p1, tags: {team: p1}, team: platform}
                  - {name: p2, tags: {team: p2}, team: platform}
                  - {name: solo, tags: {team: solo}}
                """)
            .launcher(launcher)
            .start();
  }

  @AfterEach
  void stop() {
    t.close();
  }

  private long submit(String route) {
    return t.api.submitScript("{\"team\": \"" + route + "\"}", "true");
  }

  private static void awaitStatus(long id, String status) {
    await().atMost(10, TimeUnit.SECONDS).until(() -> status(id).equals(status));
  }

  private JsonNode team(String name) {
    for (JsonNode n : t.api.get("/api/v1/teams").json()) {
      if (n.path("name").asText().equals(name)) {
        return n;
      }
    }
    throw new AssertionError("no team " + name);
  }

  @Test
  void theTeamsShowTheirSharesUseBorrowingAndQueues() {
    // platform's share of 6 is 4 (weight 2 of 3), and it may borrow 1: it runs 5 of its 7.
    List<Long> ids = new ArrayList<>();
    for (int i = 0; i < 7; i++) {
      ids.add(submit(i % 2 == 0 ? "p1" : "p2"));
    }
    await()
        .atMost(10, TimeUnit.SECONDS)
        .untilAsserted(() -> assertThat(launcher.launched).hasSize(5));
    JsonNode p = team("platform");
    assertThat(p.path("weight").asInt()).isEqualTo(2);
    assertThat(p.path("share").asDouble()).isEqualTo(4.0);
    assertThat(p.path("borrowLimit").asInt()).isEqualTo(1);
    assertThat(p.path("running").asLong()).isEqualTo(5);
    assertThat(p.path("borrowed").asLong()).isEqualTo(1);
    assertThat(p.path("queued").asLong()).isEqualTo(2);
    assertThat(p.path("routes")).extracting(JsonNode::asText).containsExactly("p1", "p2");
    assertThat(p.path("held").isNull()).isTrue();
    JsonNode solo = team("solo");
    assertThat(solo.path("share").asDouble()).isEqualTo(2.0);
    assertThat(solo.path("maxConcurrent").isNull()).isTrue();
    // The last two say why: all platform may borrow is taken.
    long last = ids.get(6);
    assertThat(t.api.get("/api/v1/builds/" + last).json().path("reason").asText())
        .startsWith(
            "team platform runs 5: its share 4 of the global limit 6 and all it may borrow past"
                + " it (borrowLimit 1); ");
    // The leader's gauges say the same, per team.
    io.oneshot.testing.PromText m = io.oneshot.testing.PromText.parse(t.api.get("/metrics").text());
    assertThat(m.value("oneshot_team_share", "team", "platform")).isEqualTo(4.0);
    assertThat(m.value("oneshot_team_running", "team", "platform")).isEqualTo(5.0);
    assertThat(m.value("oneshot_team_borrowed", "team", "platform")).isEqualTo(1.0);
    assertThat(m.value("oneshot_team_queued", "team", "platform")).isEqualTo(2.0);
    assertThat(m.value("oneshot_team_share", "team", "solo")).isEqualTo(2.0);
    assertThat(m.value("oneshot_team_held", "team", "solo")).isEqualTo(0.0);
    // The routes say their team.
    assertThat(t.api.get("/api/v1/routes").json())
        .extracting(r -> r.path("team").asText())
        .containsExactly("platform", "platform", "solo");
  }

  @Test
  void aHeldRouteKeepsItsBuildsQueuedAndSaysWhyUntilReleased() {
    Api.Response held = t.api.post("/api/v1/routes/solo/hold", "{\"why\": \"state migration\"}");
    assertThat(held.status()).as(held.text()).isEqualTo(200);
    assertThat(held.json().path("held").path("by").asText()).isEqualTo("admin");
    long id = submit("solo");
    long other = submit("p1");
    awaitStatus(other, "launching");
    assertThat(status(id)).isEqualTo("pending");
    assertThat(t.api.get("/api/v1/builds/" + id).json().path("reason").asText())
        .matches(
            "route solo is held by admin since \\S+Z: state migration; it waits until the route"
                + " is released \\(oneshot routes release solo\\)");
    JsonNode route = t.api.get("/api/v1/routes").json().get(2);
    assertThat(route.path("held").path("why").asText()).isEqualTo("state migration");
    assertThat(
            io.oneshot.testing.PromText.parse(t.api.get("/metrics").text())
                .value("oneshot_route_held", "route", "solo"))
        .isEqualTo(1.0);

    Api.Response released = t.api.post("/api/v1/routes/solo/release", "");
    assertThat(released.status()).as(released.text()).isEqualTo(200);
    assertThat(released.json().path("was").path("why").asText()).isEqualTo("state migration");
    // The poll is an hour away: the release itself wakes the dispatcher.
    awaitStatus(id, "launching");
    assertThat(t.api.get("/api/v1/routes").json().get(2).path("held").isNull()).isTrue();
    // Released again: it was not held, and says so.
    assertThat(t.api.post("/api/v1/routes/solo/release", "").json().path("was").isNull()).isTrue();
  }

  @Test
  void aHeldTeamHoldsEveryRouteInIt() {
    assertThat(t.api.post("/api/v1/teams/platform/hold", "{\"why\": \"upgrade\"}").status())
        .isEqualTo(200);
    long a = submit("p1");
    long b = submit("p2");
    long s = submit("solo");
    awaitStatus(s, "launching");
    assertThat(List.of(status(a), status(b))).containsOnly("pending");
    assertThat(t.api.get("/api/v1/builds/" + b).json().path("reason").asText())
        .contains("team platform is held by admin since ")
        .endsWith(
            ": upgrade; it waits until the team is released (oneshot routes release platform --team)");
    assertThat(team("platform").path("held").path("why").asText()).isEqualTo("upgrade");
    assertThat(t.api.post("/api/v1/teams/platform/release", "").status()).isEqualTo(200);
    awaitStatus(a, "launching");
    awaitStatus(b, "launching");
  }

  @Test
  void holdsNeedAnOperatorCoveringEveryRouteOfWhatIsHeldAndAreAudited() {
    Api p1Operator = token("p1-ops", "operator", "\"routes\": [\"p1\"]");
    Api platformOperator = token("platform-ops", "operator", "\"routes\": [\"p1\", \"p2\"]");
    Api viewer = token("watcher", "viewer", "\"routes\": [\"*\"]");

    assertThat(p1Operator.post("/api/v1/routes/p1/hold", "{\"why\": \"mine\"}").status())
        .isEqualTo(200);
    // Another route is none of its business: answered as one that does not exist.
    assertThat(p1Operator.post("/api/v1/routes/solo/hold", "{\"why\": \"x\"}").status())
        .isEqualTo(404);
    // A team it covers only part of is refused, saying so.
    Api.Response part = p1Operator.post("/api/v1/teams/platform/hold", "{\"why\": \"x\"}");
    assertThat(part.status()).isEqualTo(403);
    assertThat(part.json().path("error").asText())
        .isEqualTo(
            "forbidden: holding team platform needs every route of team platform; token p1-ops"
                + " covers 1 of its 2");
    assertThat(platformOperator.post("/api/v1/teams/platform/hold", "{\"why\": \"ok\"}").status())
        .isEqualTo(200);
    Api.Response looking = viewer.post("/api/v1/teams/platform/release", "");
    assertThat(looking.status()).isEqualTo(403);
    assertThat(team("platform").path("held").path("by").asText()).isEqualTo("platform-ops");
    // A token sees the teams of its routes, and those routes alone.
    assertThat(p1Operator.get("/api/v1/teams").json())
        .singleElement()
        .satisfies(
            n -> assertThat(n.path("routes")).extracting(JsonNode::asText).containsExactly("p1"));
    // Unknown to the admin: 404, nothing written.
    assertThat(t.api.post("/api/v1/routes/nope/hold", "{\"why\": \"x\"}").status()).isEqualTo(404);
    assertThat(t.api.post("/api/v1/teams/nope/release", "").status()).isEqualTo(404);

    List<String> audit = new ArrayList<>();
    for (JsonNode e : t.api.get("/api/v1/audit").json().path("entries")) {
      audit.add(
          e.path("actor").asText()
              + " "
              + e.path("action").asText()
              + " "
              + e.path("outcome").asText());
    }
    assertThat(audit)
        .contains(
            "p1-ops hold-route ok",
            "p1-ops hold-route out_of_scope",
            "p1-ops hold-team role",
            "platform-ops hold-team ok",
            "watcher release-team role");
    assertThat(
            Sql.value(
                "SELECT detail->>'why' FROM oneshot.audit WHERE actor = 'platform-ops'"
                    + " AND action = 'hold-team'"))
        .isEqualTo("ok");
  }

  private Api token(String name, String role, String scope) {
    Api.Response r =
        t.api.post(
            "/api/v1/tokens",
            "{\"name\": \"" + name + "\", \"role\": \"" + role + "\", " + scope + "}");
    assertThat(r.status()).as(r.text()).isEqualTo(201);
    return new Api(t.api.base(), r.json().path("token").asText());
  }
}
