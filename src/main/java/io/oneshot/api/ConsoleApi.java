package io.oneshot.api;

import static io.oneshot.api.Http.json;

import io.oneshot.build.BuildStore;
import io.oneshot.build.TokenStore.Role;
import io.vertx.core.http.HttpHeaders;
import io.vertx.ext.web.Router;
import io.vertx.ext.web.RoutingContext;
import io.vertx.ext.web.handler.StaticHandler;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Supplier;

/**
 * The web console: its pages ({@code /ui/}, static files from the class path, nothing fetched
 * elsewhere) and the reads it needs beside the builds API: who the token is ({@code
 * /api/v1/whoami}), the overview's health and queue history ({@code /api/v1/overview}), and the
 * workspaces with state ({@code /api/v1/workspaces}). Every answer carries {@link #CSP}; the pages'
 * script and styles are files of their own, so no inline script or style is ever allowed.
 */
final class ConsoleApi {
  /**
   * The console's pages load their own script, styles and images, and talk to this API only; they
   * are never framed, and forms post nowhere.
   */
  static final String CSP =
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
          + " connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

  private final BuildStore store;
  private final Supplier<Map<String, Object>> health;
  private final int globalLimit;

  ConsoleApi(BuildStore store, Supplier<Map<String, Object>> health, int globalLimit) {
    this.store = store;
    this.health = health;
    this.globalLimit = globalLimit;
  }

  /** Headers every answer carries, the API's as well as the pages'. */
  static void secure(RoutingContext ctx) {
    ctx.addHeadersEndHandler(
        v ->
            ctx.response()
                .putHeader("Content-Security-Policy", CSP)
                .putHeader("X-Content-Type-Options", "nosniff")
                .putHeader("Referrer-Policy", "no-referrer")
                .putHeader("X-Frame-Options", "DENY"));
    ctx.next();
  }

  /** The pages; mounted before the API's authentication, as they hold no data. */
  void mountPages(Router router) {
    // "/" and "/ui" lead to the console; Vert.x matches "/ui" for "/ui/" too, so the path is
    // checked before redirecting.
    for (String path : new String[] {"/", "/ui"}) {
      router
          .get(path)
          .handler(
              ctx -> {
                if (ctx.request().path().equals(path)) {
                  ctx.response().setStatusCode(302).putHeader("Location", "/ui/").end();
                } else {
                  ctx.next();
                }
              });
    }
    router
        .get("/ui/*")
        .handler(
            StaticHandler.create("io/oneshot/ui")
                .setIndexPage("index.html")
                .setCachingEnabled(false)
                .setDirectoryListing(false));
    router
        .get("/ui/*")
        .handler(
            ctx ->
                ctx.response()
                    .putHeader(HttpHeaders.CACHE_CONTROL, "no-store")
                    .setStatusCode(404)
                    .end());
  }

  /** The reads; behind {@code Access.authenticate()}. */
  void mount(Router router) {
    router.get("/api/v1/whoami").handler(this::whoami);
    router.get("/api/v1/overview").handler(this::overview);
    router.get("/api/v1/workspaces").handler(this::workspaces);
  }

  /** The token's name, role and routes, and what its role lets the console offer. */
  private void whoami(RoutingContext ctx) {
    Caller c = Access.caller(ctx);
    Map<String, Object> may = new LinkedHashMap<>();
    may.put("submit", c.atLeast(Role.SUBMITTER));
    // "own": the builds the token submitted; "any": every build of its routes.
    may.put("cancel", c.atLeast(Role.OPERATOR) ? "any" : c.atLeast(Role.SUBMITTER) ? "own" : "no");
    may.put("readState", c.atLeast(Role.OPERATOR));
    // Hold and release the routes it covers (and the teams it covers whole).
    may.put("hold", c.atLeast(Role.OPERATOR));
    may.put("manageTokens", c.admin());
    Map<String, Object> out = new LinkedHashMap<>();
    out.put("name", c.name());
    out.put("role", c.roleName());
    out.put("tokenId", c.tokenId());
    out.put("routes", c.routes() == null ? null : List.copyOf(new java.util.TreeSet<>(c.routes())));
    out.put("may", may);
    json(ctx, 200, out);
  }

  /**
   * The overview's facts that are not a route's: the global limit, the replica's health (leader,
   * listener, Kubernetes), and each route's queue a minute at a time over the last hour.
   */
  private void overview(RoutingContext ctx) {
    Caller c = Access.caller(ctx);
    store
        .reads()
        .history(c.routes())
        .onSuccess(
            points -> {
              Map<String, Object> out = new LinkedHashMap<>();
              out.put("globalLimit", globalLimit);
              out.put("health", health.get());
              out.put("history", points);
              json(ctx, 200, out);
            })
        .onFailure(ctx::fail);
  }

  private void workspaces(RoutingContext ctx) {
    Caller c = Access.caller(ctx);
    store
        .reads()
        .workspaces(c.routes())
        .onSuccess(list -> json(ctx, 200, Map.of("workspaces", list)))
        .onFailure(ctx::fail);
  }
}
