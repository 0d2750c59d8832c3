package io.oneshot.api;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.launch.Attempt;
import io.oneshot.testing.Api;
import io.oneshot.testing.PromText;
import io.oneshot.testing.RecordingLauncher;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Scoped API tokens: for every admin endpoint and role, what is allowed, what is refused (403) and
 * what is outside the token's routes (404, as if it did not exist); revoked, expired and unknown
 * tokens; and the audit trail of it all. Two teams share one server: routes {@code a} (tag {@code
 * team=a}) and {@code b} (tag {@code team=b}).
 */
class AccessTest {
  private TestServer t;
  private final RecordingLauncher launcher = new RecordingLauncher();

  /** Admin-submitted builds: a pending script on each route, a finished one on a. */
  private long onA;

  private long onB;
  private long finishedOnA;

  @BeforeEach
  void start() {
    t =
        TestServer.with()
            .routes(
                """
                routes:
                  - {name: a, tags: {team: a}, maxConcurrent: 0}
                  - {name: b, tags: {team: b}, maxConcurrent: 0}
                  - {name: tf-a, tags: {team: a, kind: tf}}
                  - {name: tf-b, tags: {team: b, kind: tf}}
                encryption:
                  keys: [{id: k1, secret: "0123456789abcdef0123456789abcdef"}]
                """)
            .launcher(launcher)
            .start();
    onA = t.api.submitScript("{\"team\": \"a\"}", "echo a");
    onB = t.api.submitScript("{\"team\": \"b\"}", "echo b");
    finishedOnA = t.api.submitScript("{\"team\": \"a\"}", "echo done");
    assertThat(t.api.post("/api/v1/builds/" + finishedOnA + "/cancel", "{}").status())
        .isEqualTo(202);
  }

  @AfterEach
  void stop() {
    t.close();
  }

  /** The secret of the token {@link #token} made last. */
  private String lastSecret;

  /** A new token's client; {@code scope} is the create body's routes or routeTags part. */
  private Api token(String name, String role, String scope) {
    Api.Response r =
        t.api.post(
            "/api/v1/tokens",
            "{\"name\": \"" + name + "\", \"role\": \"" + role + "\", " + scope + "}");
    assertThat(r.status()).as(r.text()).isEqualTo(201);
    lastSecret = r.json().path("token").asText();
    return new Api(t.api.base(), lastSecret);
  }

  private static String script(String team) {
    return "{\"tags\": {\"team\": \""
        + team
        + "\"}, \"input\": {\"provisioner\": \"script\", \"command\": [\"true\"]}}";
  }

  private static List<Long> ids(Api.Response list) {
    List<Long> out = new ArrayList<>();
    list.json().path("builds").forEach(b -> out.add(b.path("id").asLong()));
    return out;
  }

  /** A terraform build of {@code route}'s team on workspace {@code ws}, run to a stored state. */
  private long stateOn(String team, String ws) {
    Api.Response r =
        t.api.post(
            "/api/v1/builds",
            "{\"tags\": {\"team\": \""
                + team
                + "\", \"kind\": \"tf\"}, \"workspace\": \""
                + ws
                + "\", \"input\": {\"provisioner\": \"terraform\", \"files\": {\"main.tf\": \"\"}}}");
    assertThat(r.status()).as(r.text()).isEqualTo(201);
    long id = r.json().path("id").asLong();
    Attempt a = launcher.awaitLaunched(id, 1);
    new Api(t.api.base(), null)
        .acquireAndComplete(
            a.token().value(),
            "{\"version\": 4, \"serial\": 1, \"lineage\": \"L\", \"outputs\": {\"ws\": \""
                + ws
                + "\"}}");
    return id;
  }

  @Test
  void theConsolesReadsFollowTheTokensScope() {
    long tfA = stateOn("a", "ws-a");
    stateOn("b", "ws-b");
    Api viewer = token("console-viewer", "viewer", "\"routes\": [\"a\", \"tf-a\"]");
    JsonNode me = viewer.get("/api/v1/whoami").json();
    assertThat(me.path("role").asText()).isEqualTo("viewer");
    assertThat(me.path("routes").toString()).isEqualTo("[\"a\",\"tf-a\"]");
    assertThat(me.path("may").path("cancel").asText()).isEqualTo("no");
    JsonNode admin = t.api.get("/api/v1/whoami").json();
    assertThat(admin.path("role").asText()).isEqualTo("admin");
    assertThat(admin.path("may").path("cancel").asText()).isEqualTo("any");

    // The queue's history: the viewer's routes only; now, route a holds its one queued build.
    JsonNode history = viewer.get("/api/v1/overview").json().path("history");
    List<String> routes = new ArrayList<>();
    history.forEach(p -> routes.add(p.path("route").asText()));
    assertThat(routes).isNotEmpty().allMatch(r -> r.equals("a") || r.equals("tf-a"));
    JsonNode nowOnA = null;
    for (JsonNode p : history) {
      if (p.path("route").asText().equals("a")) {
        nowOnA = p;
      }
    }
    assertThat(nowOnA.path("queued").asLong()).isEqualTo(1);
    assertThat(t.api.get("/api/v1/overview").json().path("globalLimit").asInt()).isPositive();

    // Workspaces: a viewer of team a's routes sees team a's alone.
    assertThat(viewer.get("/api/v1/workspaces").json().path("workspaces").toString())
        .contains("ws-a")
        .doesNotContain("ws-b");
    assertThat(t.api.get("/api/v1/workspaces").json().path("workspaces").toString())
        .contains("ws-a", "ws-b");

    // The list's filters: tags, workspace, age; a bad one is a 400 naming it.
    assertThat(ids(t.api.get("/api/v1/builds?tag=team=a&route=a")))
        .containsExactlyInAnyOrder(onA, finishedOnA);
    assertThat(ids(t.api.get("/api/v1/builds?workspace=ws-a"))).containsExactly(tfA);
    assertThat(ids(t.api.get("/api/v1/builds?since=2999-01-01T00:00:00Z"))).isEmpty();
    assertThat(ids(t.api.get("/api/v1/builds?since=2000-01-01T00:00:00Z"))).contains(onA, onB);
    assertThat(ids(viewer.get("/api/v1/builds?tag=team=b"))).isEmpty();
    Api.Response bad = t.api.get("/api/v1/builds?tag=team");
    assertThat(bad.status()).isEqualTo(400);
    assertThat(bad.text()).contains("tag");
    assertThat(t.api.get("/api/v1/builds?since=yesterday").status()).isEqualTo(400);
    assertThat(new Api(t.api.base(), null).get("/api/v1/whoami").status()).isEqualTo(401);
  }

  @Test
  void aViewerReadsItsRoutesAndNothingElse() {
    Api viewer = token("viewer-a", "viewer", "\"routes\": [\"a\"]");

    assertThat(ids(viewer.get("/api/v1/builds"))).containsExactlyInAnyOrder(onA, finishedOnA);
    assertThat(viewer.get("/api/v1/builds/" + onA).status()).isEqualTo(200);
    assertThat(viewer.get("/api/v1/builds/" + onA + "/logs").status()).isEqualTo(200);
    assertThat(viewer.get("/api/v1/builds/" + onA + "/input").status()).isEqualTo(200);
    List<String> routes = new ArrayList<>();
    viewer.get("/api/v1/routes").json().forEach(r -> routes.add(r.path("name").asText()));
    assertThat(routes).containsExactly("a");

    // Another team's build is not there at all, on every endpoint that names a build.
    for (String path :
        List.of(
            "/api/v1/builds/" + onB,
            "/api/v1/builds/" + onB + "/logs",
            "/api/v1/builds/" + onB + "/logs?follow=true",
            "/api/v1/builds/" + onB + "/input")) {
      Api.Response r = viewer.get(path);
      assertThat(r.status()).as(path).isEqualTo(404);
      assertThat(r.text()).as(path).doesNotContain("\"b\"");
    }
    // What it may not do is refused for its role, and writes nothing.
    long before = Sql.count("SELECT count(*) FROM oneshot.builds");
    assertThat(viewer.post("/api/v1/builds", script("a")).status()).isEqualTo(403);
    assertThat(viewer.post("/api/v1/builds/" + onA + "/cancel", "{}").status()).isEqualTo(403);
    assertThat(viewer.post("/api/v1/builds/" + finishedOnA + "/rerun", "{}").status())
        .isEqualTo(403);
    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds")).isEqualTo(before);
    assertThat(TestServer.status(onA)).isEqualTo("pending");
  }

  @Test
  void aSubmitterSubmitsToItsRoutesAndChangesItsOwnBuildsOnly() {
    Api submitter = token("ci-a", "submitter", "\"routes\": [\"a\"]");

    Api.Response made = submitter.post("/api/v1/builds", script("a"));
    assertThat(made.status()).isEqualTo(201);
    long mine = made.json().path("id").asLong();
    assertThat(t.api.get("/api/v1/builds/" + mine).json().path("submittedBy").asText())
        .isEqualTo("ci-a");

    // Tags that route outside its routes: refused without naming the route, nothing written.
    long before = Sql.count("SELECT count(*) FROM oneshot.builds");
    Api.Response other = submitter.post("/api/v1/builds", script("b"));
    assertThat(other.status()).isEqualTo(403);
    assertThat(other.text()).doesNotContain("\"b\"");
    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds")).isEqualTo(before);

    // Its own build: cancel and rerun. The admin's build on its route: refused for its role.
    assertThat(submitter.post("/api/v1/builds/" + onA + "/cancel", "{}").status()).isEqualTo(403);
    assertThat(TestServer.status(onA)).isEqualTo("pending");
    assertThat(submitter.post("/api/v1/builds/" + finishedOnA + "/rerun", "{}").status())
        .isEqualTo(403);
    assertThat(submitter.post("/api/v1/builds/" + mine + "/cancel", "{}").status()).isEqualTo(202);
    assertThat(TestServer.status(mine)).isEqualTo("canceled");
    Api.Response rerun = submitter.post("/api/v1/builds/" + mine + "/rerun", "{}");
    assertThat(rerun.status()).isEqualTo(201);
    assertThat(
            t.api
                .get("/api/v1/builds/" + rerun.json().path("id").asLong())
                .json()
                .path("submittedBy")
                .asText())
        .isEqualTo("ci-a");

    // Another team's build is not there.
    assertThat(submitter.post("/api/v1/builds/" + onB + "/cancel", "{}").status()).isEqualTo(404);
    assertThat(TestServer.status(onB)).isEqualTo("pending");
    // State needs the operator role. Its history needs the routes of its builds only, and this
    // workspace's builds ran on tf-a.
    stateOn("a", "wa");
    assertThat(submitter.get("/api/v1/workspaces/state?workspace=wa").status()).isEqualTo(403);
    assertThat(submitter.get("/api/v1/workspaces/states?workspace=wa").status()).isEqualTo(404);
  }

  @Test
  void anOperatorChangesEveryBuildOfItsRoutesAndReadsTheirState() {
    long tfA = stateOn("a", "wa");
    stateOn("b", "wb");
    Api operator = token("ops-a", "operator", "\"routes\": [\"a\", \"tf-a\"]");

    assertThat(operator.post("/api/v1/builds/" + onA + "/cancel", "{}").status()).isEqualTo(202);
    assertThat(TestServer.status(onA)).isEqualTo("canceled");
    assertThat(operator.post("/api/v1/builds/" + finishedOnA + "/rerun", "{}").status())
        .isEqualTo(201);
    assertThat(operator.post("/api/v1/builds/" + onB + "/cancel", "{}").status()).isEqualTo(404);
    assertThat(operator.post("/api/v1/builds/" + onB + "/rerun", "{}").status()).isEqualTo(404);
    assertThat(TestServer.status(onB)).isEqualTo("pending");

    assertThat(operator.get("/api/v1/workspaces/state?workspace=wa").text()).contains("\"wa\"");
    assertThat(operator.get("/api/v1/workspaces/states?workspace=wa").json().path("versions"))
        .hasSize(1);
    Api.Response theirs = operator.get("/api/v1/workspaces/state?workspace=wb");
    assertThat(theirs.status()).isEqualTo(404);
    assertThat(theirs.text()).doesNotContain("\"wb\"}");
    assertThat(operator.get("/api/v1/workspaces/states?workspace=wb").status()).isEqualTo(404);
    // A workspace nobody used is just as absent.
    assertThat(operator.get("/api/v1/workspaces/state?workspace=nobody").status()).isEqualTo(404);
    assertThat(tfA).isPositive();
  }

  /**
   * A submit no route takes is told what routes there are: a scoped token hears of its own, never
   * of another team's; the admin token hears of every route.
   */
  @Test
  void theNoRouteHintNamesOnlyTheTokensRoutes() {
    Api submitter = token("ci-a", "submitter", "\"routeTags\": {\"team\": \"a\"}");
    Api.Response r = submitter.post("/api/v1/builds", script("z"));
    assertThat(r.status()).as(r.text()).isEqualTo(400);
    assertThat(r.json().path("field").asText()).isEqualTo("tags");
    assertThat(r.json().path("detail").asText())
        .isEqualTo(
            "a route matches when its tags contain all of the build's tags; the routes of token"
                + " ci-a: a {\"team\":\"a\"}, tf-a {\"kind\":\"tf\",\"team\":\"a\"}")
        .doesNotContain("tf-b");
    Api.Response untagged =
        submitter.post(
            "/api/v1/builds",
            "{\"input\": {\"provisioner\": \"script\", \"command\": [\"true\"]}}");
    assertThat(untagged.status()).as(untagged.text()).isEqualTo(400);
    assertThat(untagged.json().path("detail").asText()).contains("ci-a: a ").doesNotContain("b ");
    assertThat(t.api.post("/api/v1/builds", script("z")).json().path("detail").asText())
        .contains("tf-b");
  }

  /**
   * Team b's {@code shared} and team a's {@code shared} are two workspaces (issue: team A's {@code
   * prod} locked team B out of its own): neither waits for, reads nor locks the other's, and each
   * team reads its own versions under the name; only the admin token, which sees both, is asked
   * which it means.
   */
  @Test
  void aWorkspaceNameIsEachRoutesOwn() {
    long theirs = stateOn("b", "shared");
    // Team b's next build of "shared" is live (claimed, never acquired) while team a starts.
    long theirsLive =
        t.api.post("/api/v1/builds", terraform("b", "shared")).json().path("id").asLong();
    launcher.awaitLaunched(theirsLive, 1);

    Api submitter = token("ci-a", "submitter", "\"routeTags\": {\"team\": \"a\"}");
    Api.Response made = submitter.post("/api/v1/builds", terraform("a", "shared"));
    assertThat(made.status()).as(made.text()).isEqualTo(201);
    assertThat(made.json().path("route").asText()).isEqualTo("tf-a");
    long mine = made.json().path("id").asLong();
    // Claimed at once though team b's build of the name is live, and handed no state of team b's.
    Attempt a = launcher.awaitLaunched(mine, 1);
    JsonNode acquired =
        new Api(t.api.base(), null)
            .acquireAndComplete(
                a.token().value(), "{\"version\": 4, \"serial\": 1, \"lineage\": \"A\"}");
    assertThat(acquired.path("stateVersion").asInt()).isZero();
    assertThat(acquired.path("state").isNull()).as(acquired.toString()).isTrue();
    assertThat(TestServer.status(mine)).isEqualTo("succeeded");
    assertThat(TestServer.status(theirsLive)).isEqualTo("launching");

    // Each team reads its own versions under the name, as version 1 of its own workspace.
    Api operator = token("ops-a", "operator", "\"routes\": [\"a\", \"tf-a\"]");
    JsonNode ours = operator.get("/api/v1/workspaces/states?workspace=shared").json();
    assertThat(ours.path("route").asText()).isEqualTo("tf-a");
    assertThat(ours.path("versions").findValuesAsText("buildId")).containsExactly("" + mine);
    assertThat(ours.path("versions").get(0).path("version").asInt()).isEqualTo(1);
    assertThat(operator.get("/api/v1/workspaces/state?workspace=shared").text()).contains("\"A\"");
    // Team b's is not there for team a, by name and route or by name alone.
    Api.Response other = operator.get("/api/v1/workspaces/state?workspace=shared&route=tf-b");
    assertThat(other.status()).isEqualTo(404);
    assertThat(operator.get("/api/v1/workspaces/states?workspace=shared&route=tf-b").status())
        .isEqualTo(404);
    assertThat(
            operator.get("/api/v1/workspaces").json().path("workspaces").findValuesAsText("route"))
        .containsOnly("tf-a");
    // The admin token sees both, and is asked which it means.
    Api.Response which = t.api.get("/api/v1/workspaces/state?workspace=shared");
    assertThat(which.status()).isEqualTo(400);
    assertThat(which.json().path("field").asText()).isEqualTo("route");
    assertThat(which.json().path("error").asText())
        .isEqualTo("route: workspace shared is on routes tf-a, tf-b; say which");
    JsonNode b = t.api.get("/api/v1/workspaces/states?workspace=shared&route=tf-b").json();
    assertThat(b.path("versions").findValuesAsText("buildId")).containsExactly("" + theirs);
    assertThat(t.api.get("/api/v1/workspaces/state?workspace=shared&route=tf-b").text())
        .contains("\"L\"");
  }

  private static String terraform(String team, String ws) {
    return "{\"tags\": {\"team\": \""
        + team
        + "\", \"kind\": \"tf\"}, \"workspace\": \""
        + ws
        + "\", \"input\": {\"provisioner\": \"terraform\", \"files\": {\"main.tf\": \"\"}}}";
  }

  @Test
  void tokensCoverRoutesByNameByTagOrAll() {
    JsonNode byTag =
        t.api
            .post(
                "/api/v1/tokens",
                "{\"name\": \"by-tag\", \"role\": \"viewer\", \"routeTags\": {\"team\": \"b\"}}")
            .json();
    assertThat(byTag.path("covers").toString()).isEqualTo("[\"b\",\"tf-b\"]");
    Api all = token("all", "viewer", "\"routes\": [\"*\"]");
    assertThat(ids(all.get("/api/v1/builds"))).contains(onA, onB);
    Api tagged = new Api(t.api.base(), byTag.path("token").asText());
    assertThat(ids(tagged.get("/api/v1/builds"))).containsExactly(onB);
  }

  @Test
  void revokedExpiredAndUnknownTokensAreRefused() {
    Api revoked = token("gone", "operator", "\"routes\": [\"*\"]");
    Api expired = token("old", "operator", "\"routes\": [\"*\"]");
    assertThat(revoked.get("/api/v1/builds").status()).isEqualTo(200);
    assertThat(t.api.post("/api/v1/tokens/gone/revoke", "{}").json().path("already").asBoolean())
        .isFalse();
    assertThat(t.api.post("/api/v1/tokens/gone/revoke", "{}").json().path("already").asBoolean())
        .isTrue();
    Sql.exec(
        "UPDATE oneshot.api_tokens SET expires_at = now() - interval '1 second' WHERE name = 'old'");

    for (Api refused :
        List.of(
            revoked,
            expired,
            new Api(t.api.base(), "oneshot_not-a-token"),
            new Api(t.api.base(), "something-else"),
            new Api(t.api.base(), null))) {
      for (String path : List.of("/api/v1/builds", "/api/v1/builds/" + onA, "/api/v1/routes")) {
        assertThat(refused.get(path).status()).as(path).isEqualTo(401);
      }
      assertThat(refused.post("/api/v1/builds/" + onA + "/cancel", "{}").status()).isEqualTo(401);
    }
    PromText metrics = PromText.parse(t.api.get("/metrics").text());
    assertThat(metrics.value("oneshot_api_refused_total", "reason", "revoked_token"))
        .isEqualTo(4.0);
    assertThat(metrics.value("oneshot_api_refused_total", "reason", "expired_token"))
        .isEqualTo(4.0);
    assertThat(metrics.value("oneshot_api_refused_total", "reason", "bad_token")).isEqualTo(8.0);
    assertThat(metrics.value("oneshot_api_refused_total", "reason", "no_token")).isEqualTo(4.0);
    assertThat(revoked.get("/api/v1/builds").json().path("detail").asText()).contains("revoked");
    assertThat(expired.get("/api/v1/builds").json().path("detail").asText()).contains("expired");
    assertThat(TestServer.status(onA)).isEqualTo("pending");
    assertThat(t.api.post("/api/v1/tokens/never/revoke", "{}").status()).isEqualTo(404);
  }

  @Test
  void onlyTheAdminTokenManagesTokensAndReadsTheAudit() {
    Api operator = token("ops", "operator", "\"routes\": [\"*\"]");
    assertThat(
            operator
                .post(
                    "/api/v1/tokens",
                    "{\"name\": \"mine\", \"role\": \"operator\", \"routes\": [\"*\"]}")
                .status())
        .isEqualTo(403);
    assertThat(operator.get("/api/v1/tokens").status()).isEqualTo(403);
    assertThat(operator.post("/api/v1/tokens/ops/revoke", "{}").status()).isEqualTo(403);
    assertThat(operator.get("/api/v1/audit").status()).isEqualTo(403);
    assertThat(operator.get("/api/v1/builds").status()).isEqualTo(200);

    // The list never shows a token, and the database holds only its hash.
    JsonNode listed = t.api.get("/api/v1/tokens").json().path("tokens");
    assertThat(listed).hasSize(1);
    assertThat(listed.get(0).has("token")).isFalse();
    assertThat(listed.get(0).path("lastUsedAt").isNull()).isFalse();
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.api_tokens t WHERE strpos(t::text, ?) > 0",
                lastSecret))
        .isZero();
    assertThat(Sql.count("SELECT count(*) FROM oneshot.api_tokens")).isEqualTo(1);
  }

  @Test
  void aBadTokenRequestIsRefusedNamingTheFieldAndWritesNothing() {
    record Bad(String body, String field) {}
    for (Bad b :
        List.of(
            new Bad("{\"name\": \"x\", \"role\": \"root\", \"routes\": [\"a\"]}", "role"),
            new Bad("{\"name\": \"x\", \"role\": \"viewer\"}", "routes"),
            new Bad("{\"name\": \"X Y\", \"role\": \"viewer\", \"routes\": [\"a\"]}", "name"),
            new Bad(
                "{\"name\": \"x\", \"role\": \"viewer\", \"routes\": [\"a\"], \"expiresIn\":"
                    + " \"soon\"}",
                "expiresIn"),
            new Bad(
                "{\"name\": \"x\", \"role\": \"viewer\", \"routes\": [\"a\"], \"expiresAt\":"
                    + " \"2001-01-01T00:00:00Z\"}",
                "expiresAt"),
            new Bad("{\"name\": \"x\", \"role\": \"viewer\", \"routes\": \"a\"}", "routes"),
            new Bad("{\"name\": \"x\", \"role\": \"viewer\", \"scope\": 1}", "scope"))) {
      Api.Response r = t.api.post("/api/v1/tokens", b.body());
      assertThat(r.status()).as(b.body()).isEqualTo(400);
      assertThat(r.json().path("field").asText()).as(b.body()).isEqualTo(b.field());
    }
    assertThat(Sql.count("SELECT count(*) FROM oneshot.api_tokens")).isZero();
    token("x", "viewer", "\"routes\": [\"a\"]");
    Api.Response again =
        t.api.post(
            "/api/v1/tokens", "{\"name\": \"x\", \"role\": \"viewer\", \"routes\": [\"a\"]}");
    assertThat(again.status()).isEqualTo(409);
    assertThat(Sql.count("SELECT count(*) FROM oneshot.api_tokens")).isEqualTo(1);
  }

  @Test
  void theAuditTrailRecordsEachActionAndEachRefusal() {
    stateOn("a", "wa");
    Api submitter = token("ci-a", "submitter", "\"routes\": [\"a\"]");
    Api operator = token("ops-a", "operator", "\"routes\": [\"a\", \"tf-a\"]");
    long mine = submitter.post("/api/v1/builds", script("a")).json().path("id").asLong();
    submitter.post("/api/v1/builds/" + mine + "/cancel", "{}");
    submitter.post("/api/v1/builds", script("b"));
    submitter.post("/api/v1/builds/" + onA + "/cancel", "{}");
    operator.post("/api/v1/builds/" + onB + "/cancel", "{}");
    operator.get("/api/v1/workspaces/state?workspace=wa&version=1");
    operator.post("/api/v1/builds/" + finishedOnA + "/rerun", "{}");
    t.api.post("/api/v1/tokens/ci-a/revoke", "{}");

    List<String> trail = new ArrayList<>();
    for (JsonNode e : t.api.get("/api/v1/audit?limit=100").json().path("entries")) {
      trail.add(
          0,
          e.path("actor").asText()
              + " "
              + e.path("action").asText()
              + " "
              + e.path("outcome").asText()
              + (e.path("buildId").isNull() ? "" : " " + e.path("buildId").asLong())
              + (e.path("workspace").isNull() ? "" : " " + e.path("workspace").asText()));
    }
    assertThat(trail)
        .containsSubsequence(
            "admin token-create ok",
            "admin token-create ok",
            "ci-a submit ok " + mine,
            "ci-a cancel ok " + mine,
            "ci-a submit out_of_scope",
            "ci-a cancel role " + onA,
            "ops-a cancel out_of_scope " + onB,
            "ops-a state-read ok wa",
            "admin token-revoke ok");
    assertThat(trail.stream().filter(s -> s.startsWith("ops-a rerun ok ")).count()).isEqualTo(1);
    assertThat(t.api.get("/api/v1/audit?outcome=refused").json().path("entries")).hasSize(3);
    assertThat(t.api.get("/api/v1/audit?actor=ops-a&action=state-read").json().path("entries"))
        .hasSize(1);

    // Append-only, even for the database's owner.
    for (String change :
        List.of("UPDATE oneshot.audit SET actor = 'x'", "DELETE FROM oneshot.audit")) {
      try {
        Sql.exec(change);
        throw new AssertionError(change + " was allowed");
      } catch (RuntimeException e) {
        assertThat(e).hasStackTraceContaining("append-only");
      }
    }
  }

  @Test
  void everyAdminEndpointAnswersEachRoleAsItsRoleAndRoutesSay() {
    stateOn("a", "wa");
    stateOn("b", "wb");
    record Call(String method, String path, String body, int viewer, int submitter, int operator) {}
    for (String role : List.of("viewer", "submitter", "operator")) {
      Api api = token("t-" + role, role, "\"routes\": [\"a\", \"tf-a\"]");
      // Builds of the admin's to cancel, one per role, so that each role meets a live one.
      long liveA = t.api.submitScript("{\"team\": \"a\"}", "true");
      long liveB = t.api.submitScript("{\"team\": \"b\"}", "true");
      List<Call> calls =
          List.of(
              new Call("GET", "/api/v1/builds", null, 200, 200, 200),
              new Call("GET", "/api/v1/builds/" + onA, null, 200, 200, 200),
              new Call("GET", "/api/v1/builds/" + onB, null, 404, 404, 404),
              new Call("GET", "/api/v1/builds/" + onA + "/logs", null, 200, 200, 200),
              new Call("GET", "/api/v1/builds/" + onB + "/logs", null, 404, 404, 404),
              new Call("GET", "/api/v1/builds/" + onA + "/input", null, 200, 200, 200),
              new Call("GET", "/api/v1/builds/" + onB + "/input", null, 404, 404, 404),
              new Call("POST", "/api/v1/builds", script("a"), 403, 201, 201),
              new Call("POST", "/api/v1/builds", script("b"), 403, 403, 403),
              new Call("POST", "/api/v1/builds/" + liveA + "/cancel", "{}", 403, 403, 202),
              new Call("POST", "/api/v1/builds/" + liveB + "/cancel", "{}", 404, 404, 404),
              new Call("POST", "/api/v1/builds/" + finishedOnA + "/rerun", "{}", 403, 403, 201),
              new Call("POST", "/api/v1/builds/" + onB + "/rerun", "{}", 404, 404, 404),
              new Call("GET", "/api/v1/routes", null, 200, 200, 200),
              new Call("GET", "/api/v1/sources", null, 200, 200, 200),
              new Call("GET", "/api/v1/teams", null, 200, 200, 200),
              new Call("POST", "/api/v1/routes/a/hold", "{\"why\": \"x\"}", 403, 403, 200),
              new Call("POST", "/api/v1/routes/a/release", "{}", 403, 403, 200),
              new Call("POST", "/api/v1/routes/b/hold", "{\"why\": \"x\"}", 404, 404, 404),
              new Call("POST", "/api/v1/routes/b/release", "{}", 404, 404, 404),
              new Call("POST", "/api/v1/teams/a/hold", "{\"why\": \"x\"}", 403, 403, 200),
              new Call("POST", "/api/v1/teams/a/release", "{}", 403, 403, 200),
              new Call("POST", "/api/v1/teams/b/hold", "{\"why\": \"x\"}", 404, 404, 404),
              new Call("GET", "/api/v1/workspaces/states?workspace=wa", null, 200, 200, 200),
              new Call("GET", "/api/v1/workspaces/states?workspace=wb", null, 404, 404, 404),
              new Call("GET", "/api/v1/workspaces/state?workspace=wa", null, 403, 403, 200),
              new Call("GET", "/api/v1/workspaces/state?workspace=wb", null, 403, 403, 404),
              new Call("GET", "/api/v1/tokens", null, 403, 403, 403),
              new Call(
                  "POST",
                  "/api/v1/tokens",
                  "{\"name\": \"more\", \"role\": \"viewer\", \"routes\": [\"*\"]}",
                  403,
                  403,
                  403),
              new Call("POST", "/api/v1/tokens/t-" + role + "/revoke", "{}", 403, 403, 403),
              new Call("GET", "/api/v1/audit", null, 403, 403, 403));
      for (Call c : calls) {
        Api.Response r =
            c.method().equals("GET") ? api.get(c.path()) : api.post(c.path(), c.body());
        int expected =
            switch (role) {
              case "viewer" -> c.viewer();
              case "submitter" -> c.submitter();
              default -> c.operator();
            };
        assertThat(r.status())
            .as("%s: %s %s %s", role, c.method(), c.path(), r.text())
            .isEqualTo(expected);
      }
      assertThat(TestServer.status(liveB)).isEqualTo("pending");
    }
    // The admin token does all of it.
    assertThat(t.api.post("/api/v1/builds/" + onB + "/cancel", "{}").status()).isEqualTo(202);
    assertThat(t.api.get("/api/v1/workspaces/state?workspace=wb").status()).isEqualTo(200);
  }
}
