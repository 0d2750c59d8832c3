package io.oneshot.bench;

import io.oneshot.testing.NoopLauncher;
import io.oneshot.testing.TestServer;
import io.oneshot.testing.k8s.MockCluster;
import java.time.Duration;
import java.time.Instant;

/**
 * Throughput: a burst enqueued in one statement, measured from its commit to the last launch
 * recorded. No route limit holds it back; the dispatcher and its launcher are all that is measured.
 */
final class ThroughputBench implements Scenario {
  /**
   * The mock API server's CRUD store scans every object it holds on each request, so its cost grows
   * with the burst: past a few thousand Jobs and Secrets it, not the dispatcher, sets the pace.
   */
  static final int MOCK_BURST = Integer.getInteger("bench.mockBurst", 1_000);

  @Override
  public String name() {
    return "throughput";
  }

  @Override
  public String describe() {
    return "a burst of 10,000 builds: dispatched (launch recorded) per second";
  }

  @Override
  public void run(boolean smoke, Report report) throws Exception {
    TimedLauncher noop = new TimedLauncher(new NoopLauncher(false));
    try (TestServer t = Setups.noop(noop).start()) {
      burst(
          t,
          "no-op launcher, claimBatch " + Setups.CLAIM_BATCH,
          smoke ? 200 : 10_000,
          Report.Goal.atLeast(5_000),
          report);
    }
    try (MockCluster cluster = Setups.cluster()) {
      calibrate(cluster, smoke ? 100 : 3 * MOCK_BURST, report);
    }
    try (MockCluster cluster = Setups.cluster()) {
      TimedLauncher[] k8s = new TimedLauncher[1];
      try (TestServer t = Setups.kubernetes(cluster, 10_000, 10_000, k8s).start()) {
        burst(
            t,
            "kubernetes, mock API, rate limit off",
            smoke ? 50 : MOCK_BURST,
            Report.Goal.atLeast(500),
            report);
      }
    }
    // The launcher's own ceiling: the same calls, answered by a server whose answers cost the same
    // however many objects it holds.
    try (EchoApi echo = new EchoApi()) {
      TimedLauncher[] k8s = new TimedLauncher[1];
      String variant = "kubernetes, echo API, rate limit off";
      int n = smoke ? 50 : 10_000;
      try (TestServer t = Setups.kubernetes(echo::clientFor, 10_000, 10_000, k8s).start()) {
        burst(t, variant, n, null, report);
      }
      report.add(
          "throughput", variant, "API requests per launch", (double) echo.requests.get() / n, "");
    }
    try (MockCluster cluster = Setups.cluster()) {
      TimedLauncher[] k8s = new TimedLauncher[1];
      try (TestServer t = Setups.kubernetes(cluster, 20, 40, k8s).start()) {
        burst(t, "kubernetes, mock API, default limit (qps 20)", smoke ? 20 : 300, null, report);
      }
    }
  }

  /**
   * The mock API server alone: as many creates as a burst's launches make (a launch is three
   * requests), from {@link io.oneshot.dispatch.Dispatcher}'s number of parallel launches. What it
   * answers a second bounds what any launcher can do against it.
   */
  static void calibrate(MockCluster cluster, int requests, Report report) throws Exception {
    java.util.concurrent.atomic.AtomicInteger next =
        new java.util.concurrent.atomic.AtomicInteger();
    long t0 = System.nanoTime();
    try (var threads = java.util.concurrent.Executors.newVirtualThreadPerTaskExecutor()) {
      for (int w = 0; w < 64; w++) {
        threads.execute(
            () -> {
              int i;
              while ((i = next.getAndIncrement()) < requests) {
                cluster
                    .admin
                    .configMaps()
                    .inNamespace("calibrate")
                    .resource(
                        new io.fabric8.kubernetes.api.model.ConfigMapBuilder()
                            .withNewMetadata()
                            .withName("c-" + i)
                            .endMetadata()
                            .addToData("k", "v")
                            .build())
                    .create();
              }
            });
      }
    }
    double seconds = (System.nanoTime() - t0) / 1e9;
    report.add(
        "throughput",
        "the mock API server alone, 64 clients",
        "creates per second",
        requests / seconds,
        "requests/s");
  }

  static void burst(TestServer t, String variant, int n, Report.Goal goal, Report report) {
    Harness.awaitLeader(t);
    try (Harness.Producer p = new Harness.Producer()) {
      long[] ids = p.burst(n);
      Instant committed = p.committed.get(ids[0]);
      Harness.awaitBuilds(ids, "launched_at IS NOT NULL", Duration.ofMinutes(10));
      Instant last = Harness.latest(ids, "launched_at");
      double seconds = Duration.between(committed, last).toNanos() / 1e9;
      report.add("throughput", variant, "builds", n, "");
      report.add("throughput", variant, "burst dispatched in", seconds, "s");
      report.add("throughput", variant, "dispatched per second", n / seconds, "builds/s", goal);
    }
  }
}
