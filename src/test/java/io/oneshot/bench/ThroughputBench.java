package io.oneshot.bench;

import io.oneshot.testing.NoopLauncher;
import io.oneshot.testing.TestServer;

/**
 * Throughput: a burst enqueued in one statement, measured from its commit to the last launch
 * recorded. No route limit holds it back; the dispatcher and its launcher are all that is measured.
 * The Kubernetes launcher's bursts are {@link LaunchBench}'s.
 */
final class ThroughputBench implements Scenario {
  /** Bursts of 10,000 dispatched before the one measured. */
  private static final int WARM_UP_BURSTS = 3;

  @Override
  public String name() {
    return "throughput";
  }

  @Override
  public String describe() {
    return "a burst of 10,000 builds through the no-op launcher: dispatched (launch recorded) per second";
  }

  @Override
  public void run(boolean smoke, Report report) throws Exception {
    TimedLauncher noop = new TimedLauncher(new NoopLauncher(false));
    try (TestServer t = Setups.noop(noop).start()) {
      // Measured in a JVM that has dispatched before, as a dispatcher has: the first bursts of a
      // fresh one run while the JIT compiles the claim's and the launch record's paths.
      for (int round = 0; !smoke && round < WARM_UP_BURSTS; round++) {
        Harness.burstSeconds(t, 10_000);
      }
      burst(
          t,
          "no-op launcher, claimBatch " + Setups.CLAIM_BATCH,
          smoke ? 200 : 10_000,
          Report.Goal.atLeast(5_000),
          report);
    }
  }

  static void burst(TestServer t, String variant, int n, Report.Goal goal, Report report) {
    double seconds = Harness.burstSeconds(t, n);
    report.add("throughput", variant, "builds", n, "");
    report.add("throughput", variant, "burst dispatched in", seconds, "s");
    report.add("throughput", variant, "dispatched per second", n / seconds, "builds/s", goal);
  }
}
