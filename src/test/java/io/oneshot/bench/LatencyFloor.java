package io.oneshot.bench;

import io.oneshot.build.Database;
import io.vertx.pgclient.PgConnection;
import io.vertx.sqlclient.PreparedQuery;
import io.vertx.sqlclient.Row;
import io.vertx.sqlclient.RowSet;
import io.vertx.sqlclient.Tuple;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * The latency scenario's floor: what the steps of enqueue -> claimed cost on the same database in
 * the same run, through the same client as the dispatcher's (Vert.x's), with nothing of oneshot's
 * around them. A round trip ({@code SELECT 1}); a one-row insert committed (its WAL flush); a
 * notification sent by one connection and heard by another listening (NOTIFY's commit and delivery:
 * how a dispatcher learns of an enqueue); a bare claim of one row ({@code UPDATE ... WHERE id =
 * (SELECT ... FOR UPDATE SKIP LOCKED)}, committed in the same round trip). The notification and the
 * bare claim together are about the least an event-driven claim can take here; oneshot's claim adds
 * its route limits, leader fence, token and timeline row.
 *
 * <p>The samples go back to back, so this is a lower bound: it leaves out the waking of idle
 * threads on both sides that a claim at low load pays once after an enqueue. Paced as the
 * scenario's builds are (20 a second), each step took two to seven times as long (a round trip 0.69
 * ms p50 against 0.10), and the paced steps summed counted one waking per step, more than a claim
 * pays: that sum came out above the scenario's enqueue -> claimed.
 */
final class LatencyFloor {
  private LatencyFloor() {}

  private static final String CHANNEL = "oneshot_bench_floor";

  /**
   * Reports each step's p50, p99 and max; returns the notification's and bare claim's p50s summed.
   */
  static double measure(boolean smoke, Report report) throws Exception {
    int samples = smoke ? 5 : 400;
    int warmup = smoke ? 1 : 50;
    String variant = "floor: the same database, bare statements";
    report.reference("latency", variant);
    try (BareTable t = new BareTable("oneshot_bench_floor", "oneshot-bench-floor")) {
      PgConnection writer = t.connection;
      PgConnection listener = t.connect();
      List<Double> roundTrip = timed(writer, "SELECT 1", null, warmup, samples);
      String insert = "INSERT INTO " + t.table() + " (claimed) VALUES (true)";
      List<Double> inserted = timed(writer, insert, null, warmup, samples);
      List<Double> notify = notifications(writer, listener, warmup, samples);
      List<Double> claim =
          timed(
              writer,
              "UPDATE "
                  + t.table()
                  + " SET claimed = true WHERE id = (SELECT id FROM "
                  + t.table()
                  + " WHERE NOT claimed ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id",
              // Untimed before each claim: the row it takes.
              "INSERT INTO " + t.table() + " DEFAULT VALUES",
              warmup,
              samples);
      report.latency("latency", variant, "a round trip (SELECT 1)", roundTrip, null, null);
      report.latency("latency", variant, "a one-row insert committed", inserted, null, null);
      report.latency(
          "latency", variant, "a notification, sent -> heard by a listener", notify, null, null);
      report.latency("latency", variant, "a bare claim of one row, committed", claim, null, null);
      double floor = Stats.of(notify).p50() + Stats.of(claim).p50();
      report.add("latency", variant, "notification + bare claim, p50 each, summed", floor, "ms");
      return floor;
    }
  }

  /**
   * Runs {@code sql}, prepared, warmup + samples times, each after {@code before} (untimed, when
   * given); returns each timed run's ms from the call to the answer. A statement that must take a
   * row and takes none fails the measurement.
   */
  private static List<Double> timed(
      PgConnection c, String sql, String before, int warmup, int samples) {
    PreparedQuery<RowSet<Row>> q = c.preparedQuery(sql);
    List<Double> ms = new ArrayList<>();
    for (int i = 0; i < warmup + samples; i++) {
      if (before != null) {
        BareTable.run(c, before);
      }
      long t0 = System.nanoTime();
      RowSet<Row> rows = Database.await(q.execute());
      long took = System.nanoTime() - t0;
      if (before != null && rows.rowCount() != 1) {
        throw new IllegalStateException(sql + ": took " + rows.rowCount() + " rows, not 1");
      }
      if (i >= warmup) {
        ms.add(took / 1e6);
      }
    }
    return ms;
  }

  /**
   * Each sample: one notification sent in a transaction of its own, timed from the send to the
   * moment the listening connection's handler gets it (on its event loop, as the dispatcher's
   * listener does). One at a time: the next is sent once this one was heard.
   */
  private static List<Double> notifications(
      PgConnection writer, PgConnection listener, int warmup, int samples) throws Exception {
    BlockingQueue<long[]> heard = new LinkedBlockingQueue<>();
    listener.notificationHandler(
        n -> heard.add(new long[] {Long.parseLong(n.getPayload()), System.nanoTime()}));
    BareTable.run(listener, "LISTEN " + CHANNEL);
    PreparedQuery<RowSet<Row>> q = writer.preparedQuery("SELECT pg_notify('" + CHANNEL + "', $1)");
    List<Double> ms = new ArrayList<>();
    for (int i = 0; i < warmup + samples; i++) {
      long t0 = System.nanoTime();
      Database.await(q.execute(Tuple.of(Integer.toString(i))));
      long[] got = heard.poll(10, TimeUnit.SECONDS);
      if (got == null || got[0] != i) {
        throw new IllegalStateException("notification " + i + " not heard within 10 s");
      }
      if (i >= warmup) {
        ms.add((got[1] - t0) / 1e6);
      }
    }
    return ms;
  }
}
