package io.oneshot.build;

import io.oneshot.api.Json;
import io.vertx.core.Future;
import io.vertx.core.buffer.Buffer;
import io.vertx.pgclient.PgException;
import io.vertx.sqlclient.Pool;
import io.vertx.sqlclient.Row;
import io.vertx.sqlclient.SqlConnection;
import io.vertx.sqlclient.Tuple;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The queue: builds come in (enqueue), are handed to the dispatcher (claim) and can be called off
 * (cancel). Each state change is one compare-and-set statement on the build's current status; zero
 * rows updated means another actor got there first, which callers treat as a lost race.
 */
public final class QueueStore {
  private static final Sql ENQUEUE = Sql.load("queue/enqueue");

  /**
   * The claim's lock ({@link AdvisoryLocks#takeFenced}), loaded with the store so that {@link
   * Sql#checkAll} parses it at start: {@code AdvisoryLocks} itself is first initialized by the
   * first claim, its other members being constants.
   */
  @SuppressWarnings("unused")
  private static final Sql CLAIM_LOCK = Sql.load("queue/claim-lock");

  private static final Sql RERUN_SOURCE = Sql.load("queue/rerun-source");
  private static final Sql RERUN_LINK = Sql.load("queue/rerun-link");
  private static final Sql CLAIM = Sql.load("queue/claim");

  /**
   * How a claim's transaction begins: without bitmap scans, hash joins or merge joins, so that the
   * claim reaches builds by index, one by one, whatever the statistics say and however the table
   * grew since its plan was made.
   *
   * <ul>
   *   <li>The claim counts the live builds through builds_live; read by bitmap, as the planner
   *       chose whenever the statistics predated a burst, no index entry is ever marked dead, so
   *       every claim visited the heap for every version left since the last vacuum (2,400 entries
   *       for 50 live builds in the drain, a quarter of the claim's time). A plain index scan marks
   *       the dead entries it meets and the next claim skips them. (Which scan the planner picks
   *       turns on statistics a test could not pin down; the drain in scripts/bench shows it.)
   *   <li>A connection keeps the plan it made for the claim while the table was small (a new
   *       install, the first claims after a quiet night): joined by hash to a scan of the whole
   *       table, every claim then read every build (StalePlanTest).
   *   <li>With the plan the connection keeps for every claim (a generic plan): planning the claim,
   *       a statement of a dozen steps, costs more than running it. PostgreSQL chooses between a
   *       plan made for each call's values and a kept one by their estimated costs, and with 49
   *       routes at their limits over 1,000,000 queued builds it planned every claim anew: prepared
   *       in psql over that queue, 30 runs each, 3.4 ms a claim planned each time and 1.2 ms with
   *       the kept plan (scripts/bench --only fair-share: enqueue -> claimed went from 2.5 ms to
   *       ...). The claim's plan does not turn on its parameters' values (the limits and shares are
   *       read from the tables), and StalePlanTest checks both kinds of plan.
   * </ul>
   */
  static final String CLAIM_BEGIN =
      "BEGIN; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_hashjoin = off;"
          + " SET LOCAL enable_mergejoin = off; SET LOCAL plan_cache_mode = force_generic_plan";

  private static final Sql CANCEL = Sql.load("queue/cancel");
  private static final Sql CANCEL_NOTIFY = Sql.load("queue/cancel-notify");
  private static final Sql SUBMITTED = Sql.load("queue/submitted");

  private final Pool pool;
  private final Sealer sealer;

  public QueueStore(Pool pool, Sealer sealer) {
    this.pool = pool;
    this.sealer = sealer;
  }

  /** The result of an enqueue: the new build's id, status and bound route. */
  public record Enqueued(
      long id,
      BuildState status,
      String route,
      @com.fasterxml.jackson.annotation.JsonInclude(
              com.fasterxml.jackson.annotation.JsonInclude.Include.NON_EMPTY)
          List<String> notes) {
    public Enqueued(long id, BuildState status, String route) {
      this(id, status, route, List.of());
    }
  }

  /**
   * Who submits through the API: {@code actor} (a token's name, or {@code admin}) and its token's
   * id (null for the admin token); {@code routes}, the routes it may submit to (null: all).
   */
  public record Submitter(String actor, Long tokenId, Set<String> routes) {
    public static final Submitter ADMIN = new Submitter("admin", null, null);
  }

  /** A submit the submitter's scope does not allow; nothing was written. */
  public static final class OutOfScopeException extends RuntimeException {
    private final String field;

    OutOfScopeException(String field, String message) {
      super(message);
      this.field = field;
    }

    /** {@code tags}: no route of the scope takes them. */
    public String field() {
      return field;
    }
  }

  /**
   * Enqueues through {@code oneshot.enqueue()}, the same function SQL producers call, so that every
   * producer gets one validation. Fails with {@link InvalidBuildException} for a refused build.
   */
  public Future<Enqueued> enqueue(
      String tagsJson, String inputJson, int priority, String workspace) {
    return enqueue(tagsJson, inputJson, priority, workspace, Submitter.ADMIN);
  }

  /**
   * An API submit: enqueues through {@code oneshot.enqueue()} with the input's sensitive values
   * masked, then, in the same transaction, refuses a route outside {@code by}'s scope ({@link
   * OutOfScopeException}, nothing written), stores the values sealed, notes the submitter and
   * appends to the audit trail.
   */
  public Future<Enqueued> enqueue(
      String tagsJson, String inputJson, int priority, String workspace, Submitter by) {
    Sensitive.Split split = Sensitive.split(Json.tree(inputJson));
    if (split.values() != null && !sealer.enabled()) {
      return Future.failedFuture(noKeys());
    }
    String input = split.values() == null ? inputJson : Json.write(split.input());
    return pool.withTransaction(
            conn ->
                conn.preparedQuery(ENQUEUE.text())
                    .execute(Tuple.of(tagsJson, input, priority, workspace))
                    .compose(
                        rows ->
                            submitted(
                                conn,
                                enqueued(rows.iterator().next()),
                                split.values(),
                                by,
                                "submit",
                                null)))
        .recover(e -> Future.failedFuture(translate(e)));
  }

  private static InvalidBuildException noKeys() {
    return new InvalidBuildException(
        "input.sensitive",
        "input.sensitive: this dispatcher has no encryption keys to keep the values sealed",
        "set encryption.keys (or ONESHOT_ENCRYPTION_KEYS) in the dispatcher's configuration");
  }

  /**
   * The steps of a submit after {@code oneshot.enqueue()}, in its transaction: the scope check, the
   * submitter and sealed values, the audit entry. A workspace needs no check of its own: it is the
   * route's (db/016_workspaces_by_route.sql), so a name another team uses is another workspace.
   */
  private Future<Enqueued> submitted(
      SqlConnection conn,
      Enqueued made,
      String values,
      Submitter by,
      String action,
      com.fasterxml.jackson.databind.JsonNode detail) {
    if (by.routes() != null && !by.routes().contains(made.route())) {
      return Future.failedFuture(
          new OutOfScopeException("tags", "no route this token covers takes these tags"));
    }
    return conn.preparedQuery(SUBMITTED.text())
        .execute(
            Tuple.tuple()
                .addLong(made.id())
                .addString(by.actor())
                .addLong(by.tokenId())
                .addString(sealer.seal(values, Sealer.sensitive(made.id())))
                .addString(action)
                .addString(detail == null ? null : Json.write(detail)))
        .map(made);
  }

  /**
   * The new build, as queue/enqueue answers it: with what was changed of what it asked for (a size
   * over its route's maximum clamped to it), which db/018_pod_settings.sql puts in its first
   * reason.
   */
  private static Enqueued enqueued(Row r) {
    String reason = r.getString("reason");
    List<String> notes =
        reason != null && reason.startsWith("enqueued; ")
            ? List.of(reason.substring("enqueued; ".length()).split("; "))
            : List.of();
    return new Enqueued(
        r.getLong("id"), BuildState.ofWire(r.getString("status")), r.getString("route"), notes);
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

  public Future<Rerun> rerun(long id) {
    return rerun(id, Submitter.ADMIN);
  }

  /**
   * Enqueues a new build with the input, tags, priority, workspace and sensitive values of finished
   * build {@code id}, linked to it ({@code rerun_of}), through {@code oneshot.enqueue()}: it is
   * routed by today's routes and checked against today's limits and {@code by}'s scope, and fails
   * as a submit would.
   */
  public Future<Rerun> rerun(long id, Submitter by) {
    return rerun(id, by, null);
  }

  /**
   * {@link #rerun(long, Submitter)} with its pod settings changed by {@code podOverride} (JSON, or
   * null): each resource it names replaces that resource of the original's, any other setting
   * replaces the setting; the result is held to the route's rules as a submit's.
   */
  public Future<Rerun> rerun(long id, Submitter by, String podOverride) {
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
                          String values = sealer.open(o.getString("sealed"), Sealer.sensitive(id));
                          if (values != null && !sealer.enabled()) {
                            return Future.failedFuture(noKeys());
                          }
                          return conn.preparedQuery(ENQUEUE.text())
                              .execute(
                                  Tuple.of(
                                      o.getString("tags"),
                                      withPod(o.getString("input"), podOverride),
                                      o.getInteger("priority"),
                                      o.getString("workspace")))
                              .compose(
                                  e ->
                                      submitted(
                                          conn,
                                          enqueued(e.iterator().next()),
                                          values,
                                          by,
                                          "rerun",
                                          Json.MAPPER.createObjectNode().put("rerunOf", id)))
                              .compose(
                                  made ->
                                      conn.preparedQuery(RERUN_LINK.text())
                                          .execute(Tuple.of(made.id(), id))
                                          .map(x -> new Rerun(RerunResult.ENQUEUED, made, was)));
                        }))
        .recover(e -> Future.failedFuture(translate(e)));
  }

  /** A build's input with its pod settings changed by {@code override} (see {@link #rerun}). */
  static String withPod(String input, String override) {
    if (override == null) {
      return input;
    }
    com.fasterxml.jackson.databind.node.ObjectNode in =
        (com.fasterxml.jackson.databind.node.ObjectNode) Json.tree(input);
    com.fasterxml.jackson.databind.node.ObjectNode pod =
        in.path("pod") instanceof com.fasterxml.jackson.databind.node.ObjectNode p
            ? p
            : in.putObject("pod");
    Json.tree(override)
        .properties()
        .forEach(
            e -> {
              if (e.getKey().equals("resources")
                  && e.getValue().isObject()
                  && pod.path("resources").isObject()) {
                com.fasterxml.jackson.databind.node.ObjectNode res =
                    (com.fasterxml.jackson.databind.node.ObjectNode) pod.path("resources");
                e.getValue()
                    .properties()
                    .forEach(
                        kind -> {
                          if (kind.getValue().isObject() && res.path(kind.getKey()).isObject()) {
                            ((com.fasterxml.jackson.databind.node.ObjectNode)
                                    res.path(kind.getKey()))
                                .setAll(
                                    (com.fasterxml.jackson.databind.node.ObjectNode)
                                        kind.getValue());
                          } else {
                            res.set(kind.getKey(), kind.getValue());
                          }
                        });
              } else {
                pod.set(e.getKey(), e.getValue());
              }
            });
    return Json.write(in);
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
      double waitSeconds,
      String pod) {
    /** A claimed build that asked for no pod settings of its own. */
    public Claimed(
        long id,
        int attempt,
        String route,
        String launchName,
        BuildToken token,
        double waitSeconds) {
      this(id, attempt, route, launchName, token, waitSeconds, null);
    }
  }

  /**
   * A token ready for a claim: the token, and its hash as the claim sends it. A claim sends a whole
   * batch of hashes and at low load uses one; the dispatcher keeps the others for its next claim
   * with their hashes already made (a copy of each, every cycle, was the largest of a cycle's
   * allocations).
   */
  public record ClaimToken(BuildToken token, Buffer hash) {
    public static ClaimToken of(BuildToken token) {
      return new ClaimToken(token, Buffer.buffer(token.hash()));
    }
  }

  /**
   * Hears a claim's steps as they happen, on the database client's event loop (keep it quick): the
   * connection in hand, the answer to its BEGIN, and the claim's rows (the transaction still open:
   * its COMMIT is sent, not yet answered).
   */
  @FunctionalInterface
  public interface ClaimSteps {
    void answered(List<Claimed> claimed);

    default void connected() {}

    default void begun() {}
  }

  /**
   * Claims up to {@code tokens.size()} builds, all limits holding, in one transaction that commits
   * before any launch. Each claimed build gets one of the given tokens (by hash). The transaction
   * is sent in one round trip: BEGIN, the claim lock with the fence check, the claim and COMMIT go
   * out together on one connection, and an error in any of them rolls all of it back (the COMMIT of
   * an aborted transaction is a rollback). The builds are returned once the commit is known; {@code
   * steps} sees them as soon as the claim's rows arrive, and the steps before (for timing). With a
   * {@code fence}, the claim commits only while that leadership session holds the leader lock;
   * otherwise it fails with {@link FencedOutException} and claims nothing.
   */
  public Future<List<Claimed>> claim(
      int globalLimit,
      String launchKind,
      List<ClaimToken> tokens,
      LeaderFence fence,
      ClaimSteps steps) {
    Buffer[] hashes = new Buffer[tokens.size()];
    for (int i = 0; i < hashes.length; i++) {
      hashes[i] = tokens.get(i).hash();
    }
    return pool.getConnection()
        .compose(
            conn -> {
              steps.connected();
              Future<?> begin = conn.query(CLAIM_BEGIN).execute().onSuccess(x -> steps.begun());
              Future<Void> lock = AdvisoryLocks.takeFenced(conn, AdvisoryLocks.CLAIM, fence);
              Future<List<Claimed>> claim =
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
                                      tokens.get(r.getInteger("n") - 1).token(),
                                      r.getDouble("wait"),
                                      r.getString("pod")));
                            }
                            steps.answered(out);
                            return out;
                          });
              Future<?> commit = conn.query("COMMIT").execute();
              return Future.join(begin, lock, claim, commit)
                  .transform(
                      done -> {
                        // The first failure in the order sent is the cause; what follows it failed
                        // because the transaction was aborted. A fence that did not hold says so.
                        for (Future<?> f : List.of(begin, lock, claim, commit)) {
                          if (f.failed()) {
                            return Future.<List<Claimed>>failedFuture(f.cause());
                          }
                        }
                        return claim;
                      })
                  .andThen(done -> conn.close());
            });
  }

  /**
   * {@link #claim(int, String, List, LeaderFence, ClaimSteps)} without a fence, for callers with
   * nothing to register (tests).
   */
  public Future<List<Claimed>> claim(int globalLimit, String launchKind, List<BuildToken> tokens) {
    return claim(
        globalLimit, launchKind, tokens.stream().map(ClaimToken::of).toList(), null, c -> {});
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
    return cancel(id, null);
  }

  /** {@link #cancel(long)}, saying in the build's timeline who asked ({@code by}; null: nobody). */
  public Future<Canceled> cancel(long id, String by) {
    return pool.withTransaction(
        conn ->
            conn.preparedQuery(CANCEL.text())
                .execute(Tuple.of(id, by))
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
