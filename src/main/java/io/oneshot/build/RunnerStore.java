package io.oneshot.build;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.api.Json;
import io.oneshot.build.StateStore.StateSaved;
import io.oneshot.build.StateStore.StateUpload;
import io.vertx.core.Future;
import io.vertx.core.buffer.Buffer;
import io.vertx.sqlclient.Pool;
import io.vertx.sqlclient.Row;
import io.vertx.sqlclient.RowSet;
import io.vertx.sqlclient.Tuple;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;
import java.util.function.Function;

/**
 * The calls of provisionerd, the runner: acquire, heartbeat, logs, complete. The token's hash names
 * the build and attempt; after the first acquire only the runner it bound may call, so that one
 * attempt has one runner.
 */
public final class RunnerStore {
  private static final Sql ACQUIRE = Sql.load("runner/acquire");
  private static final Sql ACQUIRE_MANY = Sql.load("runner/acquire-many");
  private static final Sql CONFLICT = Sql.load("runner/conflict");
  private static final Sql HEARTBEAT = Sql.load("runner/heartbeat");
  private static final Sql HEARTBEAT_MANY = Sql.load("runner/heartbeat-many");
  private static final Sql APPEND_LOGS = Sql.load("runner/append-logs");
  private static final Sql COMPLETE = Sql.load("runner/complete");
  private static final Sql COMPLETE_MANY = Sql.load("runner/complete-many");
  private static final Sql TOKEN_STATE = Sql.load("runner/token-state");
  private static final Sql CODER_JOB = Sql.load("runner/coder-job");

  private final Pool pool;

  private final Sealer sealer;

  private final Wakes wakes;

  /**
   * Most calls of one kind written by one statement: runners' acquires, heartbeats and completions
   * go by group commit ({@link GroupCommit}).
   */
  static final int MAX_BATCH = 64;

  /**
   * Most statements of one kind under way at once, so at most this many of the pool's connections
   * each. One: a call that comes while one is under way waits for it (a statement's time, under a
   * millisecond here) and goes with the others that came meanwhile. With two, the second statement
   * mostly carried the few calls that came just after the first left, and a call alone costs
   * PostgreSQL five to six times a call written with others: in the drain, PostgreSQL's CPU went
   * from 0.37 ms a build with two to 0.23 to 0.28 ms with one (docs/performance.md).
   */
  static final int STATEMENTS_AT_ONCE = 1;

  /**
   * The longest a statement for several calls waits for a build's row that another transaction
   * holds. Past it the statement fails and each call is written again alone, waiting as long as it
   * takes: one held row holds up its own call, not the others it was written with.
   */
  static final Duration HELD_ROW_WAIT = Duration.ofMillis(50);

  /** PostgreSQL's lock_timeout for a statement for several calls. */
  private static final String HELD_ROW_TIMEOUT = HELD_ROW_WAIT.toMillis() + "ms";

  private final GroupCommit<AcquireCall, Acquire> acquires;

  private final GroupCommit<CompleteCall, Optional<Completed>> completions;

  /**
   * Every running build's runner heartbeats once a {@code heartbeatInterval}: a thousand builds
   * running make a thousand calls a second, which go as a few statements and commits.
   */
  private final GroupCommit<HeartbeatCall, Optional<Boolean>> heartbeats;

  /** The acquires' group commit (for tests). */
  GroupCommit<AcquireCall, Acquire> acquires() {
    return acquires;
  }

  record AcquireCall(byte[] tokenHash, Runner runner, io.oneshot.launch.AttemptRef proven) {
    AcquireCall(byte[] tokenHash, Runner runner) {
      this(tokenHash, runner, null);
    }

    Long provenBuild() {
      return proven == null ? null : proven.buildId();
    }

    Integer provenAttempt() {
      return proven == null ? null : proven.attempt();
    }
  }

  record CompleteCall(byte[] tokenHash, String runnerId, Completion completion) {}

  record HeartbeatCall(byte[] tokenHash, String runnerId) {}

  public RunnerStore(Pool pool, Sealer sealer) {
    this.pool = pool;
    this.sealer = sealer;
    this.wakes = new Wakes(pool);
    this.acquires = byToken(AcquireCall::tokenHash, this::acquireTogether);
    this.completions = byToken(CompleteCall::tokenHash, this::completeTogether);
    this.heartbeats = byToken(HeartbeatCall::tokenHash, this::heartbeatTogether);
  }

  /** A group commit of one kind of call, at most one call of a token in a statement. */
  private static <Q, R> GroupCommit<Q, R> byToken(
      Function<Q, byte[]> token, Function<List<Q>, Future<List<R>>> statement) {
    return new GroupCommit<>(
        MAX_BATCH, STATEMENTS_AT_ONCE, c -> ByteBuffer.wrap(token.apply(c)), statement);
  }

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

    /**
     * The attempt is this runner's, but what it must be handed (its sensitive values, its
     * workspace's state) is sealed with a key this dispatcher does not have, or does not open.
     */
    record Unsealable(long buildId, int attempt, String route, String why) implements Acquire {}
  }

  /**
   * Acquires the attempt {@code tokenHash} names for {@code runner}. Acquires that arrive together
   * are written together, each with the answer it would get alone.
   */
  public Future<Acquire> acquire(byte[] tokenHash, Runner runner) {
    return acquire(tokenHash, runner, null);
  }

  /**
   * {@link #acquire(byte[], Runner)} by a runner proven to be the one launched for {@code proven}
   * (null: proven for no attempt, from a test's launcher): a token of another attempt binds nothing
   * and answers {@link Acquire.NoAttempt}.
   */
  public Future<Acquire> acquire(
      byte[] tokenHash, Runner runner, io.oneshot.launch.AttemptRef proven) {
    return acquires.submit(new AcquireCall(tokenHash, runner, proven));
  }

  Future<List<Acquire>> acquireTogether(List<AcquireCall> calls) {
    if (calls.size() == 1) {
      AcquireCall c = calls.getFirst();
      return pool.preparedQuery(ACQUIRE.text())
          .execute(
              Tuple.of(
                  Buffer.buffer(c.tokenHash()),
                  c.runner().id(),
                  Json.write(c.runner().details()),
                  c.provenBuild(),
                  c.provenAttempt()))
          .map(
              rows ->
                  List.of(
                      rows.rowCount() == 0
                          ? new Acquire.NoAttempt()
                          : acquired(rows.iterator().next())));
    }
    int n = calls.size();
    Buffer[] hashes = new Buffer[n];
    String[] ids = new String[n];
    String[] details = new String[n];
    Long[] builds = new Long[n];
    Integer[] attempts = new Integer[n];
    for (int i = 0; i < n; i++) {
      AcquireCall c = calls.get(i);
      hashes[i] = Buffer.buffer(c.tokenHash());
      ids[i] = c.runner().id();
      details[i] = Json.write(c.runner().details());
      builds[i] = c.provenBuild();
      attempts[i] = c.provenAttempt();
    }
    return pool.preparedQuery(ACQUIRE_MANY.text())
        .execute(Tuple.of(hashes, ids, details, HELD_ROW_TIMEOUT, builds, attempts))
        .map(
            rows -> {
              List<Acquire> out = new ArrayList<>(Collections.nCopies(n, new Acquire.NoAttempt()));
              for (Row r : rows) {
                out.set(call(r), acquired(r));
              }
              return out;
            });
  }

  /** The call a row of a statement for several answers: its place in the statement's arrays. */
  private static int call(Row r) {
    return r.getLong("call").intValue() - 1;
  }

  /** An acquire's row: granted, held by another runner, or granted but not to be opened here. */
  private Acquire acquired(Row r) {
    if (r.getLong("id") == null) {
      return new Acquire.HeldByOther(
          new Holder(
              r.getLong("held_id"),
              r.getInteger("held_attempt"),
              r.getString("held_route"),
              Rows.runner(r, "held_by", "held_runner"),
              Rows.instant(r, "held_since")));
    }
    try {
      return granted(r);
    } catch (Sealer.SealedException e) {
      return new Acquire.Unsealable(
          r.getLong("id"), r.getInteger("attempt"), r.getString("route"), e.getMessage());
    }
  }

  private Acquire granted(Row r) {
    return new Acquire.Granted(
        new Acquired(
            r.getLong("id"),
            r.getInteger("attempt"),
            r.getString("route"),
            r.getString("workspace"),
            Sensitive.merge(
                Json.tree(r.getString("input")),
                sealer.open(r.getString("sealed"), Sealer.sensitive(r.getLong("id")))),
            r.getLong("timeout_ms"),
            r.getLong("cancel_grace_ms"),
            r.getBoolean("cancel_requested"),
            r.getInteger("state_read_version"),
            r.getString("state") == null
                ? null
                : sealer.open(
                    r.getString("state"),
                    Sealer.workspaceState(
                        r.getString("route"),
                        r.getString("workspace"),
                        r.getInteger("state_read_version"))),
            r.getBoolean("first"),
            r.getDouble("start_seconds")));
  }

  /**
   * Writes a refused second runner into the build's log and timeline (nothing when the attempt is
   * no longer current).
   */
  public Future<Void> recordConflict(long id, int attempt, String text) {
    return pool.preparedQuery(CONFLICT.text()).execute(Tuple.of(id, attempt, text)).mapEmpty();
  }

  /**
   * Empty: the token is not the running attempt's, or the caller is not its runner. Otherwise
   * whether cancel was requested.
   */
  public Future<Optional<Boolean>> heartbeat(byte[] tokenHash, String runnerId) {
    return heartbeats.submit(new HeartbeatCall(tokenHash, runnerId));
  }

  Future<List<Optional<Boolean>>> heartbeatTogether(List<HeartbeatCall> calls) {
    if (calls.size() == 1) {
      HeartbeatCall c = calls.getFirst();
      return pool.preparedQuery(HEARTBEAT.text())
          .execute(Tuple.of(Buffer.buffer(c.tokenHash()), c.runnerId()))
          .map(
              rows ->
                  List.of(
                      rows.rowCount() == 0
                          ? Optional.empty()
                          : Optional.of(rows.iterator().next().getBoolean("cancel_requested"))));
    }
    int n = calls.size();
    Buffer[] hashes = new Buffer[n];
    String[] runners = new String[n];
    for (int i = 0; i < n; i++) {
      hashes[i] = Buffer.buffer(calls.get(i).tokenHash());
      runners[i] = calls.get(i).runnerId();
    }
    return pool.preparedQuery(HEARTBEAT_MANY.text())
        .execute(Tuple.of(hashes, runners, HELD_ROW_TIMEOUT))
        .map(
            rows -> {
              List<Optional<Boolean>> out =
                  new ArrayList<>(Collections.nCopies(n, Optional.empty()));
              for (Row r : rows) {
                out.set(call(r), Optional.of(r.getBoolean("cancel_requested")));
              }
              return out;
            });
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
    return pool.preparedQuery(APPEND_LOGS.text())
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
      StateUpload state,
      JsonNode usage) {
    /** A completion that says nothing of what the build met of its pod's limits. */
    public Completion(
        BuildState outcome,
        Integer exitCode,
        String error,
        JsonNode outputs,
        String reason,
        StateUpload state) {
      this(outcome, exitCode, error, outputs, reason, state, null);
    }
  }

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

  private static Completed completed(Row r, String stateRefused) {
    return new Completed(
        r.getLong("id"),
        r.getInteger("attempt"),
        BuildState.ofWire(r.getString("status")),
        r.getString("route"),
        r.getDouble("ran"),
        stateRefused);
  }

  /**
   * Ends the running attempt's build with provisionerd's outcome and stores its final state, in one
   * transaction, from the bound runner alone. A final state that is refused (see {@link
   * #saveState}) is not stored; the outcome still is, and {@code stateRefused} says why. Empty: the
   * token is not the running attempt's, or the caller not its runner (see {@link #tokenState}).
   * Completions without a state that arrive together are written together, each with the answer it
   * would get alone.
   */
  public Future<Optional<Completed>> complete(byte[] tokenHash, String runnerId, Completion c) {
    Future<Optional<Completed>> done;
    if (c.state() == null) {
      done = completions.submit(new CompleteCall(tokenHash, runnerId, c));
    } else {
      done = completeWithState(new CompleteCall(tokenHash, runnerId, c));
    }
    // Committed: now its notifications (runner/complete.sql leaves them out).
    return done.onSuccess(x -> x.ifPresent(d -> wakes.ended(d.id())));
  }

  private static String outputs(Completion c) {
    return c.outputs() == null ? null : Json.write(c.outputs());
  }

  Future<List<Optional<Completed>>> completeTogether(List<CompleteCall> calls) {
    if (calls.size() == 1) {
      return pool.preparedQuery(COMPLETE.text())
          .execute(completeTuple(calls.getFirst()))
          .map(rows -> List.of(firstCompleted(rows, null)));
    }
    return pool.preparedQuery(COMPLETE_MANY.text())
        .execute(completeManyTuple(calls))
        .map(rows -> completedEach(rows, calls.size()));
  }

  /** runner/complete's parameters for one call. */
  private static Tuple completeTuple(CompleteCall call) {
    Completion c = call.completion();
    return Tuple.tuple()
        .addBuffer(Buffer.buffer(call.tokenHash()))
        .addString(c.outcome().wire())
        .addInteger(c.exitCode())
        .addString(c.error())
        .addString(outputs(c))
        .addString(c.reason())
        .addString(call.runnerId())
        .addString(c.usage() == null ? null : Json.write(c.usage()));
  }

  private static Optional<Completed> firstCompleted(RowSet<Row> rows, String stateRefused) {
    return rows.rowCount() == 0
        ? Optional.empty()
        : Optional.of(completed(rows.iterator().next(), stateRefused));
  }

  /** runner/complete-many's parameters for {@code calls}: one array a column. */
  private static Tuple completeManyTuple(List<CompleteCall> calls) {
    int n = calls.size();
    Buffer[] hashes = new Buffer[n];
    String[] status = new String[n];
    Integer[] exitCode = new Integer[n];
    String[] error = new String[n];
    String[] outputs = new String[n];
    String[] reason = new String[n];
    String[] runnerId = new String[n];
    String[] usage = new String[n];
    for (int i = 0; i < n; i++) {
      CompleteCall call = calls.get(i);
      Completion c = call.completion();
      hashes[i] = Buffer.buffer(call.tokenHash());
      status[i] = c.outcome().wire();
      exitCode[i] = c.exitCode();
      error[i] = c.error();
      outputs[i] = outputs(c);
      reason[i] = c.reason();
      runnerId[i] = call.runnerId();
      usage[i] = c.usage() == null ? null : Json.write(c.usage());
    }
    return Tuple.of(
        hashes, status, exitCode, error, outputs, reason, runnerId, HELD_ROW_TIMEOUT, usage);
  }

  /** runner/complete-many's answer to {@code n} calls, in their order. */
  private static List<Optional<Completed>> completedEach(RowSet<Row> rows, int n) {
    List<Optional<Completed>> out = new ArrayList<>(Collections.nCopies(n, Optional.empty()));
    for (Row r : rows) {
      out.set(call(r), Optional.of(completed(r, null)));
    }
    return out;
  }

  /** A completion with a final state: the state and the outcome in one transaction. */
  private Future<Optional<Completed>> completeWithState(CompleteCall c) {
    StateUpload state = c.completion().state();
    return pool.withTransaction(
        conn ->
            StateStore.saveState(conn, sealer, c.tokenHash(), c.runnerId(), state, true)
                .compose(
                    saved ->
                        conn.preparedQuery(COMPLETE.text())
                            .execute(completeTuple(c))
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

  /** A running coder build of its runner: its attempt, coder source and organization. */
  public record CoderBuild(long id, int attempt, String source, String organization) {}

  /** The running coder build of this token and runner; empty for any other build. */
  public Future<Optional<CoderBuild>> coderBuild(byte[] tokenHash, String runnerId) {
    return pool.preparedQuery(CODER_JOB.text())
        .execute(Tuple.of(Buffer.buffer(tokenHash), runnerId))
        .map(
            rows -> {
              if (rows.rowCount() == 0) {
                return Optional.<CoderBuild>empty();
              }
              Row r = rows.iterator().next();
              return Optional.of(
                  new CoderBuild(
                      r.getLong("id"),
                      r.getInteger("attempt"),
                      r.getString("source"),
                      r.getString("organization")));
            });
  }

  public Future<Optional<TokenState>> tokenState(byte[] tokenHash) {
    return pool.preparedQuery(TOKEN_STATE.text())
        .execute(Tuple.of(Buffer.buffer(tokenHash)))
        .map(RunnerStore::firstTokenState);
  }

  private static Optional<TokenState> firstTokenState(RowSet<Row> rows) {
    if (rows.rowCount() == 0) {
      return Optional.empty();
    }
    Row r = rows.iterator().next();
    return Optional.of(
        new TokenState(
            r.getLong("id"),
            r.getInteger("attempt"),
            r.getString("route"),
            BuildState.ofWire(r.getString("status")),
            Rows.runner(r, "runner_id", "runner"),
            Rows.instant(r, "runner_since")));
  }
}
