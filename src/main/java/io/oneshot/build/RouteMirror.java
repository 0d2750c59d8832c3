package io.oneshot.build;

import io.oneshot.api.Json;
import io.oneshot.config.Globs;
import io.oneshot.config.OneshotConfig;
import io.vertx.core.Future;
import io.vertx.sqlclient.Pool;
import io.vertx.sqlclient.SqlClient;
import io.vertx.sqlclient.Tuple;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * The configuration's routes and size caps, mirrored into the database, where {@code
 * oneshot.enqueue()} binds builds to routes and the claim counts against their limits.
 */
public final class RouteMirror {
  private static final Sql DELETE_MISSING = Sql.load("routes/delete-missing");
  private static final Sql UPSERT = Sql.load("routes/upsert");
  private static final Sql LIMITS = Sql.load("routes/limits");
  private static final Sql FAIL_ORPHANED = Sql.load("routes/fail-orphaned");
  private static final Sql STRANDED = Sql.load("routes/stranded-workspaces");
  private static final Sql TEAMS = Sql.load("routes/teams");
  private static final Sql STALLED = Sql.load("routes/stalled");

  private final Pool pool;

  public RouteMirror(Pool pool) {
    this.pool = pool;
  }

  /**
   * Writes the configured routes (in order) and size caps, and fails queued builds whose route is
   * gone, in one transaction. Returns the routes of the builds it failed, one per build.
   */
  public Future<List<String>> write(List<OneshotConfig.Route> routes, OneshotConfig.Limits limits) {
    return write(routes, limits, r -> Map.of());
  }

  /** {@link #write(List, OneshotConfig.Limits)} with the configuration's teams. */
  public Future<List<String>> write(OneshotConfig config) {
    return write(config, r -> Map.of());
  }

  /**
   * {@link #write(List, OneshotConfig.Limits, Function)} with the configuration's teams, in the
   * same transaction: a claim never sees the routes of one configuration with the teams of another.
   */
  public Future<List<String>> write(
      OneshotConfig config,
      Function<OneshotConfig.Route, Map<String, Map<String, String>>> templateResources) {
    return write(config.routes(), config.limits(), templateResources, config.allTeams());
  }

  /** Writes the teams (every route's); teams no longer there go, holds stay. */
  private static Future<?> teams(SqlClient conn, List<OneshotConfig.Team> teams) {
    return conn.preparedQuery(TEAMS.text())
        .execute(
            Tuple.of(
                teams.stream().map(OneshotConfig.Team::name).toArray(String[]::new),
                teams.stream().map(OneshotConfig.Team::weight).toArray(Integer[]::new),
                teams.stream().map(OneshotConfig.Team::guaranteed).toArray(Integer[]::new),
                teams.stream().map(OneshotConfig.Team::borrowLimit).toArray(Integer[]::new),
                teams.stream().map(OneshotConfig.Team::maxConcurrent).toArray(Integer[]::new)));
  }

  /**
   * {@link #write(List, OneshotConfig.Limits)}, with each route's pod rules mirrored for {@code
   * oneshot.check_pod()} together with what its template's provisionerd container asks ({@code
   * templateResources}: {requests: {...}, limits: {...}}, what a build's own request is checked
   * against when it gives no limit).
   */
  public Future<List<String>> write(
      List<OneshotConfig.Route> routes,
      OneshotConfig.Limits limits,
      Function<OneshotConfig.Route, Map<String, Map<String, String>>> templateResources) {
    return write(routes, limits, templateResources, null);
  }

  /** The routes, limits and ({@code teams} not null) teams, in one transaction. */
  private Future<List<String>> write(
      List<OneshotConfig.Route> routes,
      OneshotConfig.Limits limits,
      Function<OneshotConfig.Route, Map<String, Map<String, String>>> templateResources,
      List<OneshotConfig.Team> teams) {
    String[] names = routes.stream().map(OneshotConfig.Route::name).toArray(String[]::new);
    return pool.withTransaction(
        conn -> {
          Future<?> f = conn.preparedQuery(DELETE_MISSING.text()).execute(Tuple.of(names));
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
                    .addBoolean(r.retryAfterAcquire())
                    .addBoolean(r.untagged())
                    .addString(
                        r.pod() == null ? null : podRules(r.pod(), templateResources.apply(r)))
                    .addString(r.team() == null ? r.name() : r.team())
                    .addString(r.cluster());
            f = f.compose(x -> conn.preparedQuery(UPSERT.text()).execute(t));
          }
          if (teams != null) {
            f = f.compose(x -> teams(conn, teams));
          }
          return f.compose(
                  x ->
                      conn.preparedQuery(LIMITS.text())
                          .execute(
                              Tuple.of(
                                  limits.maxInputBytes(),
                                  limits.maxTags(),
                                  limits.maxLogLineBytes(),
                                  limits.maxLogBytes())))
              .compose(
                  x -> conn.preparedQuery(FAIL_ORPHANED.text()).execute(Tuple.of((Object) names)))
              .map(
                  rows -> {
                    List<String> failed = new ArrayList<>();
                    rows.forEach(r -> failed.add(r.getString("route")));
                    return failed;
                  });
        });
  }

  /**
   * A route's pod rules as {@code oneshot.check_pod()} reads them (db/018_pod_settings.sql): each
   * pattern as written ({@code glob}, for messages) and as a regular expression ({@code regex}).
   */
  static String podRules(
      OneshotConfig.PodRules p, Map<String, Map<String, String>> templateResources) {
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("overLimit", p.overLimit());
    out.put("maxRequests", p.maxRequests());
    out.put("maxLimits", p.maxLimits());
    out.put("images", patterns(p.images()));
    out.put("nodeSelector", rules(p.nodeSelector()));
    out.put("tolerations", patterns(p.tolerations()));
    out.put("labels", rules(p.labels()));
    out.put("annotations", rules(p.annotations()));
    out.put("serviceAccounts", p.serviceAccounts());
    out.put("template", templateResources);
    return Json.write(out);
  }

  private static List<Map<String, String>> patterns(List<String> globs) {
    return globs.stream().map(g -> Map.of("glob", g, "regex", Globs.toRegex(g))).toList();
  }

  private static List<Map<String, Object>> rules(Map<String, List<String>> byKey) {
    List<Map<String, Object>> out = new ArrayList<>();
    byKey.forEach(
        (k, values) ->
            out.add(
                Map.of(
                    "key",
                    Map.of("glob", k, "regex", Globs.toRegex(k)),
                    "values",
                    patterns(values))));
    return out;
  }

  /**
   * Writes which routes are stalled (their cluster cannot take launches now) and why; every route
   * of {@code routes} not in {@code stalled} is not. Only the leading dispatcher writes it.
   */
  public Future<Void> stalls(List<String> routes, Map<String, String> stalled) {
    return pool.preparedQuery(STALLED.text())
        .execute(
            Tuple.of(
                (Object) routes.toArray(String[]::new),
                (Object) routes.stream().map(stalled::get).toArray(String[]::new)))
        .mapEmpty();
  }

  /**
   * The routes that {@code routes} no longer has whose workspaces hold state, each with how many
   * workspaces: their state stays under the old name, and a renamed route's builds would start from
   * none.
   */
  public Future<java.util.Map<String, Long>> strandedWorkspaces(List<OneshotConfig.Route> routes) {
    String[] names = routes.stream().map(OneshotConfig.Route::name).toArray(String[]::new);
    return pool.preparedQuery(STRANDED.text())
        .execute(Tuple.of((Object) names))
        .map(
            rows -> {
              java.util.Map<String, Long> out = new java.util.LinkedHashMap<>();
              rows.forEach(r -> out.put(r.getString("route"), r.getLong("workspaces")));
              return out;
            });
  }
}
