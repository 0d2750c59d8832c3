package io.oneshot.bench;

import io.oneshot.testing.Limits;
import io.oneshot.testing.NoopLauncher;
import io.oneshot.testing.TestServer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;

/**
 * A burst far over a route's limit (10,000 builds through 50 slots), each build acquiring and
 * completing over the runner API, while an operator reads {@code GET /api/v1/routes} every 50 ms.
 */
final class BackpressureBench implements Scenario {
  @Override
  public String name() {
    return "backpressure";
  }

  @Override
  public String describe() {
    return "10,000 builds through a route limit of 50: drain rate, GET /api/v1/routes meanwhile";
  }

  @Override
  public void run(boolean smoke, Report report) throws Exception {
    int n = smoke ? 200 : 10_000;
    String variant = "limit 50, builds acquire and complete over HTTP";
    NoopLauncher launcher = new NoopLauncher();
    try (TestServer t =
        TestServer.with()
            .routes("routes: [{name: burst, maxConcurrent: 50}]")
            .dispatch("pollInterval: 2s, rescueInterval: 5s")
            .launcher(launcher)
            .start()) {
      // "Most live at once" replays commits in order; that costs each transition one lock at
      // commit, which the drain rate below includes.
      Limits.track();
      try {
        Harness.awaitLeader(t);
        // The operator's first read on a server just started prepares its statements and, in a
        // fresh JVM, compiles the handler: 320 ms here, the slowest sample of a run, and nothing
        // the burst did. It is made before the burst and not counted.
        readRoutes(t);
        // Its ceiling: the same reads, at the same pace, of the same server with nothing queued.
        List<Double> idle = new ArrayList<>();
        int[] left = {smoke ? 5 : 40};
        readEvery50ms(t, () -> left[0]-- > 0, idle);
        List<Double> routes = Harness.list();
        AtomicBoolean draining = new AtomicBoolean(true);
        Thread operator =
            Thread.ofPlatform()
                .name("bench-operator")
                .start(() -> readEvery50ms(t, draining::get, routes));
        long t0 = System.nanoTime();
        try (Harness.Producer p = new Harness.Producer()) {
          long[] ids = p.burst(n);
          Harness.awaitBuilds(ids, "status = 'succeeded'", Duration.ofMinutes(10));
        } finally {
          draining.set(false);
          operator.join();
        }
        double seconds = (System.nanoTime() - t0) / 1e9;
        report.add("backpressure", variant, "builds", n, "");
        report.add("backpressure", variant, "drained per second", n / seconds, "builds/s");
        report.add(
            "backpressure",
            variant,
            "most live at once",
            Limits.maxConcurrency().get("route:burst"),
            "builds",
            Report.Goal.under(51));
        report.add("backpressure", variant, "GET /api/v1/routes samples", routes.size(), "");
        report.latency(
            "backpressure", variant, "GET /api/v1/routes", routes, null, Report.Goal.under(100));
        String ceiling = "ceiling: the same reads before the burst, nothing queued";
        report.reference("backpressure", ceiling);
        report.latency("backpressure", ceiling, "GET /api/v1/routes", idle, null, null);
      } finally {
        // Left installed, its lock at every commit slowed each scenario after this one.
        Limits.untrack();
      }
    }
  }

  /**
   * An operator's reads of the routes every 50 ms while {@code more}, each one's ms in {@code
   * into}.
   */
  private static void readEvery50ms(TestServer t, BooleanSupplier more, List<Double> into) {
    long next = System.nanoTime();
    while (more.getAsBoolean()) {
      long t0 = System.nanoTime();
      readRoutes(t);
      into.add((System.nanoTime() - t0) / 1e6);
      next += 50_000_000L;
      Harness.sleepUntil(next);
    }
  }

  /** One operator's read of the routes; anything but 200 ends the scenario. */
  private static void readRoutes(TestServer t) {
    int status = t.api.get("/api/v1/routes").status();
    if (status != 200) {
      throw new IllegalStateException("GET /api/v1/routes: HTTP " + status);
    }
  }
}
