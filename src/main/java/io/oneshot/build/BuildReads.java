package io.oneshot.build;

import io.vertx.core.Future;
import io.vertx.sqlclient.Pool;
import io.vertx.sqlclient.Row;
import io.vertx.sqlclient.Tuple;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/** What the API and the CLI read: builds, their timelines and logs, and the routes' queues. */
public final class BuildReads {
  private static final Sql OWNER = Sql.load("reads/owner");
  private static final Sql WORKSPACE_ROUTES = Sql.load("reads/workspace-routes");
  private static final Sql BUILD = Sql.load("reads/build");
  private static final Sql EVENTS = Sql.load("reads/events");
  private static final Sql LIST = Sql.load("reads/list");
  private static final Sql INPUT = Sql.load("reads/input");
  private static final Sql LOGS = Sql.load("reads/logs");
  private static final Sql ROUTES = Sql.load("reads/routes");
  private static final Sql WAITING = Sql.load("reads/waiting");
  private static final Sql HISTORY = Sql.load("reads/history");
  private static final Sql WORKSPACES = Sql.load("reads/workspaces");
  private static final Sql SHARES = Sql.load("share/shares");

  private final Pool pool;
  private final Pool readPool;

  /**
   * {@code readPool}: for the status reads that must answer while builds keep {@code pool} busy.
   */
  public BuildReads(Pool pool, Pool readPool) {
    this.pool = pool;
    this.readPool = readPool;
  }

  /** A build's input as it was submitted (JSON text); empty when there is no such build. */
  public Future<Optional<String>> input(long id) {
    return pool.preparedQuery(INPUT.text())
        .execute(Tuple.of(id))
        .map(
            rows ->
                rows.rowCount() == 0
                    ? Optional.empty()
                    : Optional.of(rows.iterator().next().getString("input")));
  }

  /** Whose a build is: its route, and the token that submitted it (null: another). */
  public record Owner(String route, Long token) {}

  /** Empty when there is no such build. */
  public Future<Optional<Owner>> owner(long id) {
    return pool.preparedQuery(OWNER.text())
        .execute(Tuple.of(id))
        .map(
            rows -> {
              if (rows.rowCount() == 0) {
                return Optional.<Owner>empty();
              }
              Row r = rows.iterator().next();
              return Optional.of(new Owner(r.getString("route"), r.getLong("submitted_token")));
            });
  }

  /**
   * The routes, of {@code among} (null: all), that have state of workspace {@code workspace}, in
   * name order; empty when none has.
   */
  public Future<java.util.Set<String>> workspaceRoutes(
      String workspace, java.util.Set<String> among) {
    return pool.preparedQuery(WORKSPACE_ROUTES.text())
        .execute(Tuple.of(workspace, (Object) names(among)))
        .map(
            rows -> {
              java.util.Set<String> out = new java.util.TreeSet<>();
              rows.forEach(r -> out.add(r.getString("route")));
              return out;
            });
  }

  public Future<Optional<Build>> get(long id) {
    return get(id, 0);
  }

  /**
   * One build with its timeline; a pending one with why it waits as its reason ({@code
   * globalLimit}: {@code dispatch.maxConcurrent}, 0 when unknown).
   */
  public Future<Optional<Build>> get(long id, int globalLimit) {
    return pool.preparedQuery(BUILD.text())
        .execute(Tuple.of(id))
        .compose(
            rows -> {
              if (rows.rowCount() == 0) {
                return Future.succeededFuture(Optional.empty());
              }
              return withWhy(List.of(Rows.build(rows.iterator().next())), globalLimit)
                  .compose(b -> events(id).map(ev -> Optional.of(b.get(0).withEvents(ev))));
            });
  }

  /**
   * The builds with each pending one's reason saying why it waits (followed by the reason it was
   * given, unless that was only "enqueued"); the others as they are.
   *
   * @param globalLimit {@code dispatch.maxConcurrent}, 0 when unknown
   */
  public Future<List<Build>> withWhy(List<Build> builds, int globalLimit) {
    Long[] pending =
        builds.stream()
            .filter(b -> b.status() == BuildState.PENDING)
            .map(Build::id)
            .toArray(Long[]::new);
    if (pending.length == 0) {
      return Future.succeededFuture(builds);
    }
    return waiting(pending, globalLimit)
        .map(
            why ->
                builds.stream()
                    .map(
                        b -> {
                          String w = why.get(b.id());
                          if (w == null) {
                            return b;
                          }
                          return b.withReason(
                              b.reason() == null || b.reason().equals("enqueued")
                                  ? w
                                  : w + "; " + b.reason());
                        })
                    .toList());
  }

  /**
   * Why pending builds wait, as a person would say it ({@link WaitReasons}): "workspace ws-1 is
   * busy with build 41 (running)", "route a is held by ...", "route default is at its limit 2/2; 3
   * builds ahead of this one", "the global limit 10/10 is reached", "team a is at 4 of its share 10
   * ...; team b borrows 3", or "next to be claimed on route default"; by build id. A build that is
   * not pending has none.
   */
  private Future<Map<Long, String>> waiting(Long[] ids, int globalLimit) {
    return pool.preparedQuery(WAITING.text())
        .execute(Tuple.of(ids))
        .compose(
            rows ->
                pool.query(SHARES.text())
                    .execute()
                    .map(
                        shares -> {
                          List<ShareStore.Share> teams = ShareStore.shares(shares);
                          Map<Long, String> out = new HashMap<>();
                          for (Row r : rows) {
                            out.put(
                                r.getLong("id"), WaitReasons.why(waiting(r), teams, globalLimit));
                          }
                          return out;
                        }));
  }

  private static WaitReasons.Waiting waiting(Row r) {
    return new WaitReasons.Waiting(
        r.getString("route"),
        r.getString("workspace"),
        r.getLong("workspace_build"),
        r.getString("workspace_status"),
        r.getInteger("max_concurrent"),
        r.getInteger("route_live"),
        r.getInteger("global_live"),
        r.getInteger("ahead"),
        r.getString("team"),
        ShareStore.Hold.of(r),
        Rows.instant(r, "team_held_at") == null
            ? null
            : new ShareStore.Hold(
                Rows.instant(r, "team_held_at"),
                r.getString("team_held_by"),
                r.getString("team_held_why")),
        r.getString("cluster"),
        r.getString("stalled"),
        Rows.instant(r, "stalled_at"));
  }

  /**
   * A claim's reason with how long the build was queued before it ("claimed by the dispatcher after
   * 6m39s queued, behind build 10 of workspace net"): said from a second up.
   */
  static String queued(String reason, Long queuedMs, Long behind, String workspace) {
    if (queuedMs == null || queuedMs < 1000) {
      return reason;
    }
    return (reason == null ? "claimed" : reason)
        + " after "
        + io.oneshot.config.Units.format(java.time.Duration.ofSeconds(queuedMs / 1000))
        + " queued"
        + (behind == null ? "" : ", behind build " + behind + " of workspace " + workspace);
  }

  public Future<List<BuildEvent>> events(long id) {
    return pool.preparedQuery(EVENTS.text())
        .execute(Tuple.of(id))
        .map(
            rows -> {
              List<BuildEvent> out = new ArrayList<>(rows.rowCount());
              for (Row r : rows) {
                String from = r.getString("from_status");
                out.add(
                    new BuildEvent(
                        Rows.instant(r, "at"),
                        r.getInteger("attempt"),
                        from == null ? null : BuildState.ofWire(from),
                        BuildState.ofWire(r.getString("to_status")),
                        queued(
                            r.getString("reason"),
                            r.getLong("queued_ms"),
                            r.getLong("behind_build"),
                            r.getString("behind_workspace"))));
              }
              return out;
            });
  }

  /**
   * What a list of builds is narrowed to; each part applies when not null.
   *
   * @param tags the tags a build's must contain, as a JSON object
   * @param since builds created at or after it
   */
  public record Filter(
      BuildState status, String route, String tags, String workspace, java.time.Instant since) {}

  /** Newest first, a page before {@code beforeId}; {@code routes}: a token's, null for all. */
  public Future<List<Build>> list(
      Filter f, Long beforeId, int limit, java.util.Set<String> routes) {
    return pool.preparedQuery(LIST.text())
        .execute(
            Tuple.from(
                java.util.Arrays.asList(
                    f.status() == null ? null : f.status().wire(),
                    f.route(),
                    beforeId,
                    limit,
                    names(routes),
                    f.tags(),
                    f.workspace(),
                    f.since() == null
                        ? null
                        : java.time.OffsetDateTime.ofInstant(f.since(), java.time.ZoneOffset.UTC))))
        .map(
            rows -> {
              List<Build> out = new ArrayList<>(rows.rowCount());
              for (Row r : rows) {
                out.add(Rows.build(r));
              }
              return out;
            });
  }

  /** A page of a build's log after {@code afterSeq}, and whether the build had finished. */
  public record LogPage(List<LogLine> lines, BuildState status) {}

  /**
   * Empty when the build does not exist. The status is read in the same statement as the lines, so
   * a finished status means no line can follow the page.
   */
  public Future<Optional<LogPage>> logs(long id, long afterSeq, int limit) {
    return pool.preparedQuery(LOGS.text())
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
                          Rows.instant(r, "ts"),
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

  /** A token's routes as a query parameter: null (every route) stays null. */
  private static String[] names(java.util.Set<String> routes) {
    return routes == null ? null : routes.toArray(String[]::new);
  }

  /** One route's queue at one minute: builds queued, and claimed (launching or running). */
  public record QueuePoint(String route, long at, long queued, long running) {}

  /**
   * Each route's queue, a point per minute of the last hour; {@code routes}: a token's, or null.
   */
  public Future<List<QueuePoint>> history(java.util.Set<String> routes) {
    return readPool
        .preparedQuery(HISTORY.text())
        .execute(Tuple.of(names(routes)))
        .map(
            rows -> {
              List<QueuePoint> out = new ArrayList<>(rows.rowCount());
              for (Row r : rows) {
                out.add(
                    new QueuePoint(
                        r.getString("route"),
                        r.getLong("at"),
                        r.getLong("queued"),
                        r.getLong("running")));
              }
              return out;
            });
  }

  /**
   * A route's workspace: its latest state version, how many it has, when it last changed (null, 0
   * and null before its first state); the build that holds it (its earliest unfinished one, null
   * when none) with that build's status, since when it is busy, and how many builds wait behind it
   * (the first five of them in {@code waitingBuilds}).
   */
  public record WorkspaceSummary(
      String route,
      String workspace,
      Integer latest,
      long versions,
      Instant updatedAt,
      Long heldBy,
      String heldByStatus,
      Instant busySince,
      long waiting,
      List<Long> waitingBuilds) {}

  public Future<List<WorkspaceSummary>> workspaces(java.util.Set<String> routes) {
    return readPool
        .preparedQuery(WORKSPACES.text())
        .execute(Tuple.of(names(routes)))
        .map(
            rows -> {
              List<WorkspaceSummary> out = new ArrayList<>(rows.rowCount());
              for (Row r : rows) {
                out.add(
                    new WorkspaceSummary(
                        r.getString("route"),
                        r.getString("workspace"),
                        r.getInteger("latest"),
                        r.getLong("versions"),
                        Rows.instant(r, "updated_at"),
                        r.getLong("holder"),
                        r.getString("holder_status"),
                        Rows.instant(r, "busy_since"),
                        r.getLong("waiting"),
                        r.getArrayOfLongs("waiting_ids") == null
                            ? List.of()
                            : List.of(r.getArrayOfLongs("waiting_ids"))));
              }
              return out;
            });
  }

  /**
   * A route with its queue: what {@code GET /api/v1/routes} and {@code oneshot routes} show. The
   * wait percentiles are over builds claimed in the last hour (null when there were none), the run
   * percentiles (from provisionerd's acquire to the end) and the counts of builds that succeeded or
   * failed ({@code finishedLastHour}) and failed over those that ended in the last hour; {@code
   * oldestQueuedReason}: why the oldest queued build waits (null when not asked for); {@code team}:
   * the team it shares a weight with (its own name when it names none); {@code held}: an operator's
   * hold on the route itself (null: none; its team's is the team's); {@code cluster}: where its
   * builds launch; {@code stalled}: why it takes no launches now, its cluster being in trouble
   * (null: it does).
   */
  public record RouteStatus(
      String name,
      Map<String, String> tags,
      String template,
      int maxConcurrent,
      long queued,
      long running,
      Long oldestQueuedMs,
      Long oldestQueuedId,
      String oldestQueuedReason,
      Long waitP50Ms,
      Long waitP95Ms,
      Long runP50Ms,
      Long runP95Ms,
      long finishedLastHour,
      long failedLastHour,
      Warm warm,
      String team,
      ShareStore.Hold held,
      String cluster,
      Stall stalled) {

    RouteStatus withOldestQueuedReason(String why) {
      return new RouteStatus(
          name,
          tags,
          template,
          maxConcurrent,
          queued,
          running,
          oldestQueuedMs,
          oldestQueuedId,
          why,
          waitP50Ms,
          waitP95Ms,
          runP50Ms,
          runP95Ms,
          finishedLastHour,
          failedLastHour,
          warm,
          team,
          held,
          cluster,
          stalled);
    }
  }

  /** Why a route takes no launches now, and since when. */
  public record Stall(String why, Instant since) {}

  /**
   * A warm route's balloons as the leader last counted ({@code wanted}, {@code why}) and saw them
   * ({@code running}, {@code pending}, {@code trouble} keeping them), at {@code countedAt}, and
   * their cost over the last day: {@code balloonHours} and {@code preemptions} (a build's pod took
   * a balloon's place).
   */
  public record Warm(
      int wanted,
      int running,
      int pending,
      String why,
      String trouble,
      Instant countedAt,
      double balloonHours,
      int preemptions) {}

  /**
   * {@link #routes()}, each with why its oldest queued build waits ({@link WaitReasons}; {@code
   * globalLimit}: {@code dispatch.maxConcurrent}).
   */
  public Future<List<RouteStatus>> routes(int globalLimit) {
    return routes()
        .compose(
            list -> {
              Long[] oldest =
                  list.stream()
                      .map(RouteStatus::oldestQueuedId)
                      .filter(java.util.Objects::nonNull)
                      .toArray(Long[]::new);
              if (oldest.length == 0) {
                return Future.succeededFuture(list);
              }
              return waiting(oldest, globalLimit)
                  .map(
                      why ->
                          list.stream()
                              .map(
                                  r ->
                                      r.oldestQueuedId() == null
                                          ? r
                                          : r.withOldestQueuedReason(why.get(r.oldestQueuedId())))
                              .toList());
            });
  }

  public Future<List<RouteStatus>> routes() {
    return readPool
        .query(ROUTES.text())
        .execute()
        .map(
            rows -> {
              List<RouteStatus> out = new ArrayList<>(rows.rowCount());
              for (Row r : rows) {
                out.add(
                    new RouteStatus(
                        r.getString("name"),
                        Rows.stringMap(r.getString("tags")),
                        r.getString("template"),
                        r.getInteger("max_concurrent"),
                        r.getLong("queued"),
                        r.getLong("running"),
                        r.getLong("oldest"),
                        r.getLong("oldest_id"),
                        null,
                        r.getLong("p50"),
                        r.getLong("p95"),
                        r.getLong("run_p50"),
                        r.getLong("run_p95"),
                        r.getLong("finished"),
                        r.getLong("failed"),
                        r.getInteger("warm_wanted") == null
                            ? null
                            : new Warm(
                                r.getInteger("warm_wanted"),
                                r.getInteger("warm_running"),
                                r.getInteger("warm_pending"),
                                r.getString("warm_why"),
                                r.getString("warm_trouble"),
                                Instant.ofEpochMilli(r.getLong("warm_at")),
                                r.getNumeric("warm_hours").doubleValue(),
                                r.getInteger("warm_preemptions")),
                        r.getString("team"),
                        ShareStore.Hold.of(r),
                        r.getString("cluster"),
                        r.getString("stalled") == null
                            ? null
                            : new Stall(r.getString("stalled"), Rows.instant(r, "stalled_at"))));
              }
              return out;
            });
  }
}
