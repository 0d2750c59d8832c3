package io.oneshot.build;

import io.vertx.core.Future;
import io.vertx.core.buffer.Buffer;
import io.vertx.pgclient.PgException;
import io.vertx.sqlclient.Pool;
import io.vertx.sqlclient.Row;
import io.vertx.sqlclient.Tuple;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

/**
 * The queue: builds come in (enqueue), are handed to the dispatcher (claim) and can be called off
 * (cancel). Each state change is one compare-and-set statement on the build's current status; zero
 * rows updated means another actor got there first, which callers treat as a lost race.
 */
public final class QueueStore {
  private static final Sql ENQUEUE = Sql.load("queue/enqueue");
  private static final Sql RERUN_SOURCE = Sql.load("queue/rerun-source");
  private static final Sql RERUN_LINK = Sql.load("queue/rerun-link");
  private static final Sql CLAIM = Sql.load("queue/claim");
  private static final Sql CANCEL = Sql.load("queue/cancel");
  private static final Sql CANCEL_NOTIFY = Sql.load("queue/cancel-notify");

  private final Pool pool;

  public QueueStore(Pool pool) {
    this.pool = pool;
  }

  /** The result of an enqueue: the new build's id, status and bound route. */
  public record Enqueued(long id, BuildState status, String route) {}

  /**
   * Enqueues through {@code oneshot.enqueue()}, the same function SQL producers call, so that every
   * producer gets one validation. Fails with {@link InvalidBuildException} for a refused build.
   */
  public Future<Enqueued> enqueue(
      String tagsJson, String inputJson, int priority, String workspace) {
    return pool.preparedQuery(ENQUEUE.text())
        .execute(Tuple.of(tagsJson, inputJson, priority, workspace))
        .map(rows -> enqueued(rows.iterator().next()))
        .recover(e -> Future.failedFuture(translate(e)));
  }

  /** The new build, as queue/enqueue answers it. */
  private static Enqueued enqueued(Row r) {
    return new Enqueued(
        r.getLong("id"), BuildState.ofWire(r.getString("status")), r.getString("route"));
  }

  /**
   * What a rerun did: {@code build} is the new build (when {@code result} is {@code ENQUEUED}),
   * {@code original} the status of the build asked for.
   */
  public record Rerun(RerunResult result, Enqueued build, BuildState original) {}

  /** What a rerun did. */
  public enum RerunResult {
    /** A new build with the original's input, tags, priority and workspace is queued. */
    ENQUEUED,
    /** The original has not finished: a rerun would run it twice at once. */
    NOT_FINISHED,
    NOT_FOUND
  }

  /**
   * Enqueues a new build with the input, tags, priority and workspace of finished build {@code id},
   * linked to it ({@code rerun_of}), through {@code oneshot.enqueue()}: it is routed by today's
   * routes and checked against today's limits, and fails with {@link InvalidBuildException} as a
   * submit would.
   */
  public Future<Rerun> rerun(long id) {
    return pool.withTransaction(
            conn ->
                conn.preparedQuery(RERUN_SOURCE.text())
                    .execute(Tuple.of(id))
                    .compose(
                        rows -> {
                          if (rows.rowCount() == 0) {
                            return Future.succeededFuture(
                                new Rerun(RerunResult.NOT_FOUND, null, null));
                          }
                          Row o = rows.iterator().next();
                          BuildState was = BuildState.ofWire(o.getString("status"));
                          if (!was.terminal()) {
                            return Future.succeededFuture(
                                new Rerun(RerunResult.NOT_FINISHED, null, was));
                          }
                          return conn.preparedQuery(ENQUEUE.text())
                              .execute(
                                  Tuple.of(
                                      o.getString("tags"),
                                      o.getString("input"),
                                      o.getInteger("priority"),
                                      o.getString("workspace")))
                              .compose(
                                  e -> {
                                    Row r = e.iterator().next();
                                    Enqueued made =
                                        new Enqueued(
                                            r.getLong("id"),
                                            BuildState.ofWire(r.getString("status")),
                                            r.getString("route"));
                                    return conn.preparedQuery(RERUN_LINK.text())
                                        .execute(Tuple.of(made.id(), id))
                                        .map(x -> new Rerun(RerunResult.ENQUEUED, made, was));
                                  });
                        }))
        .recover(e -> Future.failedFuture(translate(e)));
  }

  /**
   * Turns the validation error of {@code oneshot.enqueue()} into an {@link InvalidBuildException}.
   */
  public static Throwable translate(Throwable e) {
    if (e instanceof PgException pg && "OS400".equals(pg.getSqlState())) {
      String hint = pg.getHint();
      return new InvalidBuildException(
          pg.getColumn(), pg.getErrorMessage(), hint == null || hint.isEmpty() ? null : hint);
    }
    return e;
  }

  /**
   * A build the dispatcher claimed: it is {@code launching} and owes a launch. {@code waitSeconds}:
   * how long since it was enqueued.
   */
  public record Claimed(
      long id,
      int attempt,
      String route,
      String launchName,
      BuildToken token,
      double waitSeconds) {}

  /**
   * Claims up to {@code tokens.size()} builds, all limits holding, in one transaction that commits
   * before any launch. Each claimed build gets one of the given tokens (by hash). {@code
   * beforeCommit} sees the claimed builds while the transaction is still open, so that the caller
   * can register them before anyone else can see them claimed; if the commit then fails, the
   * returned future fails and nothing was claimed. With a {@code fence}, the claim commits only
   * while that leadership session holds the leader lock; otherwise it fails with {@link
   * FencedOutException} and claims nothing.
   */
  public Future<List<Claimed>> claim(
      int globalLimit,
      String launchKind,
      List<BuildToken> tokens,
      LeaderFence fence,
      Consumer<List<Claimed>> beforeCommit) {
    Buffer[] hashes = tokens.stream().map(t -> Buffer.buffer(t.hash())).toArray(Buffer[]::new);
    return pool.withTransaction(
        conn ->
            AdvisoryLocks.takeFenced(conn, AdvisoryLocks.CLAIM, fence)
                .compose(
                    x ->
                        conn.preparedQuery(CLAIM.with(Map.of("batch", tokens.size())))
                            .execute(Tuple.of(globalLimit, hashes, launchKind))
                            .map(
                                rows -> {
                                  List<Claimed> out = new ArrayList<>(rows.rowCount());
                                  for (Row r : rows) {
                                    out.add(
                                        new Claimed(
                                            r.getLong("id"),
                                            r.getInteger("attempt"),
                                            r.getString("route"),
                                            r.getString("launch_name"),
                                            tokens.get(r.getInteger("n") - 1),
                                            r.getDouble("wait")));
                                  }
                                  beforeCommit.accept(out);
                                  return out;
                                })));
  }

  /**
   * {@link #claim(int, String, List, LeaderFence, Consumer)} without a fence, for callers with
   * nothing to register (tests).
   */
  public Future<List<Claimed>> claim(int globalLimit, String launchKind, List<BuildToken> tokens) {
    return claim(globalLimit, launchKind, tokens, null, c -> {});
  }

  /** What a cancel did, and the build's route. */
  public record Canceled(CancelResult result, String route) {}

  /** What a cancel did. */
  public enum CancelResult {
    /** The build was pending or launching and is canceled now. */
    CANCELED,
    /** The build is running; provisionerd will stop it and report. */
    REQUESTED,
    /** The build had already finished. */
    ALREADY_FINISHED,
    NOT_FOUND
  }

  /**
   * Cancels a build: at once when it is pending or launching (the dispatcher then removes the
   * attempt), by request when it runs (provisionerd learns it on its next heartbeat). Notifies
   * {@code oneshot_cancel} with the build id so the dispatcher acts without waiting for a tick.
   */
  public Future<Canceled> cancel(long id) {
    return pool.withTransaction(
        conn ->
            conn.preparedQuery(CANCEL.text())
                .execute(Tuple.of(id))
                .compose(
                    rows -> {
                      if (rows.rowCount() == 0) {
                        return Future.succeededFuture(new Canceled(CancelResult.NOT_FOUND, null));
                      }
                      Row r = rows.iterator().next();
                      String route = r.getString("route");
                      BuildState was = BuildState.ofWire(r.getString("status"));
                      if (was.terminal()) {
                        return Future.succeededFuture(
                            new Canceled(CancelResult.ALREADY_FINISHED, route));
                      }
                      Canceled result =
                          new Canceled(
                              was == BuildState.RUNNING
                                  ? CancelResult.REQUESTED
                                  : CancelResult.CANCELED,
                              route);
                      if (was == BuildState.PENDING) {
                        return Future.succeededFuture(result);
                      }
                      return conn.preparedQuery(CANCEL_NOTIFY.text())
                          .execute(Tuple.of(Long.toString(id)))
                          .map(x -> result);
                    }));
  }
}
