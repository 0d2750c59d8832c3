package io.oneshot.build;

import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.api.Json;
import io.oneshot.config.OneshotConfig;
import io.vertx.core.Future;
import io.vertx.core.buffer.Buffer;
import io.vertx.pgclient.PgException;
import io.vertx.sqlclient.Pool;
import io.vertx.sqlclient.Row;
import io.vertx.sqlclient.RowSet;
import io.vertx.sqlclient.Tuple;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Consumer;

/**
 * Every SQL statement of the queue. Each state change is one compare-and-set statement on the
 * build's current status (and attempt); zero rows updated means another actor got there first,
 * which callers treat as a lost race, never as an error to retry.
 */
public final class BuildStore {
  private static final TypeReference<Map<String, String>> STRING_MAP = new TypeReference<>() {};

  private final Pool pool;
  private final Pool readPool;

  public BuildStore(Pool pool) {
    this(pool, pool);
  }

  /**
   * {@code readPool}: for the status reads that must answer while builds keep {@code pool} busy.
   */
  public BuildStore(Pool pool, Pool readPool) {
    this.pool = pool;
    this.readPool = readPool;
  }

  public Pool pool() {
    return pool;
  }

  // ---------------------------------------------------------------------------------------------
  // Routes and limits mirror

  private static final String MIRROR_DELETE_ROUTES =
      "DELETE FROM oneshot.routes WHERE NOT (name = ANY ($1::text[]))";

  private static final String MIRROR_UPSERT_ROUTE =
      """
      INSERT INTO oneshot.routes AS r (name, position, tags, template, max_concurrent, max_attempts,
                                       timeout_ms, cancel_grace_ms, retry_after_acquire, updated_at)
      VALUES ($1, $2, $3::text::jsonb, $4, $5, $6, $7, $8, $9, now())
      ON CONFLICT (name) DO UPDATE SET
        position = excluded.position, tags = excluded.tags, template = excluded.template,
        max_concurrent = excluded.max_concurrent, max_attempts = excluded.max_attempts,
        timeout_ms = excluded.timeout_ms, cancel_grace_ms = excluded.cancel_grace_ms,
        retry_after_acquire = excluded.retry_after_acquire, updated_at = now()
      """;

  private static final String MIRROR_LIMITS =
      """
      UPDATE oneshot.limits SET max_input_bytes = $1, max_tags = $2, max_log_line_bytes = $3,
                                max_log_bytes = $4
      """;

  /** Builds still queued for a route the configuration no longer has would wait forever. */
  private static final String FAIL_ORPHANED =
      """
      UPDATE oneshot.builds
      SET status = 'failed', finished_at = clock_timestamp(),
          error = format('route %s no longer exists in the dispatcher''s configuration', route),
          reason = format('route %s no longer exists in the dispatcher''s configuration', route)
      WHERE status = 'pending' AND NOT (route = ANY ($1::text[]))
      RETURNING route
      """;

  /**
   * Writes the configured routes (in order) and size caps, which {@code oneshot.enqueue()} binds
   * and checks against, and fails queued builds whose route is gone. Returns the routes of the
   * builds it failed, one per build.
   */
  public Future<List<String>> mirror(
      List<OneshotConfig.Route> routes, OneshotConfig.Limits limits) {
    String[] names = routes.stream().map(OneshotConfig.Route::name).toArray(String[]::new);
    return pool.withTransaction(
        conn -> {
          Future<?> f = conn.preparedQuery(MIRROR_DELETE_ROUTES).execute(Tuple.of(names));
          for (int i = 0; i < routes.size(); i++) {
            OneshotConfig.Route r = routes.get(i);
            Tuple t =
                Tuple.tuple()
                    .addString(r.name())
                    .addInteger(i)
                    .addString(Json.write(r.tags()))
                    .addString(r.template())
                    .addInteger(r.maxConcurrent())
                    .addInteger(r.maxAttempts())
                    .addLong(r.timeout().toMillis())
                    .addLong(r.cancelGrace().toMillis())
                    .addBoolean(r.retryAfterAcquire());
            f = f.compose(x -> conn.preparedQuery(MIRROR_UPSERT_ROUTE).execute(t));
          }
          return f.compose(
                  x ->
                      conn.preparedQuery(MIRROR_LIMITS)
                          .execute(
                              Tuple.of(
                                  limits.maxInputBytes(),
                                  limits.maxTags(),
                                  limits.maxLogLineBytes(),
                                  limits.maxLogBytes())))
              .compose(x -> conn.preparedQuery(FAIL_ORPHANED).execute(Tuple.of((Object) names)))
              .map(
                  rows -> {
                    List<String> failed = new ArrayList<>();
                    rows.forEach(r -> failed.add(r.getString("route")));
                    return failed;
                  });
        });
  }

  // ---------------------------------------------------------------------------------------------
  // Enqueue

  /** The result of an enqueue: the new build's id, status and bound route. */
  public record Enqueued(long id, BuildState status, String route) {}

  private static final String ENQUEUE =
      "SELECT id, status, route FROM oneshot.enqueue($1::text::jsonb, $2::text::jsonb, $3, $4)";

  /**
   * Enqueues through {@code oneshot.enqueue()}, the same function SQL producers call, so that every
   * producer gets one validation. Fails with {@link InvalidBuildException} for a refused build.
   */
  public Future<Enqueued> enqueue(
      String tagsJson, String inputJson, int priority, String workspace) {
    return pool.preparedQuery(ENQUEUE)
        .execute(Tuple.of(tagsJson, inputJson, priority, workspace))
        .map(
            rows -> {
              Row r = rows.iterator().next();
              return new Enqueued(
                  r.getLong("id"), BuildState.ofWire(r.getString("status")), r.getString("route"));
            })
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

  // ---------------------------------------------------------------------------------------------
  // Claim

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
   * Serializes claims (limits are counted with every earlier claim committed) and checks the fence:
   * that the claiming replica's leadership session still holds the leader lock. {@code $3} null: no
   * fence (tests that drive claims directly).
   */
  private static final String CLAIM_LOCK =
      """
      SELECT pg_advisory_xact_lock($1, $2),
             $3::int IS NULL OR EXISTS (
               SELECT 1 FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
               WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                 AND l.classid::bigint = $5 AND l.objid::bigint = $6
                 AND l.pid = $3 AND a.backend_start = $4) AS fenced
      """;

  /**
   * Claims, for every route with free slots, its next pending builds by priority then age, within
   * the global limit, skipping builds whose workspace has an earlier build still unfinished. The
   * caller holds the claim lock, so the counts it reads include every earlier claim.
   */
  private static final String CLAIM =
      """
      WITH live AS (
        SELECT route, count(*)::int AS n FROM oneshot.builds
        WHERE status IN ('launching', 'running') GROUP BY route
      ), room AS (
        -- What this claim may take in all: the global limit's free slots, and no more builds
        -- than it has tokens for. No route is read (or locked) past it, however deep its queue.
        SELECT least(greatest($1 - (SELECT coalesce(sum(n), 0) FROM live), 0),
                     cardinality($2::bytea[])) AS n
      ), free AS (
        SELECT r.name,
               least(greatest(r.max_concurrent - coalesce(l.n, 0), 0), (SELECT n FROM room)) AS slots
        FROM oneshot.routes r LEFT JOIN live l ON l.route = r.name
      ), candidates AS (
        SELECT c.id, c.priority
        FROM free f CROSS JOIN LATERAL (
          SELECT b.id, b.priority FROM oneshot.builds b
          WHERE b.status = 'pending' AND b.route = f.name
            AND (b.workspace IS NULL OR NOT EXISTS (
              SELECT 1 FROM oneshot.builds w
              WHERE w.workspace = b.workspace AND w.id < b.id
                AND w.status IN ('pending', 'launching', 'running')))
          ORDER BY b.priority DESC, b.id
          LIMIT f.slots
          FOR UPDATE OF b SKIP LOCKED
        ) c
        WHERE f.slots > 0
      ), picked AS (
        -- The constant outer limit (the claim's batch size) tells the planner how few rows come
        -- out, so that the update below finds them by primary key even over a deep queue.
        SELECT * FROM (
          SELECT id, row_number() OVER (ORDER BY priority DESC, id)::int AS n
          FROM candidates
          ORDER BY priority DESC, id
          LIMIT (SELECT n FROM room)
        ) x LIMIT %d
      )
      UPDATE oneshot.builds b
      SET status = 'launching', attempt = b.attempt + 1, claimed_at = clock_timestamp(),
          launched_at = NULL, started_at = NULL, heartbeat_at = NULL, runner_log_seq = 0,
          state_read_version = NULL, launch_pod = NULL,
          runner_id = NULL, runner = NULL, runner_since = NULL,
          launch_kind = $3,
          launch_name = 'oneshot-' || b.id || '-' || (b.attempt + 1), launch_namespace = NULL,
          token_hash = ($2::bytea[])[p.n], reason = 'claimed by the dispatcher'
      FROM picked p
      WHERE b.id = p.id
      RETURNING b.id, b.attempt, b.route, b.launch_name, p.n,
                extract(epoch FROM b.claimed_at - b.created_at)::float8 AS wait
      """;

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
            conn.preparedQuery(CLAIM_LOCK)
                .execute(lock)
                .compose(
                    x -> {
                      if (!x.iterator().next().getBoolean("fenced")) {
                        return Future.failedFuture(new FencedOutException(fence));
                      }
                      return Future.succeededFuture();
                    })
                .compose(
                    x ->
                        conn.preparedQuery(CLAIM.formatted(tokens.size()))
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

  // ---------------------------------------------------------------------------------------------
  // Launch bookkeeping

  private static final String MARK_LAUNCHED =
      """
      WITH i AS (
        SELECT * FROM unnest($1::bigint[], $2::int[], $3::text[], $4::text[], $5::text[], $6::text[])
          AS i(id, attempt, kind, name, namespace, detail)
        ORDER BY id
      ), b AS (
        UPDATE oneshot.builds b
        SET launched_at = clock_timestamp(), launch_kind = i.kind, launch_name = i.name,
            launch_namespace = i.namespace
        FROM i
        WHERE b.id = i.id AND b.attempt = i.attempt AND b.status IN ('launching', 'running')
          AND b.launched_at IS NULL
        RETURNING b.id, b.attempt, b.status, i.detail,
                  extract(epoch FROM b.launched_at - b.created_at)::float8 AS dispatch
      ), e AS (
        INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason)
        SELECT id, attempt, status, status, detail FROM b ORDER BY id
      )
      SELECT id, dispatch FROM b
      """;

  /** A launch the launcher confirmed: what {@link #markLaunched(List)} records. */
  public record Launch(
      long id, int attempt, String kind, String name, String namespace, String detail) {}

  /**
   * Records that the launcher confirmed the attempt. Empty: the attempt is no longer current;
   * otherwise the seconds from enqueue to launch.
   */
  public Future<Optional<Double>> markLaunched(
      long id, int attempt, String kind, String name, String namespace, String detail) {
    return markLaunched(List.of(new Launch(id, attempt, kind, name, namespace, detail)))
        .map(m -> Optional.ofNullable(m.get(id)));
  }

  /**
   * Records many confirmed launches in one statement and one commit. The answer maps each build
   * whose attempt was still current to the seconds from its enqueue to its launch; a build missing
   * from it was no longer current.
   */
  public Future<Map<Long, Double>> markLaunched(List<Launch> launches) {
    int n = launches.size();
    Long[] ids = new Long[n];
    Integer[] attempts = new Integer[n];
    String[] kinds = new String[n];
    String[] names = new String[n];
    String[] namespaces = new String[n];
    String[] details = new String[n];
    for (int i = 0; i < n; i++) {
      Launch l = launches.get(i);
      ids[i] = l.id();
      attempts[i] = l.attempt();
      kinds[i] = l.kind();
      names[i] = l.name();
      namespaces[i] = l.namespace();
      details[i] = l.detail();
    }
    return pool.preparedQuery(MARK_LAUNCHED)
        .execute(Tuple.of(ids, attempts, kinds, names, namespaces, details))
        .map(
            rows -> {
              Map<Long, Double> out = new HashMap<>();
              for (Row r : rows) {
                out.put(r.getLong("id"), r.getDouble("dispatch"));
              }
              return out;
            });
  }

  private static final String RETOKEN =
      """
      UPDATE oneshot.builds SET token_hash = $3
      WHERE id = $1 AND attempt = $2 AND status = 'launching' AND launched_at IS NULL
      """;

  /**
   * Gives a claimed build whose token was lost (the dispatcher stopped between claim and launch) a
   * new one, before launching it again. False: the attempt is no longer current.
   */
  public Future<Boolean> retoken(long id, int attempt, BuildToken token) {
    return pool.preparedQuery(RETOKEN)
        .execute(Tuple.of(id, attempt, Buffer.buffer(token.hash())))
        .map(rows -> rows.rowCount() == 1);
  }

  private static final String REQUEUE =
      """
      WITH m AS (
        SELECT coalesce((SELECT r.max_attempts FROM oneshot.routes r
                         JOIN oneshot.builds x ON x.route = r.name WHERE x.id = $1), 0) AS max_attempts
      )
      UPDATE oneshot.builds b
      SET status = CASE WHEN b.attempt < m.max_attempts THEN 'pending' ELSE 'failed' END,
          finished_at = CASE WHEN b.attempt < m.max_attempts THEN NULL ELSE clock_timestamp() END,
          error = CASE WHEN b.attempt < m.max_attempts THEN NULL
                       ELSE format('%s (attempt %s of %s)', $4, b.attempt, m.max_attempts) END,
          reason = CASE WHEN b.attempt < m.max_attempts
                        THEN format('requeued after attempt %s of %s: %s', b.attempt, m.max_attempts, $4)
                        ELSE format('%s (attempt %s of %s)', $4, b.attempt, m.max_attempts) END,
          token_hash = NULL, launched_at = NULL, started_at = NULL, heartbeat_at = NULL
      FROM m
      WHERE b.id = $1 AND b.attempt = $2 AND b.status = $3
      RETURNING b.status, b.route
      """;

  /**
   * Puts a build whose attempt failed for infrastructure reasons back in the queue, or fails it if
   * that was its last attempt. The old attempt's token stops working. Empty: the attempt is no
   * longer current.
   */
  public Future<Optional<BuildState>> requeue(
      long id, int attempt, BuildState from, String reason) {
    return pool.preparedQuery(REQUEUE)
        .execute(Tuple.of(id, attempt, from.wire(), reason))
        .map(rows -> firstState(rows, "status"));
  }

  private static final String FINISH =
      """
      UPDATE oneshot.builds
      SET status = $4, finished_at = clock_timestamp(), error = $5, reason = $5
      WHERE id = $1 AND attempt = $2 AND status = $3
      RETURNING route, extract(epoch FROM finished_at - started_at)::float8 AS ran
      """;

  /** A build the dispatcher ended: its route, and how long it ran (null: it never ran). */
  public record Ended(String route, Double ranSeconds) {}

  /** Ends a build as failed or canceled from the dispatcher's side. Empty: lost race. */
  public Future<Optional<Ended>> finish(
      long id, int attempt, BuildState from, BuildState to, String reason) {
    return pool.preparedQuery(FINISH)
        .execute(Tuple.of(id, attempt, from.wire(), to.wire(), reason))
        .map(
            rows -> {
              if (rows.rowCount() == 0) {
                return Optional.empty();
              }
              Row r = rows.iterator().next();
              return Optional.of(new Ended(r.getString("route"), r.getDouble("ran")));
            });
  }

  // ---------------------------------------------------------------------------------------------
  // Cancel

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

  private static final String CANCEL =
      """
      WITH cur AS (
        SELECT id, status, route FROM oneshot.builds WHERE id = $1 FOR UPDATE
      ), upd AS (
        UPDATE oneshot.builds b
        SET status = CASE WHEN cur.status = 'running' THEN b.status ELSE 'canceled' END,
            finished_at = CASE WHEN cur.status = 'running' THEN b.finished_at ELSE clock_timestamp() END,
            reason = CASE WHEN cur.status = 'running' THEN b.reason
                          ELSE format('canceled while %s', cur.status) END,
            error = CASE WHEN cur.status = 'running' THEN b.error
                          ELSE format('canceled while %s', cur.status) END,
            cancel_requested_at = coalesce(b.cancel_requested_at, clock_timestamp())
        FROM cur
        WHERE b.id = cur.id AND cur.status IN ('pending', 'launching', 'running')
        RETURNING b.id
      )
      SELECT cur.status, cur.route, (SELECT count(*) FROM upd) AS updated FROM cur
      """;

  /**
   * Cancels a build: at once when it is pending or launching (the dispatcher then removes the
   * attempt), by request when it runs (provisionerd learns it on its next heartbeat). Notifies
   * {@code oneshot_cancel} with the build id so the dispatcher acts without waiting for a tick.
   */
  public Future<Canceled> cancel(long id) {
    return pool.withTransaction(
        conn ->
            conn.preparedQuery(CANCEL)
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
                      return conn.preparedQuery("SELECT 1 FROM pg_notify('oneshot_cancel', $1)")
                          .execute(Tuple.of(Long.toString(id)))
                          .map(x -> result);
                    }));
  }

  // ---------------------------------------------------------------------------------------------
  // Runner (provisionerd) calls; the token hash identifies build and attempt

  /**
   * What provisionerd gets at acquire. For a terraform build with a workspace, {@code stateVersion}
   * is the workspace's latest state version when the build was first acquired (0: none yet) and
   * {@code state} that state.
   */
  public record Acquired(
      long id,
      int attempt,
      String route,
      String workspace,
      JsonNode input,
      long timeoutMs,
      long cancelGraceMs,
      boolean cancelRequested,
      Integer stateVersion,
      String state,
      boolean first,
      Double startSeconds) {}

  /** Who holds an attempt: the runner its first acquire bound it to, and since when. */
  public record Holder(long buildId, int attempt, String route, Runner runner, Instant since) {
    /** "attempt 1 of build 7 is held by runner … in pod … since …". */
    public String describe() {
      return "attempt "
          + attempt
          + " of build "
          + buildId
          + " is held by "
          + runner.describe()
          + (since == null ? "" : " since " + since);
    }
  }

  /** What an acquire found: the build to run, another runner's attempt, or no live attempt. */
  public sealed interface Acquire {
    /** The attempt is this runner's (now, or since its earlier acquire). */
    record Granted(Acquired build) implements Acquire {}

    /** The attempt is bound to another runner; nothing changed. */
    record HeldByOther(Holder holder) implements Acquire {}

    /** The token belongs to no launching or running attempt. */
    record NoAttempt() implements Acquire {}
  }

  /**
   * The first acquire moves the build to {@code running} and binds the attempt to the calling
   * runner; a repeated acquire by that runner gets the same answer (the same state version
   * included), so that a retried call is harmless. The row lock taken by {@code old} serializes two
   * runners' acquires, and the compare-and-set on {@code runner_id} lets only the first one bind:
   * the other finds the holder in {@code old} and no row in {@code b}.
   */
  private static final String ACQUIRE =
      """
      WITH old AS (
        SELECT id, attempt, route, status, runner_id, runner::text AS runner, runner_since
        FROM oneshot.builds
        WHERE token_hash = $1 AND status IN ('launching', 'running')
        FOR UPDATE
      ), b AS (
        UPDATE oneshot.builds x
        SET status = 'running', started_at = coalesce(x.started_at, clock_timestamp()),
            heartbeat_at = clock_timestamp(),
            runner_id = $2, runner = coalesce(x.runner, $3::text::jsonb),
            runner_since = coalesce(x.runner_since, clock_timestamp()),
            reason = CASE WHEN x.status = 'launching' THEN 'acquired by provisionerd' ELSE x.reason END,
            state_read_version =
              CASE WHEN x.workspace IS NULL OR x.input->>'provisioner' <> 'terraform' THEN NULL
                   ELSE coalesce(x.state_read_version,
                                 (SELECT max(w.version) FROM oneshot.workspace_states w
                                  WHERE w.workspace = x.workspace), 0) END
        FROM old
        WHERE x.id = old.id AND (x.runner_id IS NULL OR x.runner_id = $2)
        RETURNING x.id, x.attempt, x.route, x.workspace, x.input::text AS input,
                  x.cancel_requested_at IS NOT NULL AS cancel_requested, x.state_read_version,
                  old.status = 'launching' AS first,
                  extract(epoch FROM x.started_at - x.launched_at)::float8 AS start_seconds
      )
      SELECT old.id AS held_id, old.attempt AS held_attempt, old.route AS held_route,
             old.runner_id AS held_by, old.runner AS held_runner, old.runner_since AS held_since,
             b.*, coalesce(r.timeout_ms, 3600000) AS timeout_ms,
             coalesce(r.cancel_grace_ms, 60000) AS cancel_grace_ms, w.state
      FROM old
      LEFT JOIN b ON b.id = old.id
      LEFT JOIN oneshot.routes r ON r.name = b.route
      LEFT JOIN oneshot.workspace_states w
        ON w.workspace = b.workspace AND w.version = b.state_read_version
      """;

  public Future<Acquire> acquire(byte[] tokenHash, Runner runner) {
    return pool.preparedQuery(ACQUIRE)
        .execute(Tuple.of(Buffer.buffer(tokenHash), runner.id(), Json.write(runner.details())))
        .map(
            rows -> {
              if (rows.rowCount() == 0) {
                return new Acquire.NoAttempt();
              }
              Row r = rows.iterator().next();
              if (r.getLong("id") == null) {
                return new Acquire.HeldByOther(
                    new Holder(
                        r.getLong("held_id"),
                        r.getInteger("held_attempt"),
                        r.getString("held_route"),
                        Runner.of(r.getString("held_by"), Json.tree(r.getString("held_runner"))),
                        instant(r, "held_since")));
              }
              return new Acquire.Granted(
                  new Acquired(
                      r.getLong("id"),
                      r.getInteger("attempt"),
                      r.getString("route"),
                      r.getString("workspace"),
                      Json.tree(r.getString("input")),
                      r.getLong("timeout_ms"),
                      r.getLong("cancel_grace_ms"),
                      r.getBoolean("cancel_requested"),
                      r.getInteger("state_read_version"),
                      r.getString("state"),
                      r.getBoolean("first"),
                      r.getDouble("start_seconds")));
            });
  }

  private static final String RUNNER_CONFLICT =
      """
      WITH b AS (
        UPDATE oneshot.builds SET log_seq = log_seq + 1
        WHERE id = $1 AND attempt = $2 AND status IN ('launching', 'running')
        RETURNING id, log_seq, status
      ), line AS (
        INSERT INTO oneshot.build_logs (build_id, seq, ts, attempt, stream, level, stage, text)
        SELECT b.id, b.log_seq, clock_timestamp(), $2, 'system', 'warn', NULL, $3 FROM b
      )
      INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason)
      SELECT b.id, $2, b.status, b.status, $3 FROM b
      """;

  /**
   * Writes a refused second runner into the build's log and timeline (nothing when the attempt is
   * no longer current).
   */
  public Future<Void> recordConflict(long id, int attempt, String text) {
    return pool.preparedQuery(RUNNER_CONFLICT).execute(Tuple.of(id, attempt, text)).mapEmpty();
  }

  // ---------------------------------------------------------------------------------------------
  // Workspace state

  /** A terraform state as provisionerd uploads it; serial and lineage are read from it. */
  public record StateUpload(String state, Long serial, String lineage) {}

  /** What became of a state upload. */
  public sealed interface StateSaved {
    /**
     * Stored as {@code version}; {@code note}, when not null, says that terraform started a new
     * lineage, which is worth a line in the build's log.
     */
    record Stored(int version, String note) implements StateSaved {}

    /** Refused: it cannot be this attempt's terraform's next state ({@code why} says how). */
    record Refused(String why) implements StateSaved {}

    /** The token is not the running attempt's, the caller not its runner, or no workspace. */
    record NotRunning() implements StateSaved {}
  }

  /**
   * Stores the running attempt's state as its workspace's next version, or updates the version this
   * attempt already wrote (terraform writes state as it goes). Only the bound runner of the running
   * attempt can write: an old attempt's token matches nothing, another runner's id matches nothing.
   * Within an attempt the state only moves forward: a lower serial, or a lineage other than the one
   * the attempt stored first or started from, is refused (terraform keeps the lineage of the state
   * it is given, and only starts one where there was none, which is then noted).
   */
  private static final String SAVE_STATE =
      """
      WITH b AS (
        SELECT id, attempt, workspace, state_read_version FROM oneshot.builds
        WHERE token_hash = $1 AND status = 'running' AND runner_id = $6 AND workspace IS NOT NULL
        FOR UPDATE
      ), mine AS (
        SELECT s.serial, s.lineage FROM oneshot.workspace_states s
        JOIN b ON s.build_id = b.id AND s.attempt = b.attempt
      ), base AS (
        SELECT s.version, s.serial, s.lineage FROM oneshot.workspace_states s
        JOIN b ON s.workspace = b.workspace AND s.version = b.state_read_version
      ), prev AS (
        SELECT s.version, s.lineage FROM oneshot.workspace_states s
        JOIN b ON s.workspace = b.workspace AND NOT (s.build_id = b.id AND s.attempt = b.attempt)
        ORDER BY s.version DESC LIMIT 1
      ), verdict AS (
        SELECT
          CASE
            WHEN $3::bigint < (SELECT serial FROM mine)
              THEN format('serial %s is lower than serial %s, which this attempt stored already',
                          $3, (SELECT serial FROM mine))
            WHEN (SELECT lineage FROM mine) IS NOT NULL AND $4::text IS DISTINCT FROM (SELECT lineage FROM mine)
              THEN format('lineage %s differs from lineage %s, which this attempt stored already',
                          coalesce($4, '(none)'), (SELECT lineage FROM mine))
            WHEN NOT EXISTS (SELECT 1 FROM mine) AND $3::bigint < (SELECT serial FROM base)
              THEN format('serial %s is lower than serial %s of version %s, which this build started from',
                          $3, (SELECT serial FROM base), (SELECT version FROM base))
            WHEN (SELECT lineage FROM base) IS NOT NULL AND $4::text IS DISTINCT FROM (SELECT lineage FROM base)
              THEN format('lineage %s differs from lineage %s of version %s, which this build started'
                          ' from (terraform keeps the lineage of the state it is given)',
                          coalesce($4, '(none)'), (SELECT lineage FROM base), (SELECT version FROM base))
          END AS refused,
          CASE
            WHEN NOT EXISTS (SELECT 1 FROM mine) AND (SELECT lineage FROM base) IS NULL
                 AND (SELECT lineage FROM prev) IS NOT NULL AND $4::text IS DISTINCT FROM (SELECT lineage FROM prev)
              THEN format('terraform started a new lineage %s; the previous version %s had lineage %s',
                          coalesce($4, '(none)'), (SELECT version FROM prev), (SELECT lineage FROM prev))
          END AS note
        FROM b
      ), v AS (
        INSERT INTO oneshot.workspace_states AS s
          (workspace, version, build_id, attempt, state, bytes, serial, lineage, final)
        SELECT b.workspace,
               coalesce((SELECT max(w.version) FROM oneshot.workspace_states w
                         WHERE w.workspace = b.workspace), 0) + 1,
               b.id, b.attempt, $2, octet_length($2), $3, $4, $5
        FROM b, verdict
        WHERE verdict.refused IS NULL
        ON CONFLICT (build_id, attempt) DO UPDATE
          SET state = excluded.state, bytes = excluded.bytes, serial = excluded.serial,
              lineage = excluded.lineage, final = excluded.final, updated_at = clock_timestamp()
        RETURNING s.build_id, s.version
      ), u AS (
        UPDATE oneshot.builds x SET state_written_version = v.version
        FROM v WHERE x.id = v.build_id
        RETURNING x.id
      )
      SELECT b.id, (SELECT version FROM v) AS version, verdict.refused, verdict.note,
             (SELECT count(*) FROM u) AS updated
      FROM b, verdict
      """;

  public Future<StateSaved> saveState(
      byte[] tokenHash, String runnerId, StateUpload s, boolean last) {
    return saveState(pool, tokenHash, runnerId, s, last);
  }

  private static Future<StateSaved> saveState(
      io.vertx.sqlclient.SqlClient client,
      byte[] tokenHash,
      String runnerId,
      StateUpload s,
      boolean last) {
    return client
        .preparedQuery(SAVE_STATE)
        .execute(
            Tuple.tuple()
                .addBuffer(Buffer.buffer(tokenHash))
                .addString(s.state())
                .addLong(s.serial())
                .addString(s.lineage())
                .addBoolean(last)
                .addString(runnerId))
        .map(
            rows -> {
              if (rows.rowCount() == 0) {
                return new StateSaved.NotRunning();
              }
              Row r = rows.iterator().next();
              if (r.getString("refused") != null) {
                return new StateSaved.Refused(r.getString("refused"));
              }
              return new StateSaved.Stored(r.getInteger("version"), r.getString("note"));
            });
  }

  /**
   * One version of a workspace's state, without the state itself. {@code finished}: the build that
   * wrote it has reported its outcome (until then the version follows its apply).
   */
  public record StateVersion(
      int version,
      long buildId,
      int attempt,
      int bytes,
      Long serial,
      String lineage,
      boolean finished,
      Instant createdAt,
      Instant updatedAt) {}

  public Future<List<StateVersion>> stateVersions(String workspace) {
    return pool.preparedQuery(
            """
            SELECT version, build_id, attempt, bytes, serial, lineage, final, created_at, updated_at
            FROM oneshot.workspace_states WHERE workspace = $1 ORDER BY version DESC
            """)
        .execute(Tuple.of(workspace))
        .map(
            rows -> {
              List<StateVersion> out = new ArrayList<>(rows.rowCount());
              for (Row r : rows) {
                out.add(
                    new StateVersion(
                        r.getInteger("version"),
                        r.getLong("build_id"),
                        r.getInteger("attempt"),
                        r.getInteger("bytes"),
                        r.getLong("serial"),
                        r.getString("lineage"),
                        r.getBoolean("final"),
                        instant(r, "created_at"),
                        instant(r, "updated_at")));
              }
              return out;
            });
  }

  /** The state of one version (the latest when {@code version} is null). */
  public Future<Optional<String>> state(String workspace, Integer version) {
    return pool.preparedQuery(
            """
            SELECT state FROM oneshot.workspace_states
            WHERE workspace = $1 AND ($2::int IS NULL OR version = $2)
            ORDER BY version DESC LIMIT 1
            """)
        .execute(Tuple.of(workspace, version))
        .map(
            rows ->
                rows.rowCount() == 0
                    ? Optional.empty()
                    : Optional.of(rows.iterator().next().getString("state")));
  }

  private static final String HEARTBEAT =
      """
      UPDATE oneshot.builds SET heartbeat_at = clock_timestamp()
      WHERE token_hash = $1 AND status = 'running' AND runner_id = $2
      RETURNING cancel_requested_at IS NOT NULL AS cancel_requested
      """;

  /**
   * Empty: the token is not the running attempt's, or the caller is not its runner. Otherwise
   * whether cancel was requested.
   */
  public Future<Optional<Boolean>> heartbeat(byte[] tokenHash, String runnerId) {
    return pool.preparedQuery(HEARTBEAT)
        .execute(Tuple.of(Buffer.buffer(tokenHash), runnerId))
        .map(
            rows ->
                rows.rowCount() == 0
                    ? Optional.empty()
                    : Optional.of(rows.iterator().next().getBoolean("cancel_requested")));
  }

  /**
   * A log line as provisionerd sends it; a {@code milestone} line also marks a step in the build's
   * timeline (terraform plan started).
   */
  public record NewLine(
      Instant ts, String stream, String level, String stage, String text, boolean milestone) {}

  /**
   * The answer to a log batch: {@code fresh} lines were new (the rest had been delivered before),
   * {@code accepted} of them were stored; fewer once the build's log limit is reached.
   */
  public record LogAck(
      long buildId,
      int attempt,
      boolean cancelRequested,
      int fresh,
      int accepted,
      long bytesBefore) {}

  /**
   * Appends a batch under the build's row lock, so that sequence numbers follow commit order and a
   * follower reading "after seq N" never misses a line. The runner numbers its lines ($3 is the
   * number of the batch's first); lines it delivered before (a batch sent again after a lost reply)
   * are skipped. Lines past the build's total log limit are dropped, and counted, so that the cap
   * cannot be dodged by many small batches.
   */
  private static final String APPEND_LOGS =
      """
      WITH prev AS (
        SELECT id, runner_log_seq FROM oneshot.builds
        WHERE token_hash = $1 AND status = 'running' AND runner_id = $11
        FOR UPDATE
      ), fresh AS (
        SELECT greatest(0, least($2::bigint, $3::bigint + $2::bigint - 1 - prev.runner_log_seq))::bigint AS n,
               prev.runner_log_seq AS seen
        FROM prev
      ), lines AS (
        SELECT t.*, sum(octet_length(t.text)) OVER (ORDER BY t.ord) AS cum
        FROM unnest($4::timestamptz[], $5::text[], $6::text[], $7::text[], $8::text[],
                    $10::boolean[])
             WITH ORDINALITY AS t(ts, stream, level, stage, text, milestone, ord), fresh
        WHERE $3::bigint + t.ord - 1 > fresh.seen
      ), b AS (
        UPDATE oneshot.builds x
        SET log_seq = x.log_seq + fresh.n,
            log_bytes = x.log_bytes + coalesce((SELECT max(cum) FROM lines), 0),
            runner_log_seq = greatest(x.runner_log_seq, $3::bigint + $2::bigint - 1),
            heartbeat_at = clock_timestamp()
        FROM prev, fresh
        WHERE x.id = prev.id
        RETURNING x.id, x.attempt, x.log_seq - fresh.n AS base,
                  x.log_bytes - coalesce((SELECT max(cum) FROM lines), 0) AS bytes_before,
                  x.cancel_requested_at IS NOT NULL AS cancel_requested
      ), ins AS (
        INSERT INTO oneshot.build_logs (build_id, seq, ts, attempt, stream, level, stage, text)
        SELECT b.id, b.base + row_number() OVER (ORDER BY l.ord), l.ts, b.attempt, l.stream,
               l.level, l.stage, l.text
        FROM b, lines l
        WHERE b.bytes_before + l.cum <= $9
        RETURNING 1
      ), steps AS (
        INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason, at)
        SELECT b.id, b.attempt, 'running', 'running', l.text, l.ts
        FROM b, lines l
        WHERE l.milestone
      )
      SELECT b.id, b.attempt, b.cancel_requested, b.bytes_before,
             (SELECT n FROM fresh)::int AS fresh, (SELECT count(*) FROM ins)::int AS accepted
      FROM b
      """;

  /**
   * @param first the runner's number of the batch's first line (lines are numbered from 1 in each
   *     attempt)
   */
  public Future<Optional<LogAck>> appendLogs(
      byte[] tokenHash, String runnerId, long first, List<NewLine> lines, long maxLogBytes) {
    int n = lines.size();
    OffsetDateTime[] ts = new OffsetDateTime[n];
    String[] stream = new String[n];
    String[] level = new String[n];
    String[] stage = new String[n];
    String[] text = new String[n];
    Boolean[] milestone = new Boolean[n];
    for (int i = 0; i < n; i++) {
      NewLine l = lines.get(i);
      ts[i] = OffsetDateTime.ofInstant(l.ts(), ZoneOffset.UTC);
      stream[i] = l.stream();
      level[i] = l.level();
      stage[i] = l.stage();
      text[i] = l.text();
      milestone[i] = l.milestone();
    }
    Tuple t =
        Tuple.tuple()
            .addBuffer(Buffer.buffer(tokenHash))
            .addLong((long) n)
            .addLong(first)
            .addArrayOfOffsetDateTime(ts)
            .addArrayOfString(stream)
            .addArrayOfString(level)
            .addArrayOfString(stage)
            .addArrayOfString(text)
            .addLong(maxLogBytes)
            .addArrayOfBoolean(milestone)
            .addString(runnerId);
    return pool.preparedQuery(APPEND_LOGS)
        .execute(t)
        .map(
            rows -> {
              if (rows.rowCount() == 0) {
                return Optional.empty();
              }
              Row r = rows.iterator().next();
              return Optional.of(
                  new LogAck(
                      r.getLong("id"),
                      r.getInteger("attempt"),
                      r.getBoolean("cancel_requested"),
                      r.getInteger("fresh"),
                      r.getInteger("accepted"),
                      r.getLong("bytes_before")));
            });
  }

  private static final String MILESTONE =
      """
      INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason)
      SELECT id, attempt, status, status, $3 FROM oneshot.builds
      WHERE id = $1 AND attempt = $2 AND status IN ('launching', 'running')
      """;

  /**
   * Marks a step within the current attempt (pod scheduled, container started) in the build's
   * timeline. Nothing happens when the attempt is no longer current.
   */
  public Future<Void> milestone(long id, int attempt, String reason) {
    return pool.preparedQuery(MILESTONE).execute(Tuple.of(id, attempt, reason)).mapEmpty();
  }

  /** Records the pod (or process) the current attempt runs in. */
  public Future<Void> runsIn(long id, int attempt, String pod) {
    return pool.preparedQuery(
            "UPDATE oneshot.builds SET launch_pod = $3 WHERE id = $1 AND attempt = $2")
        .execute(Tuple.of(id, attempt, pod))
        .mapEmpty();
  }

  private static final String SYSTEM_LOG =
      """
      WITH b AS (
        UPDATE oneshot.builds SET log_seq = log_seq + 1 WHERE id = $1 RETURNING id, log_seq, route
      ), line AS (
        INSERT INTO oneshot.build_logs (build_id, seq, ts, attempt, stream, level, stage, text)
        SELECT b.id, b.log_seq, clock_timestamp(), $2, 'system', $3, NULL, $4 FROM b
      )
      SELECT route FROM b
      """;

  /**
   * Appends a line from oneshot itself (the dispatcher, the launcher) to a build's log; returns the
   * build's route, empty when there is no such build.
   */
  public Future<Optional<String>> systemLog(long id, int attempt, String level, String text) {
    return pool.preparedQuery(SYSTEM_LOG)
        .execute(Tuple.of(id, attempt, level, text))
        .map(
            rows ->
                rows.rowCount() == 0
                    ? Optional.empty()
                    : Optional.of(rows.iterator().next().getString("route")));
  }

  private static final String COMPLETE =
      """
      UPDATE oneshot.builds
      SET status = $2, finished_at = clock_timestamp(), exit_code = $3, error = $4,
          outputs = $5::text::jsonb, reason = $6
      WHERE token_hash = $1 AND status = 'running' AND runner_id = $7
      RETURNING id, attempt, status, route,
                extract(epoch FROM finished_at - started_at)::float8 AS ran
      """;

  /**
   * What provisionerd reports at the end; {@code state}, when not null, is the workspace's final
   * terraform state, stored in the same transaction.
   */
  public record Completion(
      BuildState outcome,
      Integer exitCode,
      String error,
      JsonNode outputs,
      String reason,
      StateUpload state) {}

  /**
   * A build provisionerd ended: which, its outcome, route and run time; {@code stateRefused} says
   * why its final state was not stored (null: stored, or none was sent).
   */
  public record Completed(
      long id,
      int attempt,
      BuildState status,
      String route,
      double ranSeconds,
      String stateRefused) {}

  private static Optional<Completed> firstCompleted(RowSet<Row> rows, String stateRefused) {
    if (rows.rowCount() == 0) {
      return Optional.empty();
    }
    Row r = rows.iterator().next();
    return Optional.of(
        new Completed(
            r.getLong("id"),
            r.getInteger("attempt"),
            BuildState.ofWire(r.getString("status")),
            r.getString("route"),
            r.getDouble("ran"),
            stateRefused));
  }

  /**
   * Ends the running attempt's build with provisionerd's outcome and stores its final state, in one
   * transaction, from the bound runner alone. A final state that is refused (see {@link
   * #saveState}) is not stored; the outcome still is, and {@code stateRefused} says why. Empty: the
   * token is not the running attempt's, or the caller not its runner (see {@link #tokenState}).
   */
  public Future<Optional<Completed>> complete(byte[] tokenHash, String runnerId, Completion c) {
    Tuple t =
        Tuple.tuple()
            .addBuffer(Buffer.buffer(tokenHash))
            .addString(c.outcome().wire())
            .addInteger(c.exitCode())
            .addString(c.error())
            .addString(c.outputs() == null ? null : Json.write(c.outputs()))
            .addString(c.reason())
            .addString(runnerId);
    if (c.state() == null) {
      return pool.preparedQuery(COMPLETE).execute(t).map(rows -> firstCompleted(rows, null));
    }
    return pool.withTransaction(
        conn ->
            saveState(conn, tokenHash, runnerId, c.state(), true)
                .compose(
                    saved ->
                        conn.preparedQuery(COMPLETE)
                            .execute(t)
                            .map(
                                rows ->
                                    firstCompleted(
                                        rows,
                                        saved instanceof StateSaved.Refused r ? r.why() : null))));
  }

  /** Where a token's build stands, for telling a refused runner call why. */
  public record TokenState(
      long id, int attempt, String route, BuildState status, Runner runner, Instant since) {
    /** The attempt's holder; null before the first acquire. */
    public Holder holder() {
      return runner == null ? null : new Holder(id, attempt, route, runner, since);
    }
  }

  public Future<Optional<TokenState>> tokenState(byte[] tokenHash) {
    return pool.preparedQuery(
            """
            SELECT id, attempt, route, status, runner_id, runner::text AS runner, runner_since
            FROM oneshot.builds WHERE token_hash = $1
            """)
        .execute(Tuple.of(Buffer.buffer(tokenHash)))
        .map(BuildStore::firstTokenState);
  }

  private static Optional<TokenState> firstTokenState(RowSet<Row> rows) {
    if (rows.rowCount() == 0) {
      return Optional.empty();
    }
    Row r = rows.iterator().next();
    String runner = r.getString("runner_id");
    return Optional.of(
        new TokenState(
            r.getLong("id"),
            r.getInteger("attempt"),
            r.getString("route"),
            BuildState.ofWire(r.getString("status")),
            runner == null ? null : Runner.of(runner, Json.tree(r.getString("runner"))),
            instant(r, "runner_since")));
  }

  // ---------------------------------------------------------------------------------------------
  // Rescuer

  /** A launching or running build, with ages measured on the database's clock. */
  public record LiveBuild(
      long id,
      BuildState status,
      int attempt,
      String route,
      String provisioner,
      String launchKind,
      String launchName,
      String launchNamespace,
      boolean launched,
      boolean cancelRequested,
      long claimedAgoMs,
      Long startedAgoMs,
      Long heartbeatAgoMs,
      Long cancelRequestedAgoMs) {}

  private static final String LIVE =
      """
      SELECT id, status, attempt, route, input->>'provisioner' AS provisioner,
             launch_kind, launch_name, launch_namespace, launched_at IS NOT NULL AS launched,
             cancel_requested_at IS NOT NULL AS cancel_requested,
             -- An attempt launched again after a restart gets its whole launch timeout.
             (extract(epoch FROM clock_timestamp() - coalesce(launched_at, claimed_at)) * 1000)::bigint
               AS claimed_ago,
             (extract(epoch FROM clock_timestamp() - started_at) * 1000)::bigint AS started_ago,
             (extract(epoch FROM clock_timestamp() - heartbeat_at) * 1000)::bigint AS heartbeat_ago,
             (extract(epoch FROM clock_timestamp() - cancel_requested_at) * 1000)::bigint AS cancel_ago
      FROM oneshot.builds
      WHERE status IN ('launching', 'running')
      ORDER BY id
      """;

  public Future<List<LiveBuild>> live() {
    return pool.query(LIVE)
        .execute()
        .map(
            rows -> {
              List<LiveBuild> out = new ArrayList<>(rows.rowCount());
              for (Row r : rows) {
                out.add(
                    new LiveBuild(
                        r.getLong("id"),
                        BuildState.ofWire(r.getString("status")),
                        r.getInteger("attempt"),
                        r.getString("route"),
                        r.getString("provisioner"),
                        r.getString("launch_kind"),
                        r.getString("launch_name"),
                        r.getString("launch_namespace"),
                        r.getBoolean("launched"),
                        r.getBoolean("cancel_requested"),
                        r.getLong("claimed_ago"),
                        r.getLong("started_ago"),
                        r.getLong("heartbeat_ago"),
                        r.getLong("cancel_ago")));
              }
              return out;
            });
  }

  /**
   * The current status and attempt of some builds, for finding attempts nobody needs: whether the
   * attempt acquired the build, and how long ago the build finished (null while it runs).
   */
  public record Current(BuildState status, int attempt, boolean started, Long finishedAgoMs) {}

  public Future<Map<Long, Current>> current(List<Long> ids) {
    return pool.preparedQuery(
            """
            SELECT id, status, attempt, started_at IS NOT NULL AS started,
                   (extract(epoch FROM clock_timestamp() - finished_at) * 1000)::bigint AS finished_ago
            FROM oneshot.builds WHERE id = ANY ($1::bigint[])
            """)
        .execute(Tuple.of((Object) ids.toArray(Long[]::new)))
        .map(
            rows -> {
              Map<Long, Current> out = new HashMap<>();
              for (Row r : rows) {
                out.put(
                    r.getLong("id"),
                    new Current(
                        BuildState.ofWire(r.getString("status")),
                        r.getInteger("attempt"),
                        r.getBoolean("started"),
                        r.getLong("finished_ago")));
              }
              return out;
            });
  }

  // ---------------------------------------------------------------------------------------------
  // Reads

  private static final String BUILD_COLUMNS =
      """
      id, status, route, tags::text AS tags, workspace, priority, attempt,
      input->>'provisioner' AS provisioner, reason, created_at, claimed_at, launched_at,
      started_at, heartbeat_at, cancel_requested_at, finished_at, exit_code, error,
      outputs::text AS outputs, launch_kind, launch_name, launch_namespace, launch_pod,
      state_read_version, state_written_version, runner_id, runner::text AS runner, runner_since
      """;

  public Future<Optional<Build>> get(long id) {
    return pool.preparedQuery("SELECT " + BUILD_COLUMNS + " FROM oneshot.builds WHERE id = $1")
        .execute(Tuple.of(id))
        .compose(
            rows -> {
              if (rows.rowCount() == 0) {
                return Future.succeededFuture(Optional.empty());
              }
              Build b = toBuild(rows.iterator().next());
              return events(id).map(ev -> Optional.of(b.withEvents(ev)));
            });
  }

  public Future<List<BuildEvent>> events(long id) {
    return pool.preparedQuery(
            """
            SELECT at, attempt, from_status, to_status, reason FROM oneshot.build_events
            WHERE build_id = $1 ORDER BY id
            """)
        .execute(Tuple.of(id))
        .map(
            rows -> {
              List<BuildEvent> out = new ArrayList<>(rows.rowCount());
              for (Row r : rows) {
                String from = r.getString("from_status");
                out.add(
                    new BuildEvent(
                        instant(r, "at"),
                        r.getInteger("attempt"),
                        from == null ? null : BuildState.ofWire(from),
                        BuildState.ofWire(r.getString("to_status")),
                        r.getString("reason")));
              }
              return out;
            });
  }

  /** Newest first; {@code status} and {@code route} filter when not null. */
  public Future<List<Build>> list(BuildState status, String route, Long beforeId, int limit) {
    return pool.preparedQuery(
            "SELECT "
                + BUILD_COLUMNS
                + """
                FROM oneshot.builds
                WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR route = $2)
                  AND ($3::bigint IS NULL OR id < $3)
                ORDER BY id DESC LIMIT $4
                """)
        .execute(Tuple.of(status == null ? null : status.wire(), route, beforeId, limit))
        .map(
            rows -> {
              List<Build> out = new ArrayList<>(rows.rowCount());
              for (Row r : rows) {
                out.add(toBuild(r));
              }
              return out;
            });
  }

  /** A page of a build's log after {@code afterSeq}, and whether the build had finished. */
  public record LogPage(List<LogLine> lines, BuildState status) {}

  private static final String LOGS =
      """
      SELECT b.status, l.seq, l.ts, l.attempt, l.stream, l.level, l.stage, l.text
      FROM oneshot.builds b
      LEFT JOIN LATERAL (
        SELECT * FROM oneshot.build_logs l
        WHERE l.build_id = b.id AND l.seq > $2 ORDER BY l.seq LIMIT $3
      ) l ON true
      WHERE b.id = $1
      """;

  /**
   * Empty when the build does not exist. The status is read in the same statement as the lines, so
   * a finished status means no line can follow the page.
   */
  public Future<Optional<LogPage>> logs(long id, long afterSeq, int limit) {
    return pool.preparedQuery(LOGS)
        .execute(Tuple.of(id, afterSeq, limit))
        .map(
            rows -> {
              if (rows.rowCount() == 0) {
                return Optional.empty();
              }
              BuildState status = null;
              List<LogLine> lines = new ArrayList<>(rows.rowCount());
              for (Row r : rows) {
                status = BuildState.ofWire(r.getString("status"));
                if (r.getLong("seq") != null) {
                  lines.add(
                      new LogLine(
                          r.getLong("seq"),
                          instant(r, "ts"),
                          r.getInteger("attempt"),
                          r.getString("stream"),
                          r.getString("level"),
                          r.getString("stage"),
                          r.getString("text")));
                }
              }
              return Optional.of(new LogPage(lines, status));
            });
  }

  /**
   * A route with its queue: what {@code GET /api/v1/routes} and {@code oneshot routes} show. The
   * wait percentiles are over builds claimed in the last hour (null when there were none).
   */
  public record RouteStatus(
      String name,
      Map<String, String> tags,
      String template,
      int maxConcurrent,
      long queued,
      long running,
      Long oldestQueuedMs,
      Long waitP50Ms,
      Long waitP95Ms) {}

  private static final String ROUTES =
      """
      SELECT r.name, r.tags::text AS tags, r.template, r.max_concurrent,
             (SELECT count(*) FROM oneshot.builds b
              WHERE b.route = r.name AND b.status = 'pending') AS queued,
             (SELECT count(*) FROM oneshot.builds b
              WHERE b.route = r.name AND b.status IN ('launching', 'running')) AS running,
             (SELECT (extract(epoch FROM clock_timestamp() - b.created_at) * 1000)::bigint
              FROM oneshot.builds b WHERE b.route = r.name AND b.status = 'pending'
              ORDER BY b.id LIMIT 1) AS oldest,
             w.p50, w.p95
      FROM oneshot.routes r
      LEFT JOIN LATERAL (
        -- The last 1,000 claims of the hour at most: the cost stays flat however busy the route.
        SELECT (percentile_cont(0.5) WITHIN GROUP (ORDER BY c.waited) * 1000)::bigint AS p50,
               (percentile_cont(0.95) WITHIN GROUP (ORDER BY c.waited) * 1000)::bigint AS p95
        FROM (
          SELECT extract(epoch FROM c.claimed_at - c.created_at) AS waited
          FROM oneshot.builds c
          WHERE c.route = r.name AND c.claimed_at > clock_timestamp() - interval '1 hour'
          ORDER BY c.claimed_at DESC
          LIMIT 1000
        ) c
      ) w ON true
      ORDER BY r.position
      """;

  public Future<List<RouteStatus>> routes() {
    return readPool
        .query(ROUTES)
        .execute()
        .map(
            rows -> {
              List<RouteStatus> out = new ArrayList<>(rows.rowCount());
              for (Row r : rows) {
                out.add(
                    new RouteStatus(
                        r.getString("name"),
                        stringMap(r.getString("tags")),
                        r.getString("template"),
                        r.getInteger("max_concurrent"),
                        r.getLong("queued"),
                        r.getLong("running"),
                        r.getLong("oldest"),
                        r.getLong("p50"),
                        r.getLong("p95")));
              }
              return out;
            });
  }

  // ---------------------------------------------------------------------------------------------

  private static Optional<BuildState> firstState(RowSet<Row> rows, String column) {
    return rows.rowCount() == 0
        ? Optional.empty()
        : Optional.of(BuildState.ofWire(rows.iterator().next().getString(column)));
  }

  private static Build toBuild(Row r) {
    String kind = r.getString("launch_kind");
    return new Build(
        r.getLong("id"),
        BuildState.ofWire(r.getString("status")),
        r.getString("route"),
        stringMap(r.getString("tags")),
        r.getString("workspace"),
        r.getInteger("priority"),
        r.getInteger("attempt"),
        r.getString("provisioner"),
        r.getString("reason"),
        instant(r, "created_at"),
        instant(r, "claimed_at"),
        instant(r, "launched_at"),
        instant(r, "started_at"),
        instant(r, "heartbeat_at"),
        instant(r, "cancel_requested_at"),
        instant(r, "finished_at"),
        r.getInteger("exit_code"),
        r.getString("error"),
        Json.tree(r.getString("outputs")),
        kind == null
            ? null
            : new Build.Launch(
                kind,
                r.getString("launch_name"),
                r.getString("launch_namespace"),
                r.getString("launch_pod")),
        r.getInteger("state_read_version"),
        r.getInteger("state_written_version"),
        r.getString("runner_id") == null
            ? null
            : Build.BoundRunner.of(
                Runner.of(r.getString("runner_id"), Json.tree(r.getString("runner"))),
                instant(r, "runner_since")),
        List.of());
  }

  private static Instant instant(Row r, String column) {
    OffsetDateTime t = r.getOffsetDateTime(column);
    return t == null ? null : t.toInstant();
  }

  private static Map<String, String> stringMap(String json) {
    try {
      return Json.MAPPER.readValue(json, STRING_MAP);
    } catch (java.io.IOException e) {
      throw new IllegalStateException("tags column holds invalid JSON: " + json, e);
    }
  }
}
