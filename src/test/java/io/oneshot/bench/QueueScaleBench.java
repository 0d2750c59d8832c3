package io.oneshot.bench;

import io.oneshot.build.BuildStore;
import io.oneshot.build.BuildToken;
import io.oneshot.build.Database;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestDatabase;
import io.vertx.core.Vertx;
import java.util.ArrayList;
import java.util.List;

/**
 * Claim latency as the queue grows: the claim statement (lock, fence check, claim, commit) timed
 * alone with 1,000, 100,000 and 1,000,000 pending builds. Between claims (untimed) the claimed
 * builds finish and as many new ones arrive: the queue keeps its size and churns as a real one.
 */
final class QueueScaleBench implements Scenario {
  @Override
  public String name() {
    return "queue-scale";
  }

  @Override
  public String describe() {
    return "claim latency with 1,000, 100,000 and 1,000,000 builds pending";
  }

  @Override
  public void run(boolean smoke, Report report) throws Exception {
    int[] sizes = smoke ? new int[] {1_000, 2_000} : new int[] {1_000, 100_000, 1_000_000};
    int samples = smoke ? 10 : 300;
    Vertx vertx = Vertx.vertx();
    double firstP50 = 0;
    double lastP50 = 0;
    try (Database db = Database.open(vertx, TestDatabase.url(), 2, "oneshot-bench")) {
      BuildStore store = new BuildStore(db.pool());
      for (int size : sizes) {
        fill(size);
        List<Double> one = claims(store, 1, samples);
        List<Double> batch = claims(store, 100, samples / 10);
        String variant = String.format("%,d pending", size);
        if (size == sizes[0]) {
          // The smallest queue is what the larger ones are read against.
          report.reference("queue-scale", variant);
        }
        report.latency("queue-scale", variant, "claim of 1", one, null, null);
        report.latency("queue-scale", variant, "claim of 100", batch, null, null);
        double p50 = Stats.of(one).p50();
        if (size == sizes[0]) {
          firstP50 = p50;
        }
        lastP50 = p50;
      }
    } finally {
      Database.await(vertx.close());
    }
    report.add(
        "queue-scale",
        String.format("%,d vs %,d pending", sizes[sizes.length - 1], sizes[0]),
        "claim of 1, p50 ratio",
        lastP50 / firstP50,
        "×",
        Report.Goal.under(2));
    report.note(
        "queue-scale: the claim reads the partial index builds_pending (route, priority DESC, id)"
            + " WHERE status = 'pending', so its cost follows the builds it takes, not the queue;"
            + " the table is vacuumed and analyzed after the bulk load, as autovacuum would. The"
            + " dispatcher's connections run with jit = off: with JIT on, the planner's estimate for"
            + " a claim over 100,000 pending crosses jit_above_cost and compiling it took ~500 ms.");
  }

  /** Empties the queue and loads {@code n} pending builds on route bench, in chunks. */
  private static void fill(int n) {
    Sql.reset();
    Sql.exec(
        "INSERT INTO oneshot.routes (name, position, tags, max_concurrent, max_attempts,"
            + " timeout_ms, cancel_grace_ms) VALUES ('bench', 0, '{}', 100000, 3, 3600000, 10000)");
    int chunk = 100_000;
    for (int done = 0; done < n; done += chunk) {
      Sql.exec(
          "INSERT INTO oneshot.builds (route, tags, input) SELECT 'bench', '{}', ?::jsonb"
              + " FROM generate_series(1, ?)",
          Harness.SCRIPT_INPUT,
          Math.min(chunk, n - done));
      if (n > chunk) {
        System.out.printf("   loaded %,d of %,d pending builds%n", Math.min(done + chunk, n), n);
      }
    }
    Sql.exec("VACUUM ANALYZE oneshot.builds");
  }

  private static List<Double> claims(BuildStore store, int batch, int samples) {
    List<Double> ms = new ArrayList<>();
    int warmup = Math.max(3, samples / 10);
    for (int i = 0; i < warmup + samples; i++) {
      List<BuildToken> tokens = new ArrayList<>(batch);
      for (int j = 0; j < batch; j++) {
        tokens.add(BuildToken.generate());
      }
      long t0 = System.nanoTime();
      int claimed = Database.await(store.queue().claim(100_000, "noop", tokens)).size();
      double took = (System.nanoTime() - t0) / 1e6;
      if (claimed != batch) {
        throw new IllegalStateException("claimed " + claimed + " of " + batch);
      }
      if (i >= warmup) {
        ms.add(took);
      }
      // Untimed: the claimed builds run and succeed, and as many new ones arrive.
      Sql.exec(
          "UPDATE oneshot.builds SET status = 'running', started_at = now(), runner_id = 'bench-runner'"
              + " WHERE status = 'launching';"
              + " UPDATE oneshot.builds SET status = 'succeeded', finished_at = now()"
              + " WHERE status = 'running';"
              + " INSERT INTO oneshot.builds (route, tags, input)"
              + " SELECT 'bench', '{}', '"
              + Harness.SCRIPT_INPUT
              + "'::jsonb FROM generate_series(1, "
              + batch
              + ")");
    }
    return ms;
  }
}
