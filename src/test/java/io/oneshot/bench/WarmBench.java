package io.oneshot.bench;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.api.model.Quantity;
import io.oneshot.testing.Ports;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TempDirs;
import io.oneshot.testing.TestServer;
import io.oneshot.testing.k8s.RealCluster;
import java.nio.file.Path;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.time.InstantSource;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A burst of builds on the real node {@code scripts/kube start} runs, three ways, in one run:
 *
 * <ul>
 *   <li><b>empty node</b> (the reference): the node has room for the whole burst;
 *   <li><b>balloons</b>: the node is full, of the route's balloons (warm room), which the builds'
 *       pods take the place of;
 *   <li><b>no balloons</b>: the node is full of other pods the builds cannot preempt, and a
 *       stand-in for the cluster autoscaler gives the node a new node's worth of room a fixed delay
 *       (60 s) after it sees a build's pod that no node can take, as a node group that boots a node
 *       in that time would.
 * </ul>
 *
 * Room is an extended resource the node is given ({@code oneshot.io/room}, one per build or
 * balloon), so that "full" is exact whatever else runs here. Each build prints its first line at
 * once; the figure is enqueue to that line, p50 and p95 over the builds of every round, and the
 * balloon-hours the balloons cost in the run. Goal: with balloons, within 1.5x the empty node's.
 */
final class WarmBench implements Scenario {
  private static final String SCENARIO = "warm";
  private static final String ROOM = RealCluster.ROOM;
  private static final String SCRIPT =
      "{\"provisioner\": \"script\", \"command\": [\"sh\", \"-c\", \"echo first-line; sleep 2\"]}";

  /** The route's period of balloons: the bench's clock is in it for the balloons' case only. */
  private static final Instant OUTSIDE = Instant.parse("2026-12-07T08:00:00Z");

  private static final Instant INSIDE = Instant.parse("2026-12-07T09:30:00Z");

  @Override
  public String name() {
    return SCENARIO;
  }

  @Override
  public String describe() {
    return "a burst on a real node with no free room: with balloons, and without (a stand-in"
        + " autoscaler adds a node's room after 60 s), beside the burst on an empty node";
  }

  @Override
  public void run(boolean smoke, Report report) throws Exception {
    Optional<RealCluster> found = RealCluster.find();
    if (found.isEmpty()) {
      report.note(SCENARIO + ": no cluster runs here (scripts/kube start); nothing measured");
      return;
    }
    RealCluster k = found.get();
    String ns = k.namespace("bench-warm");
    Path dir = TempDirs.make("oneshot-bench-warm");
    try {
      run(smoke, report, k, ns, dir);
    } finally {
      k.delete(ns);
      TempDirs.delete(dir);
    }
  }

  /** A clock the bench moves in and out of the route's period. */
  private static final class Clock implements InstantSource {
    volatile Instant now = OUTSIDE;

    @Override
    public Instant instant() {
      return now;
    }
  }

  private void run(boolean smoke, Report report, RealCluster k, String ns, Path dir)
      throws Exception {
    int burst = smoke ? 2 : 4;
    int rounds = smoke ? 1 : 3;
    Duration nodeDelay = Duration.ofSeconds(smoke ? 5 : 60);
    k.balloonClass();
    String node = k.admin.nodes().list().getItems().get(0).getMetadata().getName();
    Path templates =
        k.templates(
            dir,
            t ->
                t.replace(
                    "            limits:\n              memory: 512Mi\n",
                    "            limits:\n              memory: 512Mi\n              "
                        + ROOM
                        + ": \"1\"\n"));
    Clock clock = new Clock();
    String routes =
        """
        routes:
          - {name: bench, template: script.yaml, maxConcurrent: %d,
             warm: {schedule: [{cron: "0 9 * * *", length: 1h, balloons: %d}]}}
        """
            .formatted(burst * 2, burst);
    List<Double> empty = new ArrayList<>();
    List<Double> warm = new ArrayList<>();
    List<Double> cold = new ArrayList<>();
    k.room(burst);
    try (TestServer t =
            k.server(ns, templates, Ports.stable(), "ttlSecondsAfterFinished: 60")
                .routes(routes)
                .dispatch(
                    "maxConcurrent: 100, pollInterval: 2s, rescueInterval: 1s,"
                        + " heartbeatInterval: 1s, warmInterval: 1s")
                .clock(clock)
                .start();
        Harness.Producer p = new Harness.Producer()) {
      Harness.awaitLeader(t);
      // A build first, so that the node has run the image's JVM once before anything is measured.
      burst(p, 1);
      for (int round = 0; round < rounds; round++) {
        // The empty node.
        k.room(burst);
        empty.addAll(burst(p, burst));
        // Full of balloons.
        clock.now = INSIDE;
        t.server.warmth().wake();
        await("balloons hold the node", () -> running(k, ns, "oneshot.io/balloons=bench") == burst);
        warm.addAll(burst(p, burst));
        clock.now = OUTSIDE;
        t.server.warmth().wake();
        await("the balloons are gone", () -> pods(k, ns, "oneshot.io/balloons=bench").isEmpty());
        // Full of other pods; the stand-in autoscaler adds room after the delay.
        for (int i = 0; i < burst; i++) {
          filler(k, ns, "filler-" + round + "-" + i);
        }
        await("fillers hold the node", () -> running(k, ns, "oneshot.bench=filler") == burst);
        AtomicBoolean done = new AtomicBoolean();
        Thread autoscaler =
            Thread.ofVirtual().start(() -> standInAutoscaler(k, ns, node, burst, nodeDelay, done));
        try {
          cold.addAll(burst(p, burst));
        } finally {
          done.set(true);
          autoscaler.join(TimeUnit.MINUTES.toMillis(2));
        }
        k.admin
            .pods()
            .inNamespace(ns)
            .withLabel("oneshot.bench", "filler")
            .withGracePeriod(0)
            .delete();
        await("the fillers are gone", () -> pods(k, ns, "oneshot.bench=filler").isEmpty());
      }
      k.room(burst);
      report.reference(SCENARIO, "empty node");
      percentiles(report, "empty node", empty, null);
      percentiles(report, "balloons hold the node", warm, null);
      percentiles(
          report, "no balloons: a node's room " + nodeDelay.toSeconds() + " s later", cold, null);
      double ratio = Stats.of(warm).p50() / Stats.of(empty).p50();
      report.add(
          SCENARIO,
          "balloons hold the node",
          "enqueue -> first line p50 / the empty node's",
          ratio,
          "x",
          smoke ? null : Report.Goal.under(1.5));
      Object seconds =
          Sql.value("SELECT coalesce(sum(balloon_seconds), 0) FROM oneshot.balloon_usage");
      report.add(
          SCENARIO,
          "balloons hold the node",
          "balloon-hours spent in the run",
          ((Number) seconds).doubleValue() / 3600,
          "h",
          null);
      report.add(
          SCENARIO,
          "balloons hold the node",
          "balloon-seconds spent in the run (the same, finer)",
          ((Number) seconds).doubleValue(),
          "s",
          null);
    }
  }

  private static void percentiles(
      Report report, String variant, List<Double> ms, Report.Goal goal) {
    List<Double> sorted = new ArrayList<>(ms);
    Collections.sort(sorted);
    report.add(
        SCENARIO, variant, "enqueue -> first line p50", Stats.rank(sorted, 0.50), "ms", goal);
    report.add(SCENARIO, variant, "enqueue -> first line p95", Stats.rank(sorted, 0.95), "ms");
  }

  /** {@code n} builds enqueued at once and awaited; each one's enqueue -> first line, in ms. */
  private static List<Double> burst(Harness.Producer p, int n) {
    List<Long> ids = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      ids.add(p.enqueue("{}", SCRIPT, null));
    }
    List<Double> out = new ArrayList<>();
    for (long id : ids) {
      org.awaitility.Awaitility.await()
          .atMost(5, TimeUnit.MINUTES)
          .pollInterval(Duration.ofMillis(50))
          .until(
              () ->
                  Sql.count(
                          "SELECT count(*) FROM oneshot.builds WHERE id = ? AND finished_at IS NOT"
                              + " NULL",
                          id)
                      == 1);
      String status = (String) Sql.value("SELECT status FROM oneshot.builds WHERE id = ?", id);
      if (!"succeeded".equals(status)) {
        throw new IllegalStateException("build " + id + " ended " + status);
      }
      Instant firstLine =
          instant(
              Sql.value(
                  "SELECT min(ts) FROM oneshot.build_logs WHERE build_id = ? AND stream = 'stdout'"
                      + " AND text = 'first-line'",
                  id));
      out.add(Harness.ms(p.committedBefore(id, firstLine), firstLine));
    }
    return out;
  }

  /**
   * The stand-in for the cluster autoscaler: once a build's pod waits for want of room (the
   * scheduler's Unschedulable condition), it waits {@code delay}, as a node's boot would take, then
   * gives the node the room a new node of the same size would bring.
   */
  private static void standInAutoscaler(
      RealCluster k, String ns, String node, int room, Duration delay, AtomicBoolean done) {
    try {
      while (!done.get()) {
        boolean waiting =
            k.admin.pods().inNamespace(ns).withLabel("oneshot.io/build").list().getItems().stream()
                .anyMatch(
                    pod ->
                        pod.getStatus() != null
                            && pod.getStatus().getConditions() != null
                            && pod.getStatus().getConditions().stream()
                                .anyMatch(
                                    c ->
                                        "PodScheduled".equals(c.getType())
                                            && "Unschedulable".equals(c.getReason())));
        if (waiting) {
          Thread.sleep(delay.toMillis());
          k.room(room * 2);
          return;
        }
        Thread.sleep(100);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** A pod of priority 0 holding one room, which a build's pod cannot preempt. */
  private static void filler(RealCluster k, String ns, String name) {
    Pod pod =
        new PodBuilder()
            .withNewMetadata()
            .withName(name)
            .addToLabels("oneshot.bench", "filler")
            .endMetadata()
            .withNewSpec()
            .withHostNetwork(true)
            .withRestartPolicy("Never")
            .withAutomountServiceAccountToken(false)
            .withTerminationGracePeriodSeconds(0L)
            .addNewContainer()
            .withName("c")
            .withImage(k.image())
            .withImagePullPolicy("Never")
            .withCommand(io.oneshot.config.OneshotConfig.Warm.DEFAULT_COMMAND)
            .withNewResources()
            .addToLimits(ROOM, new Quantity("1"))
            .endResources()
            .endContainer()
            .endSpec()
            .build();
    k.admin.pods().inNamespace(ns).resource(pod).create();
  }

  private static List<Pod> pods(RealCluster k, String ns, String selector) {
    String[] kv = selector.split("=");
    return k.admin.pods().inNamespace(ns).withLabel(kv[0], kv[1]).list().getItems();
  }

  private static long running(RealCluster k, String ns, String selector) {
    return pods(k, ns, selector).stream()
        .filter(p -> p.getMetadata().getDeletionTimestamp() == null)
        .filter(p -> "Running".equals(p.getStatus().getPhase()))
        .count();
  }

  private static void await(String what, java.util.concurrent.Callable<Boolean> until) {
    org.awaitility.Awaitility.await(what)
        .atMost(3, TimeUnit.MINUTES)
        .pollInterval(Duration.ofMillis(100))
        .until(until);
  }

  private static Instant instant(Object v) {
    if (v == null) {
      throw new IllegalStateException("no first line");
    }
    return v instanceof Timestamp ts
        ? ts.toInstant()
        : v instanceof java.time.OffsetDateTime o ? o.toInstant() : Instant.parse(v.toString());
  }
}
