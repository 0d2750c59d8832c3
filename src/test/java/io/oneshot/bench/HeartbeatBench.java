package io.oneshot.bench;

import io.oneshot.testing.NoopLauncher;
import io.oneshot.testing.TestServer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Map;

/**
 * Runners' heartbeats while many builds run: every build's runner heartbeats once a second, as
 * provisionerd does, over the runner API. What one costs PostgreSQL and how long it waits, from the
 * end of the first round to the start of the last (nothing but heartbeats in between: acquires
 * before, completions after).
 */
final class HeartbeatBench implements Scenario {
  private static final int ROUNDS = 10;

  @Override
  public String name() {
    return "heartbeat";
  }

  @Override
  public String describe() {
    return "2,000 builds running, each heartbeating once a second: PostgreSQL's CPU a heartbeat,"
        + " latency";
  }

  @Override
  public void run(boolean smoke, Report report) throws Exception {
    int n = smoke ? 50 : 2_000;
    int rounds = smoke ? 3 : ROUNDS;
    String variant = n + " builds running, a heartbeat a second each, over HTTP";
    NoopLauncher launcher = new NoopLauncher().heartbeats(rounds, Duration.ofSeconds(1));
    try (TestServer t =
            TestServer.with()
                .routes("routes: [{name: beat, maxConcurrent: " + n + "}]")
                .dispatch("pollInterval: 2s, rescueInterval: 5s, maxConcurrent: " + n)
                .launcher(launcher)
                .start();
        Harness.Producer p = new Harness.Producer()) {
      Harness.awaitLeader(t);
      long[] ids = p.burst(n);
      Harness.await(
          "the first round of heartbeats",
          Duration.ofMinutes(2),
          () -> launcher.heartbeatsAnswered.get() >= n);
      int from = launcher.heartbeatsAnswered.get();
      launcher.heartbeatMs.clear();
      CpuMeter cpu = CpuMeter.start();
      long t0 = System.nanoTime();
      Harness.await(
          "all but the last round of heartbeats",
          Duration.ofMinutes(5),
          () -> launcher.heartbeatsAnswered.get() >= n * (rounds - 1));
      CpuMeter.Used used = cpu.stop(Map.of());
      double seconds = (System.nanoTime() - t0) / 1e9;
      int beats = launcher.heartbeatsAnswered.get() - from;
      Harness.awaitBuilds(ids, "status = 'succeeded'", Duration.ofMinutes(2));
      report.add("heartbeat", variant, "heartbeats measured", beats, "");
      report.add("heartbeat", variant, "heartbeats per second", beats / seconds, "/s");
      if (used.postgresMs() >= 0) {
        report.add(
            "heartbeat", variant, "CPU a heartbeat: PostgreSQL", used.postgresMs() / beats, "ms");
      }
      report.add("heartbeat", variant, "CPU a heartbeat: this JVM", used.jvmMs() / beats, "ms");
      report.latency(
          "heartbeat",
          variant,
          "heartbeat, request to answer",
          new ArrayList<>(launcher.heartbeatMs),
          null,
          null);
    }
  }
}
