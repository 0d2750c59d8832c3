package io.oneshot.build;

import io.vertx.core.Future;
import io.vertx.sqlclient.Pool;
import io.vertx.sqlclient.Row;
import io.vertx.sqlclient.SqlConnection;
import io.vertx.sqlclient.Tuple;
import java.util.ArrayList;
import java.util.List;

/**
 * Builds that queue sources enqueue for jobs waiting elsewhere: the top-up, which keeps as many of
 * a tag set's builds in flight as it has jobs waiting, and the mark a runner leaves when it took a
 * job, after which its build no longer counts as in flight.
 */
public final class SourceStore {
  private static final Sql CLAIM_LOCK = Sql.load("queue/claim-lock");
  private static final Sql TOP_UP = Sql.load("sources/top-up");
  private static final Sql TOOK_JOB = Sql.load("sources/took-job");

  private final Pool pool;

  SourceStore(Pool pool) {
    this.pool = pool;
  }

  /**
   * One tag set's jobs waiting at a source: {@code key} (json) names the tag set for good, {@code
   * route} is where its builds go, {@code tags} and {@code input} (json) are theirs.
   */
  public record Waiting(
      String key, String route, long waiting, String tags, String input, String reason) {}

  /**
   * What a top-up found and did for one tag set: builds in flight before it, builds that ended
   * without a job within the failure hold (counted as in flight), builds it added.
   */
  public record ToppedUp(Waiting waiting, long inFlight, long held, long added) {}

  /**
   * Tops up every tag set of {@code source} in one transaction, under the claim lock and fenced to
   * {@code fence} (null: unfenced, for tests): fails with {@link FencedOutException} and adds
   * nothing when this replica no longer leads.
   */
  public Future<List<ToppedUp>> topUp(
      String source, List<Waiting> sets, java.time.Duration failureHold, LeaderFence fence) {
    Tuple lock =
        Tuple.of(
            AdvisoryLocks.CLASS,
            AdvisoryLocks.CLAIM,
            fence == null ? null : fence.pid(),
            fence == null ? null : fence.sessionStart(),
            (long) AdvisoryLocks.CLASS,
            (long) AdvisoryLocks.LEADER);
    return pool.withTransaction(
        conn ->
            conn.preparedQuery(CLAIM_LOCK.text())
                .execute(lock)
                .compose(
                    x ->
                        x.iterator().next().getBoolean("fenced")
                            ? next(conn, source, sets, failureHold.toMillis(), 0, new ArrayList<>())
                            : Future.failedFuture(new FencedOutException(fence))));
  }

  private static Future<List<ToppedUp>> next(
      SqlConnection conn,
      String source,
      List<Waiting> sets,
      long holdMs,
      int i,
      List<ToppedUp> out) {
    if (i == sets.size()) {
      return Future.succeededFuture(out);
    }
    Waiting w = sets.get(i);
    return conn.preparedQuery(TOP_UP.text())
        .execute(
            Tuple.of(
                source, w.key(), w.route(), w.waiting(), w.tags(), w.input(), w.reason(), holdMs))
        .compose(
            rows -> {
              Row r = rows.iterator().next();
              out.add(
                  new ToppedUp(w, r.getLong("in_flight"), r.getLong("held"), r.getLong("added")));
              return next(conn, source, sets, holdMs, i + 1, out);
            });
  }

  /**
   * Marks that the runner {@code runner} of the current attempt took a job: true when it did now,
   * false when the build is not this runner's running attempt of a source, or was marked before.
   */
  public Future<Boolean> tookJob(long buildId, int attempt, String runner, String what) {
    return pool.preparedQuery(TOOK_JOB.text())
        .execute(Tuple.of(buildId, attempt, runner, what))
        .map(rows -> rows.rowCount() == 1);
  }
}
