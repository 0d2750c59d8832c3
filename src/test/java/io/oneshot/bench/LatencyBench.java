package io.oneshot.bench;

import io.oneshot.dispatch.Dispatcher;
import io.oneshot.testing.NoopLauncher;
import io.oneshot.testing.TestServer;
import io.oneshot.testing.k8s.MockCluster;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Dispatch latency at low load: builds enqueued one at a time at a steady rate, each measured from
 * its producer's commit to the launcher's call and to the launch recorded in the database.
 */
final class LatencyBench implements Scenario {
  static final int RATE = 20;

  @Override
  public String name() {
    return "latency";
  }

  @Override
  public String describe() {
    return "dispatch latency at "
        + RATE
        + " builds/s: enqueue commit -> launcher called, -> launched";
  }

  @Override
  public void run(boolean smoke, Report report) throws Exception {
    int seconds = smoke ? 1 : 30;
    int warmup = smoke ? 0 : 5 * RATE;
    TimedLauncher noop = new TimedLauncher(new NoopLauncher(false));
    double claimed;
    try (TestServer t = Setups.noop(noop).start()) {
      claimed = measure(t, noop, "no-op launcher", seconds, warmup, report);
    }
    try (MockCluster cluster = Setups.cluster()) {
      TimedLauncher[] k8s = new TimedLauncher[1];
      try (TestServer t = Setups.kubernetes(cluster, "", k8s).start()) {
        measure(t, k8s[0], "kubernetes, mock API (default settings)", seconds, warmup, report);
      }
    }
    // The goal's limit, measured beside it: what the claim's steps cost with nothing around them.
    double floor = LatencyFloor.measure(smoke, report);
    report.add(
        "latency",
        "no-op launcher",
        "enqueue -> claimed p50 ÷ the floor's notification + bare claim",
        claimed / floor,
        "×");
  }

  /** Measures one launcher's latencies; returns its enqueue -> claimed p50, in ms. */
  static double measure(
      TestServer t,
      TimedLauncher launcher,
      String variant,
      int seconds,
      int warmup,
      Report report) {
    return measure(t, launcher, "latency", variant, seconds, warmup, report);
  }

  /** {@link #measure}, its figures under {@code scenario}. */
  static double measure(
      TestServer t,
      TimedLauncher launcher,
      String scenario,
      String variant,
      int seconds,
      int warmup,
      Report report) {
    Harness.awaitLeader(t);
    Map<Long, Dispatcher.CycleTimes> cycles = new ConcurrentHashMap<>();
    t.server
        .dispatcher()
        .onCycle(
            c -> {
              for (long id : c.ids()) {
                cycles.put(id, c);
              }
            });
    try (Harness.Producer p = new Harness.Producer()) {
      paced(p, warmup);
      long[] ids = paced(p, seconds * RATE);
      Harness.awaitBuilds(ids, "launched_at IS NOT NULL", Duration.ofMinutes(5));
      Map<Long, Harness.Times> times = Harness.times(ids[0], ids[1]);
      List<Double> called = new ArrayList<>();
      List<Double> claimed = new ArrayList<>();
      List<Double> launched = new ArrayList<>();
      for (long id = ids[0]; id <= ids[1]; id++) {
        Instant committed = p.committedBefore(id, times.get(id).claimed());
        called.add(Harness.ms(committed, launcher.called.get(id)));
        claimed.add(Harness.ms(committed, times.get(id).claimed()));
        launched.add(Harness.ms(committed, times.get(id).launched()));
      }
      report.add(scenario, variant, "builds", called.size(), "");
      report.latency(
          scenario,
          variant,
          "enqueue -> launcher called",
          called,
          Report.Goal.under(5),
          Report.Goal.under(25));
      report.latency(
          scenario,
          variant,
          "enqueue -> claimed",
          claimed,
          Report.Goal.under(2),
          Report.Goal.under(10));
      report.latency(scenario, variant, "enqueue -> launched", launched, null, null);
      breakdown(ids, p, cycles, launcher, scenario, variant, report);
      return Stats.of(claimed).p50();
    }
  }

  /**
   * Where enqueue -> launcher called goes, step by step, each step's p50 and p99 over the builds
   * claimed alone (a cycle that claimed one build): the enqueue's commit ({@link
   * Harness.Producer#committedBefore}: mostly the end of its statement, since the notification
   * arrives before the producer's answer, so this step holds the commit's own flush) to the
   * notification heard (NOTIFY's delivery, the listener's connection and event loop), to the
   * cycle's start on the dispatch thread (the wake-up), to a pooled connection in hand on the
   * client's event loop (the tokens, the hand-over to the event loop), to the answer to BEGIN (sent
   * with the claim lock and fence, the claim and COMMIT: the connection's server process and the
   * event loop woken, the first statement), to the claim's rows (the lock and fence, the claim
   * statement), to the commit's answer (its flush), to the launcher's call (the hand-over to a
   * launch thread).
   */
  static void breakdown(
      long[] ids,
      Harness.Producer p,
      Map<Long, Dispatcher.CycleTimes> cycles,
      TimedLauncher launcher,
      String scenario,
      String variant,
      Report report) {
    String[] steps = {
      "enqueue committed -> notification heard",
      "notification -> cycle started",
      "cycle started -> connection in hand",
      "connection -> BEGIN answered",
      "BEGIN answered -> claim answered",
      "claim answered -> committed",
      "committed -> launcher called"
    };
    List<List<Double>> spans = new ArrayList<>();
    for (int i = 0; i < steps.length; i++) {
      spans.add(new ArrayList<>());
    }
    for (long id = ids[0]; id <= ids[1]; id++) {
      Dispatcher.CycleTimes c = cycles.get(id);
      Long called = launcher.calledNanos.get(id);
      if (c == null || called == null || c.ids().size() != 1) {
        continue;
      }
      Long committed = p.committedNanosBefore(id, c.wokenAt());
      if (committed == null) {
        continue;
      }
      long[] at = {
        committed,
        c.wokenAt(),
        c.startedAt(),
        c.connectedAt(),
        c.begunAt(),
        c.answeredAt(),
        c.committedAt(),
        called
      };
      if (c.wokenAt() < committed) {
        continue; // woken by something else before this build's notification
      }
      for (int i = 0; i < steps.length; i++) {
        spans.get(i).add((at[i + 1] - at[i]) / 1e6);
      }
    }
    for (int i = 0; i < steps.length; i++) {
      List<Double> s = spans.get(i);
      if (s.isEmpty()) {
        continue;
      }
      Stats st = Stats.of(s);
      report.add(scenario, variant, "breakdown: " + steps[i] + " p50", st.p50(), "ms");
      report.add(scenario, variant, "breakdown: " + steps[i] + " p99", st.p99(), "ms");
    }
  }

  /** Enqueues n builds at {@link #RATE} a second; returns the first and last id. */
  static long[] paced(Harness.Producer p, int n) {
    long start = System.nanoTime();
    long first = -1;
    long last = -1;
    for (int i = 0; i < n; i++) {
      Harness.sleepUntil(start + i * 1_000_000_000L / RATE);
      last = p.enqueue();
      if (first < 0) {
        first = last;
      }
    }
    return new long[] {first, last};
  }
}
