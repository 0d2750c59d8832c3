package io.oneshot.bench;

import io.fabric8.kubernetes.client.KubernetesClient;
import io.oneshot.launch.kubernetes.LaunchObjects;
import io.oneshot.testing.TestServer;
import io.oneshot.testing.k8s.MockCluster;
import io.vertx.core.Vertx;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;

/**
 * Kubernetes launches: a burst of builds through the dispatcher, from the burst's commit to the
 * last launch recorded, beside a plain fabric8 client that makes the same three requests per launch
 * (create the Secret, create the Job, make the Job own the Secret) with as many launches in flight
 * and nothing else: no database, no claim, no record. Both run against the same kind of API server,
 * each against a fresh one: fabric8's mock (CRUD mode), whose store scans every object on each
 * request, and {@link EchoApi}, which answers at once. Then a 9:00 burst of 200 builds with the
 * default settings (rate limit and launches in flight), against the mock.
 */
final class LaunchBench implements Scenario {
  @Override
  public String name() {
    return "launch";
  }

  @Override
  public String describe() {
    return "Kubernetes launches per second against a plain fabric8 client with as many in flight"
        + " (mock and echo API, 64 and 300 in flight); 200 builds with the default settings";
  }

  @Override
  public void run(boolean smoke, Report report) throws Exception {
    int[] inFlight = smoke ? new int[] {8} : new int[] {64, 300};
    if (!smoke) {
      // Both sides run the same client code: neither pays for its compilation in what is measured.
      for (int round = 0; round < 2; round++) {
        try (EchoApi echo = new EchoApi()) {
          plain(echo::clientFor, 3_000, 64);
        }
        try (EchoApi echo = new EchoApi()) {
          dispatched(echo::clientFor, unlimited(64), 3_000);
        }
      }
    }
    for (int f : inFlight) {
      int n = smoke ? 40 : Integer.getInteger("bench.mockBurst", 1_000);
      String variant = "mock API, " + f + " in flight";
      double plain;
      try (MockCluster c = Setups.cluster()) {
        plain = plain(c::clientFor, n, f);
      }
      double ours;
      try (MockCluster c = Setups.cluster()) {
        ours = n / dispatched(c::clientFor, unlimited(f), n);
      }
      compare(report, variant, n, plain, ours);
    }
    for (int f : inFlight) {
      int n = smoke ? 40 : 5_000;
      String variant = "echo API, " + f + " in flight";
      double plain;
      try (EchoApi echo = new EchoApi()) {
        plain = plain(echo::clientFor, n, f);
      }
      double ours;
      try (EchoApi echo = new EchoApi()) {
        ours = n / dispatched(echo::clientFor, unlimited(f), n);
        report.add(
            "launch", variant, "API requests per launch", (double) echo.requests.get() / n, "");
      }
      compare(report, variant, n, plain, ours);
    }
    int n = smoke ? 20 : 200;
    try (MockCluster c = Setups.cluster()) {
      double seconds = dispatched(c::clientFor, "", n);
      report.add(
          "launch",
          "mock API, default settings (qps 100, burst 300, 64 in flight)",
          n + " builds enqueued at once: all launched in",
          seconds,
          "s",
          smoke ? null : Report.Goal.under(5));
    }
  }

  private static String unlimited(int inFlight) {
    return Setups.rate(10_000, 10_000) + ", launchesInFlight: " + inFlight;
  }

  private static void compare(Report report, String variant, int n, double plain, double ours) {
    report.add("launch", variant, "launches", n, "");
    report.add("launch", variant, "plain fabric8 client, same requests", plain, "launches/s");
    report.add("launch", variant, "oneshot, enqueue to launch recorded", ours, "launches/s");
    report.add(
        "launch", variant, "oneshot ÷ plain client", ours / plain, "×", Report.Goal.atLeast(1.0));
  }

  /**
   * The plain client: {@code inFlight} virtual threads take the next launch's objects and make its
   * three requests, on a Vert.x of its own, until {@code n} are done. Launches per second.
   */
  static double plain(Function<Vertx, KubernetesClient> api, int n, int inFlight) throws Exception {
    Path dir = Files.createTempDirectory("oneshot-bench-launch");
    List<LaunchObjects.Objects> objects =
        LaunchObjects.forBuilds(
            Setups.kubernetes(api, "", new TimedLauncher[1]).config(dir),
            Path.of("job-templates"),
            "bench",
            1,
            n);
    Vertx vertx = Vertx.vertx();
    try (KubernetesClient client = api.apply(vertx)) {
      AtomicInteger next = new AtomicInteger();
      long t0 = System.nanoTime();
      try (var threads = Executors.newVirtualThreadPerTaskExecutor()) {
        for (int w = 0; w < inFlight; w++) {
          threads.execute(
              () -> {
                int i;
                while ((i = next.getAndIncrement()) < n) {
                  LaunchObjects.createPlainly(client, objects.get(i));
                }
              });
        }
      }
      return n / ((System.nanoTime() - t0) / 1e9);
    } finally {
      vertx.close().toCompletionStage().toCompletableFuture().join();
    }
  }

  /**
   * A burst of {@code n} builds through a dispatcher with the Kubernetes launcher ({@code settings}
   * added to its section): seconds from the burst's commit to the last launch recorded.
   */
  static double dispatched(Function<Vertx, KubernetesClient> api, String settings, int n) {
    TimedLauncher[] made = new TimedLauncher[1];
    try (TestServer t = Setups.kubernetes(api, settings, made).start()) {
      double seconds = Harness.burstSeconds(t, n);
      // The mock API sends watch events one at a time and, when a watch closes, holds its event
      // loop until the ones still queued are sent: closing the informers before they caught up
      // blocked it past the client's close.
      Harness.await(
          "the informers saw every launch",
          Duration.ofMinutes(2),
          () -> LaunchObjects.seenAll(made[0], n));
      return seconds;
    }
  }
}
