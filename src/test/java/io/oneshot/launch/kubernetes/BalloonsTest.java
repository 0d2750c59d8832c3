package io.oneshot.launch.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.fabric8.kubernetes.api.model.Event;
import io.fabric8.kubernetes.api.model.EventBuilder;
import io.fabric8.kubernetes.api.model.apps.Deployment;
import io.fabric8.kubernetes.api.model.scheduling.v1.PriorityClassBuilder;
import io.oneshot.config.ConfigLoader;
import io.oneshot.config.OneshotConfig;
import io.oneshot.launch.AttemptRef;
import io.oneshot.launch.WarmRoom;
import io.oneshot.testing.k8s.MockCluster;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The balloons' own rules against the mock API server (what needs the real scheduler and
 * controllers is in WarmRealNodeTest): their PriorityClass checked before any is made, the
 * Deployment kept at the count, and the scheduler's Preempted Events told once and only when new.
 */
class BalloonsTest {
  @TempDir Path tmp;
  private MockCluster cluster;
  private KubernetesLauncher launcher;
  private io.vertx.core.Vertx vertx;

  @AfterEach
  void tearDown() {
    if (launcher != null) {
      launcher.close();
    }
    if (vertx != null) {
      vertx.close().toCompletionStage().toCompletableFuture().join();
    }
    if (cluster != null) {
      cluster.close();
    }
  }

  /** A launcher on the mock whose route a keeps balloons; its template names {@code cls}. */
  private Balloons balloons(String cls) throws Exception {
    cluster = new MockCluster(List.of("ns"), Files.createDirectories(tmp.resolve("kubelet")));
    Path templates = Files.createDirectories(tmp.resolve("templates"));
    String script = Files.readString(Path.of("job-templates/script.yaml"));
    if (cls != null) {
      script =
          script.replace(
              "      serviceAccountName: oneshot-build\n",
              "      serviceAccountName: oneshot-build\n      priorityClassName: " + cls + "\n");
    }
    Files.writeString(templates.resolve("script.yaml"), script);
    OneshotConfig config =
        ConfigLoader.parse(
            """
            api: {publicUrl: "http://127.0.0.1:8080"}
            launcher: {kind: kubernetes, kubernetes: {namespace: ns, templateDir: %s}}
            routes: [{name: a, template: script.yaml, warm: {idle: 1}}]
            """
                .formatted(templates),
            "t",
            Map.of());
    vertx = io.vertx.core.Vertx.vertx();
    launcher = KubernetesLauncher.create(config, cluster.clientFor(vertx));
    return (Balloons) launcher.warmRoom().orElseThrow();
  }

  private void priorityClass(String name, int value, String policy) {
    cluster
        .admin
        .scheduling()
        .v1()
        .priorityClasses()
        .resource(
            new PriorityClassBuilder()
                .withNewMetadata()
                .withName(name)
                .endMetadata()
                .withValue(value)
                .withPreemptionPolicy(policy)
                .build())
        .create();
  }

  @Test
  void balloonsAreKeptOnlyBelowEveryBuild() throws Exception {
    Balloons b = balloons("builds");
    assertThat(b.trouble()).startsWith("PriorityClass oneshot-balloon does not exist");
    priorityClass("oneshot-balloon", 0, "Never");
    assertThat(b.trouble()).startsWith("PriorityClass oneshot-balloon has value 0");
    cluster.admin.scheduling().v1().priorityClasses().withName("oneshot-balloon").delete();
    await()
        .atMost(10, TimeUnit.SECONDS)
        .until(
            () ->
                cluster.admin.scheduling().v1().priorityClasses().withName("oneshot-balloon").get()
                    == null);
    priorityClass("oneshot-balloon", -1, "Never");
    priorityClass("builds", -5, "PreemptLowerPriority");
    assertThat(b.trouble())
        .isEqualTo(
            "route a's builds run at PriorityClass builds (-5), not above the balloons'"
                + " oneshot-balloon (-1): a build's pod could not take a balloon's place");
    assertThat(launcher.warnings()).anyMatch(w -> w.startsWith("balloons are not kept: route a"));
    cluster.admin.scheduling().v1().priorityClasses().withName("builds").delete();
    await()
        .atMost(10, TimeUnit.SECONDS)
        .until(
            () ->
                cluster.admin.scheduling().v1().priorityClasses().withName("builds").get() == null);
    priorityClass("builds", 100, "Never");
    assertThat(b.trouble())
        .endsWith(
            "whose preemptionPolicy is Never: a build's pod could not take a balloon's place");
    cluster.admin.scheduling().v1().priorityClasses().withName("builds").delete();
    await()
        .atMost(10, TimeUnit.SECONDS)
        .until(
            () ->
                cluster.admin.scheduling().v1().priorityClasses().withName("builds").get() == null);
    priorityClass("builds", 100, "PreemptLowerPriority");
    assertThat(b.trouble()).isNull();
    assertThat(launcher.warnings()).noneMatch(w -> w.startsWith("balloons"));
  }

  private Deployment deployment() {
    return cluster
        .admin
        .apps()
        .deployments()
        .inNamespace("ns")
        .withName("oneshot-balloons-a")
        .get();
  }

  @Test
  void theLeaderKeepsTheRoutesDeploymentAtItsCountAndRemovesItWhenTheRouteKeepsNone()
      throws Exception {
    Balloons b = balloons(null);
    OneshotConfig.Route a =
        ConfigLoader.parse(
                """
                api: {publicUrl: "http://127.0.0.1:8080"}
                launcher: {kind: kubernetes}
                routes: [{name: a, template: script.yaml, warm: {idle: 1}}]
                """,
                "t",
                Map.of())
            .routes()
            .get(0);
    b.hold(a, 0);
    assertThat(deployment()).as("nothing made for no balloons").isNull();
    b.hold(a, 2);
    assertThat(deployment().getSpec().getReplicas()).isEqualTo(2);
    await().atMost(10, TimeUnit.SECONDS).until(() -> b.observed().containsKey("a"));
    b.hold(a, 5);
    assertThat(deployment().getSpec().getReplicas()).isEqualTo(5);
    await().atMost(10, TimeUnit.SECONDS).until(() -> b.observed().get("a").asked() == 5);
    b.hold(a, 0);
    assertThat(deployment().getSpec().getReplicas()).as("kept, at none").isZero();
    await().atMost(10, TimeUnit.SECONDS).until(() -> b.observed().get("a").asked() == 0);
    b.release(Set.of("a"));
    assertThat(deployment()).isNotNull();
    b.release(Set.of());
    assertThat(deployment()).isNull();
  }

  /** The scheduler's Event on a preempted pod, as kube-scheduler 1.20 records it. */
  private static Event preempted(String uid, String victim, String by, Instant at) {
    return new EventBuilder()
        .withNewMetadata()
        .withName(victim + "." + uid)
        .withNamespace("ns")
        .withUid(uid)
        .endMetadata()
        .withReason("Preempted")
        .withType("Normal")
        .withNewInvolvedObject()
        .withKind("Pod")
        .withNamespace("ns")
        .withName(victim)
        .endInvolvedObject()
        .withNewRelated()
        .withKind("Pod")
        .withNamespace("ns")
        .withName(by)
        .endRelated()
        .withMessage("Preempted by ns/" + by + " on node node-1")
        .withLastTimestamp(at.toString())
        .build();
  }

  private record Told(String route, String balloon, String node, Optional<AttemptRef> by) {}

  /**
   * What the Events informer hands over (its wiring to the API server, field selector and all, is
   * exercised on the real node by WarmRealNodeTest: the fabric8 mock's watch of Events with those
   * field selectors delivered no new Event here, where kube-apiserver's does).
   */
  @Test
  void aPreemptionIsToldOnceAndOnlyWhenItHappenedSinceTheWatchBegan() throws Exception {
    Balloons b = balloons(null);
    List<Told> told = new CopyOnWriteArrayList<>();
    b.listen(
        new WarmRoom.Listener() {
          @Override
          public void preempted(
              String route, String balloon, String node, Optional<AttemptRef> by) {
            told.add(new Told(route, balloon, node, by));
          }

          @Override
          public void changed() {}
        });
    b.hold(launcherRoute(), 1);
    // From before the watch began, heard at its first list (a dispatcher restarted): told by the
    // replica that heard it then, or past telling.
    b.onEvent(
        preempted(
            "old",
            "oneshot-balloons-a-5d8f7c9b4-old01",
            "oneshot-7-1-aaaaa",
            Instant.now().minusSeconds(600)));
    Event e =
        preempted(
            "new",
            "oneshot-balloons-a-5d8f7c9b4-x2k9q",
            "oneshot-12-3-bcdef",
            Instant.now().plusSeconds(1));
    b.onEvent(e);
    // The same Event again (its count raised): told once.
    e.setCount(2);
    b.onEvent(e);
    // Another pod's preemption is no balloon's.
    b.onEvent(preempted("other", "web-6b7c9d-zzzzz", "oneshot-13-1-ccccc", Instant.now()));
    // Without the related object, the message names the preemptor.
    Event bare =
        preempted(
            "bare", "oneshot-balloons-a-5d8f7c9b4-y3m1p", "oneshot-14-1-ddddd", Instant.now());
    bare.setRelated(null);
    b.onEvent(bare);
    assertThat(told)
        .containsExactly(
            new Told(
                "a",
                "oneshot-balloons-a-5d8f7c9b4-x2k9q",
                "node-1",
                Optional.of(new AttemptRef(12, 3, "oneshot-12-3", "ns"))),
            new Told(
                "a",
                "oneshot-balloons-a-5d8f7c9b4-y3m1p",
                "node-1",
                Optional.of(new AttemptRef(14, 1, "oneshot-14-1", "ns"))));
  }

  private static OneshotConfig.Route launcherRoute() {
    return ConfigLoader.parse(
            """
            api: {publicUrl: "http://127.0.0.1:8080"}
            launcher: {kind: kubernetes}
            routes: [{name: a, template: script.yaml, warm: {idle: 1}}]
            """,
            "t",
            Map.of())
        .routes()
        .get(0);
  }
}
