package io.oneshot.launch.kubernetes;

import static io.oneshot.testing.TestServer.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import io.oneshot.testing.Ports;
import io.oneshot.testing.PromText;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import io.oneshot.testing.k8s.RealCluster;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Instant;
import java.time.InstantSource;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Warm capacity on a real node ({@code scripts/kube start}): balloons are Deployments the real
 * controllers keep, the real scheduler preempts them for a build's pod, and the kubelet ends them.
 *
 * <p>The node's room is an extended resource the test gives it, {@code oneshot.io/room}, as a
 * device plugin or an operator would (a PATCH of the node's status: "Advertise Extended Resources
 * for a Node" in the Kubernetes documentation): each build and each balloon asks for one, so that
 * "the node is full" is exact and owes nothing to what else runs on this machine.
 */
class WarmRealNodeTest {
  static final String ROOM = RealCluster.ROOM;

  @TempDir Path tmp;
  private RealCluster k;
  private String ns;
  private final List<TestServer> servers = new ArrayList<>();

  @BeforeEach
  void setUp() {
    k = RealCluster.get();
    ns = k.namespace("warm");
    k.balloonClass();
  }

  @AfterEach
  void tearDown() {
    try {
      for (TestServer t : servers) {
        t.close();
      }
    } finally {
      if (k != null && ns != null) {
        k.delete(ns);
      }
    }
  }

  /** The repository's templates on this node, each pod asking for one of the node's room. */
  private Path templates() throws IOException {
    return k.templates(
        tmp.resolve("templates"),
        t ->
            t.replace(
                "            limits:\n              memory: 512Mi\n",
                "            limits:\n              memory: 512Mi\n              "
                    + ROOM
                    + ": \"1\"\n"));
  }

  private TestServer start(String routes, InstantSource clock, boolean emptyQueue)
      throws IOException {
    int port = Ports.stable();
    TestServer.Builder b =
        k.server(ns, templates(), port, "ttlSecondsAfterFinished: 600")
            .dispatch(
                "maxConcurrent: 20, pollInterval: 200ms, rescueInterval: 300ms,"
                    + " heartbeatInterval: 300ms, leaderInterval: 200ms, warmInterval: 1s")
            .routes(routes)
            .clock(clock);
    if (!emptyQueue) {
      b.keepQueue();
    }
    TestServer t = b.start();
    servers.add(t);
    return t;
  }

  private Deployment balloons(String route) {
    return k.admin.apps().deployments().inNamespace(ns).withName("oneshot-balloons-" + route).get();
  }

  private List<Pod> balloonPods(String route, String phase) {
    return k
        .admin
        .pods()
        .inNamespace(ns)
        .withLabel("oneshot.io/balloons", route)
        .list()
        .getItems()
        .stream()
        .filter(p -> p.getMetadata().getDeletionTimestamp() == null)
        .filter(p -> phase.equals(p.getStatus().getPhase()))
        .toList();
  }

  private static void awaitLeader(TestServer t) {
    await().atMost(30, TimeUnit.SECONDS).until(t.server::leader);
  }

  @Test
  void aBurstTakesTheBalloonsPlacesAtOnceAndTheBalloonsComeBackWhenItEnds() throws IOException {
    k.room(4);
    TestServer t =
        start(
            """
            routes:
              - {name: warm, tags: {team: a}, untagged: true, template: script.yaml,
                 maxConcurrent: 8, warm: {idle: 4}}
            """,
            InstantSource.system(),
            true);
    awaitLeader(t);
    // The node is full of balloons: four, each holding one of its four rooms.
    await().atMost(2, TimeUnit.MINUTES).until(() -> balloonPods("warm", "Running").size() == 4);
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(() -> Sql.count("SELECT count(*) FROM oneshot.route_warmth WHERE running = 4") == 1);
    List<Long> ids = new ArrayList<>();
    for (int i = 0; i < 4; i++) {
      ids.add(t.api.submitScript("{\"team\": \"a\"}", "echo burst-" + i + "; sleep 4"));
    }
    // With no room but the balloons', each build's pod takes a balloon's place; none waits.
    for (long id : ids) {
      await().atMost(3, TimeUnit.MINUTES).until(() -> status(id).matches("succeeded|failed"));
      assertThat(status(id)).as("build %d", id).isEqualTo("succeeded");
      assertThat(
              Sql.count(
                  "SELECT count(*) FROM oneshot.build_events WHERE build_id = ? AND reason LIKE"
                      + " 'its pod took the place of balloon oneshot-balloons-warm-% on node %'",
                  id))
          .as("build %d's timeline says its pod took a balloon's place", id)
          .isEqualTo(1);
    }
    // The balloons came back, pending while the builds ran, and hold the node again.
    await().atMost(2, TimeUnit.MINUTES).until(() -> balloonPods("warm", "Running").size() == 4);
    await()
        .atMost(30, TimeUnit.SECONDS)
        .untilAsserted(
            () -> {
              var w = t.api.get("/api/v1/routes").json().get(0).path("warm");
              assertThat(w.path("running").asInt()).isEqualTo(4);
              assertThat(w.path("wanted").asInt()).isEqualTo(4);
              assertThat(w.path("preemptions").asInt()).isEqualTo(4);
              assertThat(w.path("balloonHours").asDouble()).isPositive();
            });
    assertThat(
            PromText.parse(t.server.metrics().scrape())
                .value("oneshot_balloon_preemptions_total", "route", "warm"))
        .isEqualTo(4.0);
    assertThat(k.kubectl("get", "events", "-n", ns, "--field-selector", "reason=Preempted"))
        .contains("Preempted by " + ns + "/oneshot-" + ids.get(0) + "-1-");
  }

  /** A clock the test sets. */
  private static final class Clock implements InstantSource {
    volatile Instant now;

    Clock(String at) {
      now = Instant.parse(at);
    }

    @Override
    public Instant instant() {
      return now;
    }
  }

  private static final String SCHEDULED =
      """
      routes:
        - {name: warm, tags: {team: a}, untagged: true, template: script.yaml, maxConcurrent: 8,
           warm: {idle: 1, schedule: [{cron: "0 9 * * 1-5", length: 1h, timeZone: Europe/Berlin,
           balloons: 3}]}}
        - {name: cold, tags: {team: c}, template: script.yaml, maxConcurrent: 8}
      """;

  private static int replicas(Deployment d) {
    return d == null ? -1 : d.getSpec().getReplicas();
  }

  @Test
  void aSchedulePeriodStartingAndEndingChangesTheCountAndARouteWithoutWarmHasNone()
      throws IOException {
    k.room(4);
    // Monday 7 December 2026, 8:59 in Berlin.
    Clock clock = new Clock("2026-12-07T07:59:00Z");
    TestServer t = start(SCHEDULED, clock, true);
    awaitLeader(t);
    await().atMost(1, TimeUnit.MINUTES).until(() -> replicas(balloons("warm")) == 1);
    clock.now = Instant.parse("2026-12-07T08:00:00Z");
    t.server.warmth().wake();
    await().atMost(1, TimeUnit.MINUTES).until(() -> replicas(balloons("warm")) == 3);
    await().atMost(2, TimeUnit.MINUTES).until(() -> balloonPods("warm", "Running").size() == 3);
    assertThat(Sql.value("SELECT why FROM oneshot.route_warmth WHERE route = 'warm'"))
        .isEqualTo("idle 1; schedule '0 9 * * 1-5' 3 until Mon 10:00 Europe/Berlin -> 3");
    clock.now = Instant.parse("2026-12-07T09:00:00Z");
    t.server.warmth().wake();
    await().atMost(1, TimeUnit.MINUTES).until(() -> replicas(balloons("warm")) == 1);
    await().atMost(1, TimeUnit.MINUTES).until(() -> balloonPods("warm", "Running").size() == 1);
    assertThat(balloons("cold")).as("a route without warm has no balloons").isNull();
    assertThat(
            k.admin
                .pods()
                .inNamespace(ns)
                .withLabel("oneshot.io/balloons", "cold")
                .list()
                .getItems())
        .isEmpty();
  }

  private static double writes(TestServer t) {
    PromText p = PromText.parse(t.server.metrics().scrape());
    double n = 0;
    for (String verb : List.of("create", "update", "patch", "delete")) {
      n += p.sum("oneshot_kubernetes_requests_total", "verb", verb);
    }
    return n;
  }

  @Test
  void aFollowerNeverTouchesBalloonsAndAFailoverKeepsThem() throws IOException {
    k.room(4);
    Clock clock = new Clock("2026-12-07T07:59:00Z");
    TestServer leader = start(SCHEDULED, clock, true);
    awaitLeader(leader);
    TestServer follower = start(SCHEDULED, clock, false);
    await().atMost(1, TimeUnit.MINUTES).until(() -> replicas(balloons("warm")) == 1);
    clock.now = Instant.parse("2026-12-07T08:00:00Z");
    leader.server.warmth().wake();
    follower.server.warmth().wake();
    await().atMost(1, TimeUnit.MINUTES).until(() -> replicas(balloons("warm")) == 3);
    await().atMost(2, TimeUnit.MINUTES).until(() -> balloonPods("warm", "Running").size() == 3);
    assertThat(follower.server.leader()).isFalse();
    assertThat(follower.server.warmth().pass()).as("a follower counts nothing").isEmpty();
    assertThat(writes(follower)).as("the follower's writes to the API server").isZero();
    assertThat(writes(leader)).isPositive();
    // The leader goes: its balloons stay, and the follower, leading now, keeps them as they are.
    String uid = balloons("warm").getMetadata().getUid();
    leader.close();
    servers.remove(leader);
    assertThat(replicas(balloons("warm"))).isEqualTo(3);
    await().atMost(1, TimeUnit.MINUTES).until(follower.server::leader);
    follower.server.warmth().pass();
    assertThat(balloons("warm").getMetadata().getUid()).isEqualTo(uid);
    assertThat(replicas(balloons("warm"))).isEqualTo(3);
    assertThat(balloonPods("warm", "Running")).hasSize(3);
    // And counts from here on.
    clock.now = Instant.parse("2026-12-07T09:00:00Z");
    follower.server.warmth().wake();
    await().atMost(1, TimeUnit.MINUTES).until(() -> replicas(balloons("warm")) == 1);
  }

  @Test
  void withoutTheirPriorityClassNoBalloonIsMadeAndARouteNoLongerWarmLosesItsBalloons()
      throws IOException {
    k.room(4);
    TestServer t =
        start(
            """
            routes:
              - {name: warm, tags: {team: a}, untagged: true, template: script.yaml,
                 maxConcurrent: 8, warm: {idle: 2}}
            """,
            InstantSource.system(),
            true);
    awaitLeader(t);
    await().atMost(1, TimeUnit.MINUTES).until(() -> replicas(balloons("warm")) == 2);
    t.close();
    servers.remove(t);
    // The next dispatcher's route keeps none: its balloons go.
    t =
        start(
            """
            routes:
              - {name: warm, tags: {team: a}, untagged: true, template: script.yaml,
                 maxConcurrent: 8}
            """,
            InstantSource.system(),
            false);
    awaitLeader(t);
    await().atMost(1, TimeUnit.MINUTES).until(() -> balloons("warm") == null);
    t.close();
    servers.remove(t);
    // A PriorityClass that is not there: no balloon is made, and the route says why.
    int port = Ports.stable();
    t =
        k.server(ns, templates(), port, "balloonPriorityClass: oneshot-balloon-missing")
            .dispatch("pollInterval: 200ms, leaderInterval: 200ms, warmInterval: 1s")
            .routes(
                """
                routes:
                  - {name: warm, tags: {team: a}, untagged: true, template: script.yaml,
                     maxConcurrent: 8, warm: {idle: 2}}
                """)
            .keepQueue()
            .start();
    servers.add(t);
    awaitLeader(t);
    TestServer last = t;
    await()
        .atMost(1, TimeUnit.MINUTES)
        .untilAsserted(
            () ->
                assertThat(
                        last.api
                            .get("/api/v1/routes")
                            .json()
                            .get(0)
                            .path("warm")
                            .path("trouble")
                            .asText())
                    .startsWith("PriorityClass oneshot-balloon-missing does not exist"));
    assertThat(balloons("warm")).isNull();
  }
}
