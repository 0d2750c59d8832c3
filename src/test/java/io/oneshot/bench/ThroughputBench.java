package io.oneshot.bench;

import io.oneshot.build.Database;
import io.oneshot.testing.NoopLauncher;
import io.oneshot.testing.TestServer;
import io.vertx.sqlclient.PreparedQuery;
import io.vertx.sqlclient.Row;
import io.vertx.sqlclient.RowSet;
import io.vertx.sqlclient.Tuple;

/**
 * Throughput: a burst enqueued in one statement, measured from its commit to the last launch
 * recorded. No route limit holds it back; the dispatcher and its launcher are all that is measured.
 * The Kubernetes launcher's bursts are {@link LaunchBench}'s. Its ceiling, in the same run on the
 * same database: the same number of rows claimed by bare {@code SKIP LOCKED} statements of the same
 * batch size, each committed, through the dispatcher's client (what a claim cannot do without;
 * oneshot's also checks route limits and the leader fence, gives each build a token and a timeline
 * row, and records each launch).
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
    int n = smoke ? 200 : 10_000;
    double rate;
    try (TestServer t = Setups.noop(noop).start()) {
      // Measured in a JVM that has dispatched before, as a dispatcher has: the first bursts of a
      // fresh one run while the JIT compiles the claim's and the launch record's paths.
      for (int round = 0; !smoke && round < WARM_UP_BURSTS; round++) {
        Harness.burstSeconds(t, 10_000);
      }
      rate =
          burst(
              t,
              "no-op launcher, claimBatch " + Setups.CLAIM_BATCH,
              n,
              Report.Goal.atLeast(5_000),
              report);
    }
    // With the dispatcher gone, as the burst had the database to itself.
    String ceiling =
        "ceiling: the same database, bare claims of " + Setups.CLAIM_BATCH + " a statement";
    report.reference("throughput", ceiling);
    double bare = bareClaims(n, Setups.CLAIM_BATCH, smoke ? 0 : WARM_UP_BURSTS);
    report.add("throughput", ceiling, "rows claimed per second", bare, "rows/s");
    report.add(
        "throughput",
        "oneshot ÷ its ceiling",
        "dispatched per second ÷ bare claims per second",
        rate / bare,
        "×");
  }

  /**
   * Rows claimed per second when {@code n} rows are claimed {@code batch} at a time by a bare
   * statement, each committed on its own, after {@code warmUps} such drains unmeasured.
   */
  static double bareClaims(int n, int batch, int warmUps) {
    try (BareTable t = new BareTable("oneshot_bench_ceiling", "oneshot-bench-ceiling")) {
      PreparedQuery<RowSet<Row>> claim =
          t.connection.preparedQuery(
              "UPDATE "
                  + t.table()
                  + " SET claimed = true WHERE id IN (SELECT id FROM "
                  + t.table()
                  + " WHERE NOT claimed ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED) RETURNING id");
      double rate = 0;
      for (int round = 0; round <= warmUps; round++) {
        BareTable.run(
            t.connection,
            "INSERT INTO "
                + t.table()
                + " (claimed) SELECT false FROM generate_series(1, "
                + n
                + ")");
        long t0 = System.nanoTime();
        int claimed = 0;
        int got;
        while ((got = Database.await(claim.execute(Tuple.of(batch))).rowCount()) > 0) {
          claimed += got;
        }
        long took = System.nanoTime() - t0;
        if (claimed != n) {
          throw new IllegalStateException("bare claims took " + claimed + " rows of " + n);
        }
        rate = n / (took / 1e9);
      }
      return rate;
    }
  }

  /** Dispatches a burst of {@code n}; returns builds dispatched per second. */
  static double burst(TestServer t, String variant, int n, Report.Goal goal, Report report) {
    double seconds = Harness.burstSeconds(t, n);
    report.add("throughput", variant, "builds", n, "");
    report.add("throughput", variant, "burst dispatched in", seconds, "s");
    report.add("throughput", variant, "dispatched per second", n / seconds, "builds/s", goal);
    return n / seconds;
  }
}
