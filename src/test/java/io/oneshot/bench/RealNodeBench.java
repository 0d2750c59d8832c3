package io.oneshot.bench;

import io.fabric8.kubernetes.api.model.Pod;
import io.fabric8.kubernetes.api.model.PodBuilder;
import io.fabric8.kubernetes.client.Watch;
import io.fabric8.kubernetes.client.Watcher;
import io.fabric8.kubernetes.client.WatcherException;
import io.oneshot.testing.Ports;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TempDirs;
import io.oneshot.testing.TestServer;
import io.oneshot.testing.k8s.RealCluster;
import java.nio.file.Path;
import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.UnaryOperator;

/**
 * Enqueue to the script's first line on the real node {@code scripts/kube start} runs, one build at
 * a time, beside a bare pod of the same image running {@code true} (what {@code kubectl create}
 * makes: one POST) from its create to its container started, on the same node in the same run, the
 * two taking turns. The build's time is broken down by its timeline: claimed, pod scheduled (the
 * Job and its Secret created, the Job controller's pod, the scheduler's choice, as the dispatcher's
 * watch heard it), acquired, the first line; the start of its container as the watch hears it, as
 * the bare pod's is, is what the two are compared by. Without the cluster the scenario says so and
 * measures nothing.
 */
final class RealNodeBench implements Scenario {
  private static final String SCENARIO = "real-node";
  private static final String SCRIPT =
      "{\"provisioner\": \"script\", \"command\": [\"sh\", \"-c\", \"echo first-line; sleep 1\"]}";

  @Override
  public String name() {
    return SCENARIO;
  }

  @Override
  public String describe() {
    return "enqueue -> script's first line on a real node (scripts/kube), beside a bare pod of the"
        + " same image, p50 and p95 over 50 builds";
  }

  @Override
  public void run(boolean smoke, Report report) throws Exception {
    Optional<RealCluster> found = RealCluster.find();
    if (found.isEmpty()) {
      report.note(SCENARIO + ": no cluster runs here (scripts/kube start); nothing measured");
      return;
    }
    RealCluster k = found.get();
    String ns = k.namespace("bench");
    Path dir = TempDirs.make("oneshot-bench-templates");
    try {
      run(smoke, report, k, ns, dir);
    } finally {
      k.delete(ns);
      TempDirs.delete(dir);
    }
  }

  private void run(boolean smoke, Report report, RealCluster k, String ns, Path dir)
      throws Exception {
    Path templates = k.templates(dir, UnaryOperator.identity());
    String image = k.image();
    int port = Ports.stable();
    int runs = smoke ? 2 : 50;
    int warmUp = smoke ? 1 : 3;
    Map<String, Long> started = new ConcurrentHashMap<>();
    Map<String, CountDownLatch> waiting = new ConcurrentHashMap<>();
    Watch watch =
        k.admin
            .pods()
            .inNamespace(ns)
            .withLabel("oneshot.bench", "bare")
            .watch(
                new Watcher<>() {
                  @Override
                  public void eventReceived(Action action, Pod pod) {
                    long now = System.nanoTime();
                    if (pod.getStatus() == null || pod.getStatus().getContainerStatuses() == null) {
                      return;
                    }
                    boolean up =
                        pod.getStatus().getContainerStatuses().stream()
                            .anyMatch(
                                c ->
                                    c.getState() != null
                                        && (c.getState().getRunning() != null
                                            || c.getState().getTerminated() != null));
                    String name = pod.getMetadata().getName();
                    if (up && started.putIfAbsent(name, now) == null) {
                      CountDownLatch l = waiting.get(name);
                      if (l != null) {
                        l.countDown();
                      }
                    }
                  }

                  @Override
                  public void onClose(WatcherException cause) {}
                });
    Map<String, List<Double>> build = new LinkedHashMap<>();
    for (String step :
        List.of(
            "enqueue -> claimed",
            "claimed -> pod scheduled",
            "pod scheduled -> acquired",
            "acquired -> first line",
            "enqueue -> container started",
            "enqueue -> first line")) {
      build.put(step, new ArrayList<>());
    }
    List<Double> bare = new ArrayList<>();
    try (TestServer t =
            k.server(ns, templates, port, "")
                .routes("routes: [{name: bench, template: script.yaml, maxConcurrent: 4}]")
                .dispatch("pollInterval: 2s, rescueInterval: 1s, heartbeatInterval: 1s")
                .start();
        Harness.Producer p = new Harness.Producer()) {
      Harness.awaitLeader(t);
      for (int i = 0; i < warmUp + runs; i++) {
        boolean measured = i >= warmUp;
        double barePod = barePod(k, ns, image, "bare-" + i, started, waiting);
        Map<String, Double> steps = oneBuild(p);
        if (measured) {
          bare.add(barePod);
          steps.forEach((step, ms) -> build.get(step).add(ms));
        }
      }
    } finally {
      watch.close();
    }
    String oneshot = "oneshot, a script build (one at a time)";
    for (Map.Entry<String, List<Double>> e : build.entrySet()) {
      boolean headline = e.getKey().equals("enqueue -> first line");
      percentiles(
          report,
          oneshot,
          e.getKey(),
          e.getValue(),
          headline && !smoke ? Report.Goal.under(1000) : null);
    }
    String peer = "bare pod of the same image running true (create -> container started)";
    report.reference(SCENARIO, peer);
    percentiles(report, peer, "create -> container started", bare, null);
    double ratio = Stats.of(build.get("enqueue -> container started")).p50() / Stats.of(bare).p50();
    report.add(
        SCENARIO,
        oneshot,
        "enqueue -> container started, p50 / bare pod's",
        ratio,
        "x",
        smoke ? null : Report.Goal.under(1.3));
  }

  private static void percentiles(
      Report report, String variant, String what, List<Double> ms, Report.Goal p50) {
    List<Double> sorted = new ArrayList<>(ms);
    Collections.sort(sorted);
    report.add(SCENARIO, variant, what + " p50", Stats.rank(sorted, 0.50), "ms", p50);
    report.add(SCENARIO, variant, what + " p95", Stats.rank(sorted, 0.95), "ms");
  }

  /** A bare pod's create -> container started, in ms; the pod is deleted after. */
  private static double barePod(
      RealCluster k,
      String ns,
      String image,
      String name,
      Map<String, Long> started,
      Map<String, CountDownLatch> waiting)
      throws InterruptedException {
    CountDownLatch up = new CountDownLatch(1);
    waiting.put(name, up);
    Pod pod =
        new PodBuilder()
            .withNewMetadata()
            .withName(name)
            .addToLabels("oneshot.bench", "bare")
            .endMetadata()
            .withNewSpec()
            .withHostNetwork(true)
            .withRestartPolicy("Never")
            .withAutomountServiceAccountToken(false)
            .addNewContainer()
            .withName("c")
            .withImage(image)
            .withImagePullPolicy("Never")
            .withCommand("true")
            .endContainer()
            .endSpec()
            .build();
    long t0 = System.nanoTime();
    k.admin.pods().inNamespace(ns).resource(pod).create();
    if (!up.await(2, TimeUnit.MINUTES)) {
      throw new IllegalStateException("bare pod " + name + " did not start in 2 minutes");
    }
    double ms = (started.get(name) - t0) / 1e6;
    k.admin.pods().inNamespace(ns).withName(name).withGracePeriod(0).delete();
    return ms;
  }

  /** One build, enqueued and awaited; its steps in ms, from its timeline. */
  private static Map<String, Double> oneBuild(Harness.Producer p) {
    long id = p.enqueue("{}", SCRIPT, null);
    org.awaitility.Awaitility.await()
        .atMost(2, TimeUnit.MINUTES)
        .pollInterval(java.time.Duration.ofMillis(10))
        .until(
            () ->
                Sql.count(
                        "SELECT count(*) FROM oneshot.builds WHERE id = ? AND finished_at IS NOT NULL",
                        id)
                    == 1);
    String status = (String) Sql.value("SELECT status FROM oneshot.builds WHERE id = ?", id);
    if (!"succeeded".equals(status)) {
      throw new IllegalStateException("build " + id + " ended " + status);
    }
    Instant claimed =
        at(
            "SELECT min(at) FROM oneshot.build_events WHERE build_id = ? AND to_status = 'launching'",
            id);
    // The commit's answer can reach the producer after the claim (the server notifies the
    // dispatcher first): the statement's end then stands in for it.
    Instant enqueued = p.committedBefore(id, claimed);
    Instant scheduled =
        at(
            "SELECT min(at) FROM oneshot.build_events WHERE build_id = ? AND reason LIKE 'pod % scheduled%'",
            id);
    Instant containerUp =
        at(
            "SELECT min(at) FROM oneshot.build_events WHERE build_id = ?"
                + " AND reason LIKE 'container provisionerd started%'",
            id);
    Instant acquired = at("SELECT started_at FROM oneshot.builds WHERE id = ?", id);
    Instant firstLine =
        at(
            "SELECT min(ts) FROM oneshot.build_logs WHERE build_id = ? AND stream = 'stdout'"
                + " AND text = 'first-line'",
            id);
    Map<String, Double> steps = new LinkedHashMap<>();
    steps.put("enqueue -> claimed", Harness.ms(enqueued, claimed));
    // The launch record comes after the Job's and its Secret's creates, in a batch, and may come
    // after the pod was scheduled: the Job controller, the scheduler and the launch run at once.
    steps.put("claimed -> pod scheduled", Harness.ms(claimed, scheduled));
    // The container's start as the watch hears it can come after the acquire: the kubelet of
    // 1.20 relists its containers once a second (PLEG), and reports a start only then.
    steps.put("pod scheduled -> acquired", Harness.ms(scheduled, acquired));
    steps.put("acquired -> first line", Harness.ms(acquired, firstLine));
    steps.put("enqueue -> container started", Harness.ms(enqueued, containerUp));
    steps.put("enqueue -> first line", Harness.ms(enqueued, firstLine));
    return steps;
  }

  private static Instant at(String sql, long id) {
    Object v = Sql.value(sql, id);
    if (v == null) {
      throw new IllegalStateException("build " + id + ": nothing for " + sql);
    }
    return instant(v);
  }

  private static Instant instant(Object v) {
    return v instanceof Timestamp ts
        ? ts.toInstant()
        : v instanceof java.time.OffsetDateTime o ? o.toInstant() : Instant.parse(v.toString());
  }
}
