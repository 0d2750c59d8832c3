package io.oneshot.faults;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.oneshot.testing.Api;
import io.oneshot.testing.Limits;
import io.oneshot.testing.NoopLauncher;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A burst far larger than a route's limit: 10,000 builds enqueued in one statement on a route of
 * 50. The limit holds throughout, every build completes, the dispatcher claims in bounded batches
 * (it never loads the queue), and the API answers while the burst drains. The API's latency and the
 * heap are printed, not asserted: performance goals live in scripts/bench.
 */
class BackpressureTest {
  private static final int BUILDS = 10_000 * Integer.getInteger("oneshot.soak", 1);

  private TestServer t;

  @AfterEach
  void tearDown() {
    if (t != null) {
      t.close();
    }
    Limits.untrack();
  }

  @Test
  void aBurstOfTenThousandDrainsWithinTheRouteLimit() throws Exception {
    NoopLauncher launcher = new NoopLauncher();
    t =
        TestServer.with()
            .routes("routes: [{name: burst, maxConcurrent: 50}]")
            .dispatch("maxConcurrent: 100, claimBatch: 100, pollInterval: 1s, rescueInterval: 2s")
            .launcher(launcher)
            .start();
    Limits.track();
    await().atMost(10, TimeUnit.SECONDS).until(() -> t.server.leader());
    Sql.exec(
        "SELECT oneshot.enqueue('{}'::jsonb,"
            + " '{\"provisioner\": \"script\", \"command\": [\"true\"]}'::jsonb)"
            + " FROM generate_series(1, ?)",
        BUILDS);

    Api api = t.api;
    List<Long> latenciesUs = Collections.synchronizedList(new ArrayList<>());
    long maxHeap = 0;
    long started = System.nanoTime();
    while (Sql.count("SELECT count(*) FROM oneshot.builds WHERE finished_at IS NULL") > 0) {
      long t0 = System.nanoTime();
      assertThat(api.get("/api/v1/routes").status()).isEqualTo(200);
      latenciesUs.add((System.nanoTime() - t0) / 1000);
      maxHeap =
          Math.max(maxHeap, ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed());
      assertThat(System.nanoTime() - started)
          .as("the burst drains")
          .isLessThan(TimeUnit.MINUTES.toNanos(10));
      Thread.sleep(50);
    }
    double seconds = (System.nanoTime() - started) / 1e9;

    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds WHERE status = 'succeeded'"))
        .isEqualTo(BUILDS);
    assertThat(launcher.errors.get()).isZero();
    assertThat(Limits.maxConcurrency().get("route:burst")).isEqualTo(50);
    // Bounded claims: no claim (one transaction: the events it wrote share their xmin) took more
    // than the route's free slots, so the queue is never loaded whole.
    long biggestClaim =
        Sql.count(
            "SELECT max(n) FROM (SELECT count(*) n FROM oneshot.build_events"
                + " WHERE from_status = 'pending' AND to_status = 'launching'"
                + " GROUP BY xmin::text) x");
    assertThat(biggestClaim).isBetween(2L, 50L);

    List<Long> sorted = new ArrayList<>(latenciesUs);
    Collections.sort(sorted);
    System.out.printf(
        "backpressure: %d builds through a limit of 50 in %.1f s (%.0f/s); GET /api/v1/routes"
            + " during the burst: %d samples, p50 %.1f ms, p99 %.1f ms, max %.1f ms; test JVM heap"
            + " max %d MiB%n",
        BUILDS,
        seconds,
        BUILDS / seconds,
        sorted.size(),
        sorted.get(sorted.size() / 2) / 1000.0,
        sorted.get((int) (sorted.size() * 0.99)) / 1000.0,
        sorted.get(sorted.size() - 1) / 1000.0,
        maxHeap >> 20);
  }
}
