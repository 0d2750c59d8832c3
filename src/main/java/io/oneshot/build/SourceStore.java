package io.oneshot.build;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.api.Json;
import io.vertx.core.Future;
import io.vertx.sqlclient.Pool;
import io.vertx.sqlclient.Row;
import io.vertx.sqlclient.SqlConnection;
import io.vertx.sqlclient.Tuple;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Builds that queue sources enqueue for jobs waiting elsewhere: the top-up, which keeps as many of
 * a tag set's builds in flight as it has jobs waiting, and the mark a runner leaves when it took a
 * job, after which its build no longer counts as in flight.
 */
public final class SourceStore {
  private static final Sql IN_FLIGHT = Sql.load("sources/in-flight");
  private static final Sql TOP_UP = Sql.load("sources/top-up");
  private static final Sql TOOK_JOB = Sql.load("sources/took-job");
  private static final Sql UNMARKED = Sql.load("sources/unmarked");
  private static final Sql MARK_TAKEN = Sql.load("sources/mark-taken");

  private final Pool pool;

  SourceStore(Pool pool) {
    this.pool = pool;
  }

  /**
   * One tag set's jobs waiting at a source: {@code key} (json) names the tag set for good, {@code
   * route} is where its builds go, {@code tags} and {@code input} (json) are theirs; {@code
   * counted} are the builds that already count for them ({@link Flight#counted}).
   */
  public record Waiting(
      String key,
      String route,
      long waiting,
      long counted,
      String tags,
      String input,
      String reason) {}

  /**
   * A tag set's builds that still count for its jobs: in flight (pending, launching, or running
   * without a job yet), and ended without a job within the failure hold.
   */
  public record Flight(long inFlight, long held) {
    public static final Flight NONE = new Flight(0, 0);

    public long counted() {
      return inFlight + held;
    }
  }

  /** What a top-up did for one tag set: the builds it added. */
  public record ToppedUp(Waiting waiting, long added) {}

  /**
   * One top-up of {@code source}, in one transaction under the sources lock, fenced to {@code
   * fence} (null: unfenced, for tests): reads what counts per tag set (keyed by the tag set's key
   * as json), has {@code look} read the source's waiting jobs, and adds the difference. It fails
   * with {@link FencedOutException} and adds nothing when this replica no longer leads. The counts
   * are read before the source is, so that a build taking its job in between errs the count low.
   */
  public Future<List<ToppedUp>> topUp(
      String source,
      java.time.Duration failureHold,
      LeaderFence fence,
      java.util.function.Function<Map<JsonNode, Flight>, Future<List<Waiting>>> look) {
    return pool.withTransaction(
        conn ->
            AdvisoryLocks.takeFenced(conn, AdvisoryLocks.SOURCES, fence)
                .compose(
                    x ->
                        conn.preparedQuery(IN_FLIGHT.text())
                            .execute(Tuple.of(source, failureHold.toMillis())))
                .compose(
                    rows -> {
                      Map<JsonNode, Flight> flights = new HashMap<>();
                      for (Row r : rows) {
                        flights.put(
                            Json.tree(r.getString("key")),
                            new Flight(r.getLong("in_flight"), r.getLong("held")));
                      }
                      return look.apply(flights);
                    })
                .compose(sets -> next(conn, source, sets, 0, new ArrayList<>())));
  }

  private static Future<List<ToppedUp>> next(
      SqlConnection conn, String source, List<Waiting> sets, int i, List<ToppedUp> out) {
    if (i == sets.size()) {
      return Future.succeededFuture(out);
    }
    Waiting w = sets.get(i);
    return conn.preparedQuery(TOP_UP.text())
        .execute(
            Tuple.from(
                List.of(
                    source,
                    w.key(),
                    w.route(),
                    w.waiting(),
                    w.tags(),
                    w.input(),
                    w.reason(),
                    w.counted())))
        .compose(
            rows -> {
              out.add(new ToppedUp(w, rows.iterator().next().getLong("added")));
              return next(conn, source, sets, i + 1, out);
            });
  }

  /** A running build of a source not yet marked as having taken a job. */
  public record Unmarked(long id, int attempt, String organization) {}

  /** The source's running builds not yet marked as having taken a job. */
  public Future<java.util.List<Unmarked>> unmarked(String source) {
    return pool.preparedQuery(UNMARKED.text())
        .execute(Tuple.of(source))
        .map(
            rows -> {
              java.util.List<Unmarked> out = new java.util.ArrayList<>();
              rows.forEach(
                  r ->
                      out.add(
                          new Unmarked(
                              r.getLong("id"),
                              r.getInteger("attempt"),
                              r.getString("organization"))));
              return out;
            });
  }

  /** Marks a running build as having taken a job, as its source says; true when it was marked. */
  public Future<Boolean> markTaken(long id, int attempt, String what) {
    return pool.preparedQuery(MARK_TAKEN.text())
        .execute(Tuple.of(id, attempt, what))
        .map(rows -> rows.iterator().next().getLong("marked") == 1);
  }

  /**
   * Marks that the runner {@code runner} holding the attempt of {@code tokenHash} took a job: empty
   * when that is not this runner's running attempt; else whether it was marked now (false: marked
   * before, or the build is not a source's).
   */
  public Future<java.util.Optional<Boolean>> tookJob(byte[] tokenHash, String runner, String what) {
    return pool.preparedQuery(TOOK_JOB.text())
        .execute(Tuple.of(io.vertx.core.buffer.Buffer.buffer(tokenHash), runner, what))
        .map(
            rows ->
                rows.rowCount() == 0
                    ? java.util.Optional.<Boolean>empty()
                    : java.util.Optional.of(rows.iterator().next().getLong("marked") == 1));
  }
}
