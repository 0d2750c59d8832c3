package io.oneshot.api;

import static io.oneshot.api.Http.fail;
import static io.oneshot.api.Http.json;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.build.AuditStore;
import io.oneshot.build.BuildStore;
import io.oneshot.build.ShareStore;
import io.oneshot.build.ShareStore.Kind;
import io.oneshot.build.TokenStore.Role;
import io.oneshot.config.OneshotConfig;
import io.vertx.ext.web.Router;
import io.vertx.ext.web.RoutingContext;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Fair share between teams (docs/fair-share.md): the teams with their shares and use, and the
 * operators' holds.
 *
 * <pre>
 * GET  /api/v1/teams                      → [{name, weight, guaranteed, borrowLimit, maxConcurrent,
 *                                             share, running, queued, borrowed, routes, held}]
 * POST /api/v1/routes/{name}/hold  {why}  → {kind, name, held: {at, by, why}}
 * POST /api/v1/routes/{name}/release      → {kind, name, held: null, was}
 * POST /api/v1/teams/{name}/hold   {why}  → (the same, for a team: every route in it)
 * POST /api/v1/teams/{name}/release
 * </pre>
 *
 * A hold or release needs the admin token or an operator's covering the route (for a team, every
 * route in it); each is in the audit trail with the same transaction. A token sees the teams of the
 * routes it covers, with those routes alone.
 */
final class ShareApi {
  private static final Logger log = LoggerFactory.getLogger(ShareApi.class);

  /** The longest reason a hold keeps, in characters: it is shown with every build it holds. */
  static final int MAX_WHY = 500;

  private final BuildStore store;
  private final Access access;
  private final int globalLimit;
  private final Map<String, List<String>> teamRoutes = new LinkedHashMap<>();
  private final Snapshot<List<ShareStore.Team>> teams;

  private final Runnable changed;

  /** {@code changed}: told after a hold or release, so that what shows routes reads them again. */
  ShareApi(BuildStore store, Access access, OneshotConfig config, Runnable changed) {
    this.changed = changed;
    this.store = store;
    this.access = access;
    this.globalLimit = config.dispatch().maxConcurrent();
    for (OneshotConfig.Route r : config.routes()) {
      teamRoutes
          .computeIfAbsent(r.team() == null ? r.name() : r.team(), t -> new ArrayList<>())
          .add(r.name());
    }
    this.teams = new Snapshot<>(store.share()::teams, Duration.ofSeconds(1));
  }

  void mount(Router router) {
    router.get("/api/v1/teams").handler(this::list);
    router.post("/api/v1/routes/:name/hold").handler(ctx -> hold(ctx, Kind.ROUTE));
    router.post("/api/v1/routes/:name/release").handler(ctx -> release(ctx, Kind.ROUTE));
    router.post("/api/v1/teams/:name/hold").handler(ctx -> hold(ctx, Kind.TEAM));
    router.post("/api/v1/teams/:name/release").handler(ctx -> release(ctx, Kind.TEAM));
  }

  /**
   * A team as the API shows it: {@code share} is its part of the global limit by weight, {@code
   * borrowed} what it runs past its share and guarantee.
   */
  record TeamView(
      String name,
      int weight,
      int guaranteed,
      Integer borrowLimit,
      Integer maxConcurrent,
      double share,
      long running,
      long queued,
      long borrowed,
      List<String> routes,
      ShareStore.Hold held) {}

  /** The teams' views, every route shown ({@code visible} null) or those alone. */
  static List<TeamView> views(List<ShareStore.Team> all, int globalLimit, Set<String> visible) {
    int total = all.stream().mapToInt(ShareStore.Team::weight).sum();
    List<TeamView> out = new ArrayList<>();
    for (ShareStore.Team t : all) {
      List<String> routes =
          visible == null ? t.routes() : t.routes().stream().filter(visible::contains).toList();
      if (routes.isEmpty()) {
        continue;
      }
      double share = ShareStore.share(t.weight(), total, globalLimit);
      out.add(
          new TeamView(
              t.name(),
              t.weight(),
              t.guaranteed(),
              t.borrowLimit(),
              t.maxConcurrent(),
              Math.round(share * 10) / 10.0,
              t.running(),
              t.queued(),
              ShareStore.borrowed((int) t.running(), share, t.guaranteed()),
              routes,
              t.held()));
    }
    return out;
  }

  private void list(RoutingContext ctx) {
    Caller caller = Access.caller(ctx);
    teams
        .get()
        .onSuccess(all -> json(ctx, 200, views(all, globalLimit, caller.routes())))
        .onFailure(ctx::fail);
  }

  private void hold(RoutingContext ctx, Kind kind) {
    JsonNode body = Http.bodyObject(ctx);
    Http.rejectUnknownFields(body, Set.of("why"));
    JsonNode w = body.path("why");
    if (w.isMissingNode() || w.isNull()) {
      throw ApiError.badRequest(
          "why",
          "required: say why the "
              + kind.wire()
              + " is held (it is shown with every build the hold keeps waiting)");
    }
    if (!w.isTextual() || w.textValue().isBlank()) {
      throw ApiError.badRequest("why", "must be a non-empty string, got " + w);
    }
    String why = w.textValue().strip();
    if (why.codePointCount(0, why.length()) > MAX_WHY) {
      throw ApiError.badRequest(
          "why", "must be at most " + MAX_WHY + " characters, got " + why.length());
    }
    if (why.chars().anyMatch(c -> c < 0x20 || c == 0x7f)) {
      throw ApiError.badRequest("why", "must be one line of text, without control characters");
    }
    String name = ctx.pathParam("name");
    Caller caller = Access.caller(ctx);
    AuditStore.Entry entry =
        entry(caller, "hold", kind, name).withDetail(Json.MAPPER.valueToTree(Map.of("why", why)));
    if (!allowed(ctx, kind, name, entry, "holding " + kind.wire() + " " + name)) {
      return;
    }
    store
        .share()
        .hold(kind, name, caller.name(), why, entry)
        .onSuccess(
            h -> {
              if (h.isEmpty()) {
                fail(ctx, ApiError.notFound(kind.wire() + " " + name));
                return;
              }
              teams.invalidate();
              changed.run();
              log.info(
                  "{} {} held by {}: {}. None of its builds is claimed until it is released.",
                  kind == Kind.ROUTE ? "Route" : "Team",
                  name,
                  caller.name(),
                  why);
              json(ctx, 200, answer(kind, name, h.get(), null));
            })
        .onFailure(ctx::fail);
  }

  private void release(RoutingContext ctx, Kind kind) {
    Http.emptyBody(ctx);
    String name = ctx.pathParam("name");
    Caller caller = Access.caller(ctx);
    AuditStore.Entry entry = entry(caller, "release", kind, name);
    if (!allowed(ctx, kind, name, entry, "releasing " + kind.wire() + " " + name)) {
      return;
    }
    store
        .share()
        .release(kind, name, entry)
        .onSuccess(
            r -> {
              if (r.isEmpty()) {
                fail(ctx, ApiError.notFound(kind.wire() + " " + name));
                return;
              }
              teams.invalidate();
              changed.run();
              if (r.get().was() != null) {
                log.info(
                    "{} {} released by {} (held by {} since {}).",
                    kind == Kind.ROUTE ? "Route" : "Team",
                    name,
                    caller.name(),
                    r.get().was().by(),
                    r.get().was().at());
              }
              json(ctx, 200, answer(kind, name, null, r.get().was()));
            })
        .onFailure(ctx::fail);
  }

  private static Map<String, Object> answer(
      Kind kind, String name, ShareStore.Hold held, ShareStore.Hold was) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("kind", kind.wire());
    m.put("name", name);
    m.put("held", held);
    if (held == null) {
      m.put("was", was);
    }
    return m;
  }

  private static AuditStore.Entry entry(Caller caller, String action, Kind kind, String name) {
    AuditStore.Entry e = AuditStore.Entry.of(caller.name(), action + "-" + kind.wire(), null, null);
    return kind == Kind.ROUTE
        ? e.withRoute(name)
        : e.withDetail(Json.MAPPER.valueToTree(Map.of("team", name)));
  }

  /**
   * Whether the caller may hold or release {@code name}: the admin token, or an operator covering
   * the route (for a team, every route in it). A route or team outside the caller's routes is
   * answered as one that does not exist; a narrower role, or a team the caller covers only part of,
   * is a 403. A refusal is audited and answered here.
   */
  private boolean allowed(
      RoutingContext ctx, Kind kind, String name, AuditStore.Entry entry, String what) {
    Caller caller = Access.caller(ctx);
    if (caller.routes() == null && caller.atLeast(Role.OPERATOR)) {
      return true;
    }
    List<String> routes =
        kind == Kind.ROUTE ? List.of(name) : teamRoutes.getOrDefault(name, List.of());
    List<String> covered = routes.stream().filter(caller::covers).toList();
    if (covered.isEmpty()) {
      access.refuseAudited(ctx, entry, access.outOfScope(kind.wire() + " " + name));
      return false;
    }
    if (!caller.atLeast(Role.OPERATOR)) {
      access.refuseAudited(ctx, entry, access.role(ctx, Role.OPERATOR, what));
      return false;
    }
    if (covered.size() < routes.size()) {
      access.countRefused("role");
      access.refuseAudited(
          ctx,
          entry,
          new ApiError(
              403,
              "forbidden: "
                  + what
                  + " needs every route of team "
                  + name
                  + "; token "
                  + caller.name()
                  + " covers "
                  + covered.size()
                  + " of its "
                  + routes.size(),
              "hold or release the routes it covers one by one (oneshot routes hold ROUTE)",
              null));
      return false;
    }
    return true;
  }
}
