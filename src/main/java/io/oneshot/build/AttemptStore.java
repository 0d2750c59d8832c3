package io.oneshot.build;

import io.vertx.core.Future;
import io.vertx.core.buffer.Buffer;
import io.vertx.sqlclient.Pool;
import io.vertx.sqlclient.Row;
import io.vertx.sqlclient.Tuple;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * A claimed build's attempt as the dispatcher and the rescuer handle it: its launch recorded, its
 * token replaced, the build requeued or ended, its steps and oneshot's own lines written to the
 * build, and what the rescuer reads to decide. Every write names the attempt it is about, and does
 * nothing once that attempt is no longer current.
 */
public final class AttemptStore {
  private static final Sql MARK_LAUNCHED = Sql.load("attempts/mark-launched");
  private static final Sql RETOKEN = Sql.load("attempts/retoken");
  private static final Sql POD = Sql.load("attempts/pod");
  private static final Sql LAUNCH_WAIT = Sql.load("attempts/launch-wait");
  private static final Sql LAUNCH_TRY = Sql.load("attempts/launch-try");
  private static final Sql REQUEUE = Sql.load("attempts/requeue");
  private static final Sql FINISH = Sql.load("attempts/finish");
  private static final Sql MILESTONE = Sql.load("attempts/milestone");
  private static final Sql RUNS_IN = Sql.load("attempts/runs-in");
  private static final Sql REMOVED = Sql.load("attempts/removed");
  private static final Sql SYSTEM_LOG = Sql.load("attempts/system-log");
  private static final Sql LIVE = Sql.load("attempts/live");
  private static final Sql CURRENT = Sql.load("attempts/current");

  private final Pool pool;

  public AttemptStore(Pool pool) {
    this.pool = pool;
  }

  /** A launch the launcher confirmed: what {@link #markLaunched(List)} records. */
  public record Launch(
      long id, int attempt, String kind, String name, String namespace, String detail) {}

  /**
   * Records that the launcher confirmed the attempt. Empty: the attempt is no longer current;
   * otherwise the seconds from enqueue to launch. Tried again while another transaction holds the
   * build's row FOR UPDATE (a rare call: the dispatcher's launches go through its recorder, in
   * batches).
   */
  public Future<Optional<Double>> markLaunched(
      long id, int attempt, String kind, String name, String namespace, String detail) {
    return markLaunched(List.of(new Launch(id, attempt, kind, name, namespace, detail)))
        .compose(
            m ->
                m.held().isEmpty()
                    ? Future.succeededFuture(Optional.ofNullable(m.recorded().get(id)))
                    : markLaunched(id, attempt, kind, name, namespace, detail));
  }

  /**
   * What one write of launches did: each build recorded, with the seconds from its enqueue to its
   * launch; the builds whose rows another transaction held, not recorded (their attempt was current
   * as far as the write could see: try them again). A build in neither was no longer current.
   */
  public record Marked(Map<Long, Double> recorded, Set<Long> held) {}

  /**
   * Records many confirmed launches in one statement and one commit, without waiting for a row
   * another transaction holds (attempts/mark-launched.sql says why).
   */
  public Future<Marked> markLaunched(List<Launch> launches) {
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
    return pool.preparedQuery(MARK_LAUNCHED.text())
        .execute(Tuple.of(ids, attempts, kinds, names, namespaces, details))
        .map(
            rows -> {
              Map<Long, Double> recorded = new HashMap<>();
              Set<Long> held = new HashSet<>();
              for (Row r : rows) {
                if (r.getBoolean("held")) {
                  held.add(r.getLong("id"));
                } else {
                  recorded.put(r.getLong("id"), r.getDouble("dispatch"));
                }
              }
              return new Marked(recorded, held);
            });
  }

  /**
   * Gives a claimed build whose token was lost (the dispatcher stopped between claim and launch) a
   * new one, before launching it again. False: the attempt is no longer current.
   */
  public Future<Boolean> retoken(long id, int attempt, BuildToken token) {
    return pool.preparedQuery(RETOKEN.text())
        .execute(Tuple.of(id, attempt, Buffer.buffer(token.hash())))
        .map(rows -> rows.rowCount() == 1);
  }

  /** The build's own pod settings (JSON), or null when it asked for none. */
  public Future<String> podSettings(long id) {
    return pool.preparedQuery(POD.text())
        .execute(Tuple.of(id))
        .map(rows -> rows.iterator().hasNext() ? rows.iterator().next().getString("pod") : null);
  }

  /**
   * Says in a claimed build's reason why its launch waits and when it is tried next. False: the
   * attempt is no longer current or was launched, and the launch is not tried again.
   */
  public Future<Boolean> launchWaits(long id, int attempt, String reason) {
    return pool.preparedQuery(LAUNCH_WAIT.text())
        .execute(Tuple.of(id, attempt, reason))
        .map(rows -> rows.rowCount() == 1);
  }

  /**
   * Before a launch is tried (again): true when the attempt is still current and unlaunched and,
   * with a {@code fence}, its leadership session still holds the leader lock; the reason then says
   * {@code reason}. False: the launch must not be tried.
   */
  public Future<Boolean> launchTry(long id, int attempt, String reason, LeaderFence fence) {
    return pool.preparedQuery(LAUNCH_TRY.text())
        .execute(
            Tuple.of(
                id,
                attempt,
                reason,
                fence == null ? null : fence.pid(),
                fence == null ? null : fence.sessionStart(),
                (long) AdvisoryLocks.CLASS,
                (long) AdvisoryLocks.LEADER))
        .map(rows -> rows.rowCount() == 1);
  }

  /**
   * Puts a build whose attempt failed for infrastructure reasons back in the queue, or fails it if
   * that was its last attempt. The old attempt's token stops working. Empty: the attempt is no
   * longer current.
   */
  public Future<Optional<BuildState>> requeue(
      long id, int attempt, BuildState from, String reason) {
    return pool.preparedQuery(REQUEUE.text())
        .execute(Tuple.of(id, attempt, from.wire(), reason))
        .map(rows -> Rows.firstState(rows, "status"));
  }

  /** A build the dispatcher ended: its route, and how long it ran (null: it never ran). */
  public record Ended(String route, Double ranSeconds) {}

  /** Ends a build as failed or canceled from the dispatcher's side. Empty: lost race. */
  public Future<Optional<Ended>> finish(
      long id, int attempt, BuildState from, BuildState to, String reason) {
    return pool.preparedQuery(FINISH.text())
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

  /**
   * Marks a step within the current attempt (pod scheduled, container started) in the build's
   * timeline. Nothing happens when the attempt is no longer current.
   */
  public Future<Void> milestone(long id, int attempt, String reason) {
    return pool.preparedQuery(MILESTONE.text()).execute(Tuple.of(id, attempt, reason)).mapEmpty();
  }

  /** Records the pod (or process) the current attempt runs in. */
  public Future<Void> runsIn(long id, int attempt, String pod) {
    return pool.preparedQuery(RUNS_IN.text()).execute(Tuple.of(id, attempt, pod)).mapEmpty();
  }

  /**
   * Marks an attempt's launch record removed: the launcher deleted what ran it, with why. The first
   * removal is kept.
   */
  public Future<Void> removed(long id, int attempt, String why) {
    return pool.preparedQuery(REMOVED.text()).execute(Tuple.of(id, attempt, why)).mapEmpty();
  }

  /**
   * Appends a line from oneshot itself (the dispatcher, the launcher) to a build's log; returns the
   * build's route, empty when there is no such build.
   */
  public Future<Optional<String>> systemLog(long id, int attempt, String level, String text) {
    return systemLog(id, attempt, level, text, false);
  }

  /**
   * {@link #systemLog}; with {@code waitReason}, the line is also the build's reason while it is
   * launching (what it waits for).
   */
  public Future<Optional<String>> systemLog(
      long id, int attempt, String level, String text, boolean waitReason) {
    return pool.preparedQuery(SYSTEM_LOG.text())
        .execute(Tuple.of(id, attempt, level, text, waitReason ? text : null))
        .map(rows -> Rows.firstString(rows, "route"));
  }

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

  public Future<List<LiveBuild>> live() {
    return pool.preparedQuery(LIVE.text())
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
    return pool.preparedQuery(CURRENT.text())
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
}
