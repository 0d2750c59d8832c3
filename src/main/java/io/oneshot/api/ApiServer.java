package io.oneshot.api;

import static io.oneshot.api.Http.fail;
import static io.oneshot.api.Http.json;

import io.oneshot.build.BuildStore;
import io.oneshot.config.OneshotConfig;
import io.oneshot.launch.RunnerCall;
import io.oneshot.launch.RunnerProof;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.ext.web.Route;
import io.vertx.ext.web.Router;
import io.vertx.ext.web.RoutingContext;
import io.vertx.ext.web.handler.BodyHandler;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Supplier;
import java.util.regex.Pattern;

/**
 * The HTTP API's router. It mounts these handlers, each a file that reads as the API it serves:
 *
 * <ul>
 *   <li>{@link HealthApi}: {@code /healthz}, {@code /readyz}, {@code /metrics};
 *   <li>{@link AdminApi}: builds and routes for operators (bearer: the admin token, or an API token
 *       within its role and routes, see {@link Access});
 *   <li>{@link TokensApi}: API tokens and the audit trail (the admin token);
 *   <li>{@link ShareApi}: the teams' shares and the operators' holds on routes and teams;
 *   <li>{@link RunnerApi}: provisionerd's acquire, heartbeat, logs, complete (bearer: a build
 *       token);
 *   <li>{@link WorkspaceStateApi}: terraform state uploads and reads.
 * </ul>
 *
 * The plumbing they share (authentication, body limits, JSON errors) is {@link Http}'s and this
 * router's. Every handler runs on the event loop and only talks to the database through futures.
 * Refusals are {@code {error, detail, field}} with a 4xx status, and write nothing.
 */
public final class ApiServer implements AutoCloseable {
  private static final org.slf4j.Logger log = org.slf4j.LoggerFactory.getLogger(ApiServer.class);
  private final Vertx vertx;
  private final OneshotConfig config;
  private final LogFollowers followers;
  private final HealthApi health;
  private final AdminApi admin;
  private final RunnerApi runner;
  private final WorkspaceStateApi state;
  private final Access access;
  private final TokensApi tokens;
  private final ShareApi share;
  private final ConsoleApi console;
  private final Metrics metrics;
  private volatile Map<String, Pattern> endpoints = Map.of();
  private final AtomicInteger inFlight = new AtomicInteger();
  private volatile boolean draining;
  private HttpServer server;

  /**
   * @param status what {@code /readyz} reports beside the database check (leader, listener)
   */
  public ApiServer(
      Vertx vertx,
      BuildStore store,
      OneshotConfig config,
      LogFollowers followers,
      Supplier<Map<String, Object>> status,
      Metrics metrics,
      Function<RunnerCall, RunnerProof> prover) {
    this(vertx, store, config, followers, status, metrics, c -> {}, prover);
  }

  /**
   * @param conflicts told of every second runner refused, so that the launcher can remove it when
   *     it is its own (called on the event loop: hand blocking work to another thread)
   * @param prover who sent a runner call: the launcher's {@link io.oneshot.launch.Launcher#prove}
   *     (may block; called on a worker thread)
   */
  public ApiServer(
      Vertx vertx,
      BuildStore store,
      OneshotConfig config,
      LogFollowers followers,
      Supplier<Map<String, Object>> status,
      Metrics metrics,
      Consumer<RunnerConflict> conflicts,
      Function<RunnerCall, RunnerProof> prover) {
    this.vertx = vertx;
    this.config = config;
    this.followers = followers;
    this.health = new HealthApi(vertx, store, status, metrics);
    this.access =
        new Access(
            config.api().adminToken(), store.tokens(), store.audit(), config.routes(), metrics);
    this.admin =
        new AdminApi(
            vertx,
            store,
            metrics,
            followers,
            () -> draining,
            config.dispatch().maxConcurrent(),
            access);
    this.runner = new RunnerApi(vertx, store, config, metrics, conflicts, prover);
    this.state = new WorkspaceStateApi(store, config, runner, access);
    this.tokens = new TokensApi(store, access, config.routes());
    this.share = new ShareApi(store, access, config, admin::routesChanged);
    this.console = new ConsoleApi(store, status, config.dispatch().maxConcurrent());
    this.metrics = metrics;
    metrics.watchApi(inFlight::get);
  }

  /** Where Coder builds' outcomes are read (the coder sources); null: none configured. */
  public void coderOutcomes(RunnerApi.CoderOutcomes outcomes) {
    runner.coderOutcomes(outcomes);
  }

  /** What {@code GET /api/v1/sources} answers: the queue sources' last looks, as JSON values. */
  public void sources(Supplier<Object> sources) {
    admin.sources(sources);
  }

  /** Starts listening; returns the bound port (useful with port 0). */
  public Future<Integer> start() {
    Router router = Router.router(vertx);
    router.route().handler(this::track);
    router.route().handler(ConsoleApi::secure);
    health.mount(router);
    // Per-route series say what every team does: on the API's port (which an Ingress may route
    // to the world) they take the admin token; the metrics port serves them to its scraper.
    String adminToken = config.api().adminToken();
    health.mountMetrics(
        router,
        adminToken == null
            ? ctx -> ctx.fail(Http.unauthorized("no admin token is configured"))
            : Http.requireBearer(
                adminToken.getBytes(java.nio.charset.StandardCharsets.UTF_8),
                "admin token (or scrape the port of api.metricsListen)"));
    console.mountPages(router);

    router.route("/api/v1/*").handler(Http::checkParams);
    router.route("/api/v1/*").handler(this::bodyDeadline);
    router
        .route("/api/v1/*")
        .handler(BodyHandler.create(false).setBodyLimit(config.limits().maxRequestBytes()));
    router.route("/api/v1/*").handler(ApiServer::bodyReceived);
    for (String admin :
        new String[] {
          "/api/v1/builds*",
          "/api/v1/routes*",
          "/api/v1/teams*",
          "/api/v1/sources*",
          "/api/v1/workspaces*",
          "/api/v1/tokens*",
          "/api/v1/audit*",
          "/api/v1/whoami",
          "/api/v1/overview"
        }) {
      router.route(admin).handler(access.authenticate());
    }
    admin.mount(router);
    tokens.mount(router);
    share.mount(router);
    console.mount(router);
    runner.mount(router);
    state.mount(router);

    // No route matched: 405 when the path is an endpoint's but the method is not, else 404.
    router.errorHandler(
        404,
        ctx ->
            fail(
                ctx,
                new ApiError(
                    404,
                    "no such endpoint: " + ctx.request().method() + " " + ctx.request().path(),
                    "see docs/api.md",
                    null)));
    router.errorHandler(
        405,
        ctx ->
            fail(
                ctx,
                new ApiError(
                    405,
                    ctx.request().method() + " is not allowed on " + ctx.request().path(),
                    "see docs/api.md for the methods of each endpoint",
                    null)));
    router.route().failureHandler(Http.failureHandler(config.limits().maxRequestBytes()));
    endpoints = endpoints(router);

    server =
        vertx.createHttpServer(
            new HttpServerOptions()
                .setHost(config.api().host())
                .setPort(config.api().port())
                .setCompressionSupported(true)
                // Cleartext HTTP/2 would hold a new connection back from connectionHandler until
                // its first request's headers were in (to see an h2c upgrade), so a client that
                // never finished them was never timed; every client here speaks HTTP/1.1.
                .setHttp2ClearTextEnabled(false)
                .setIdleTimeout(300));
    server.connectionHandler(this::connected);
    Future<HttpServer> api = server.requestHandler(router).listen();
    if (config.api().metricsHost() != null) {
      Router metricsRouter = Router.router(vertx);
      health.mountMetrics(metricsRouter, RoutingContext::next);
      metricsRouter.route().failureHandler(Http.failureHandler(0));
      metricsServer =
          vertx.createHttpServer(
              new HttpServerOptions()
                  .setHost(config.api().metricsHost())
                  .setPort(config.api().metricsPort())
                  .setIdleTimeout(60));
      api = api.compose(a -> metricsServer.requestHandler(metricsRouter).listen().map(m -> a));
    }
    return api.map(HttpServer::actualPort);
  }

  private HttpServer metricsServer;

  /** The port {@code /metrics} is served on without a token ({@code api.metricsListen}). */
  public int metricsPort() {
    return metricsServer == null ? -1 : metricsServer.actualPort();
  }

  private final AtomicInteger connections = new AtomicInteger();

  /** Per open connection: the timer that closes it unless a request's headers arrive first. */
  private final Map<io.vertx.core.http.HttpConnection, Long> awaitingHeaders =
      new java.util.concurrent.ConcurrentHashMap<>();

  private volatile long lastCapWarning;

  /**
   * A new connection: closed at once past {@code api.maxConnections}, else given {@code
   * api.headerTimeout} to send its first request's headers. A client that holds connections open
   * without sending (slow headers, one byte at a time) cannot hold them for long, nor many.
   */
  private void connected(io.vertx.core.http.HttpConnection c) {
    int max = config.api().maxConnections();
    if (connections.incrementAndGet() > max) {
      connections.decrementAndGet();
      metrics.refused("connections");
      long now = System.nanoTime();
      if (now - lastCapWarning > 60_000_000_000L) {
        lastCapWarning = now;
        log.warn(
            "Closed a connection from {}: {} are open, the limit (api.maxConnections).",
            c.remoteAddress(),
            max);
      }
      c.close();
      return;
    }
    c.closeHandler(
        v -> {
          connections.decrementAndGet();
          Long timer = awaitingHeaders.remove(c);
          if (timer != null) {
            vertx.cancelTimer(timer);
          }
        });
    awaitHeaders(c, config.api().headerTimeout(), "slow_headers");
  }

  /** Closes {@code c} unless a request's headers arrive within {@code within}. */
  private void awaitHeaders(io.vertx.core.http.HttpConnection c, Duration within, String why) {
    long timer =
        vertx.setTimer(
            within.toMillis(),
            id -> {
              if (awaitingHeaders.remove(c, id)) {
                if (why != null) {
                  metrics.refused(why);
                }
                c.close();
              }
            });
    Long before = awaitingHeaders.put(c, timer);
    if (before != null) {
      vertx.cancelTimer(before);
    }
  }

  /** A request's headers arrived: its connection's timer stops until its response is sent. */
  private void headersArrived(RoutingContext ctx) {
    io.vertx.core.http.HttpConnection c = ctx.request().connection();
    Long timer = c == null ? null : awaitingHeaders.remove(c);
    if (timer != null) {
      vertx.cancelTimer(timer);
    }
    ctx.addEndHandler(
        v -> {
          // Between requests a connection may wait keepAliveTimeout for the next one.
          if (c != null && !ctx.response().closed()) {
            awaitHeaders(c, config.api().keepAliveTimeout(), null);
          }
        });
  }

  private static final String BODY_TIMER = "oneshot.bodyTimer";

  /**
   * A request with a body has {@code api.bodyTimeout} to send all of it: past that it is answered
   * 408 and its connection closed, whatever the handler would have done with it.
   */
  private void bodyDeadline(RoutingContext ctx) {
    if (!ctx.request().isEnded()) {
      Duration within = config.api().bodyTimeout();
      long timer =
          vertx.setTimer(
              within.toMillis(),
              id -> {
                if (ctx.response().ended() || ctx.response().closed()) {
                  return;
                }
                metrics.refused("slow_body");
                io.vertx.core.http.HttpConnection c = ctx.request().connection();
                ctx.response()
                    .setStatusCode(408)
                    .putHeader("Content-Type", "application/json")
                    .putHeader("Connection", "close")
                    .end(
                        Json.write(
                            Http.errorBody(
                                "body: not received within "
                                    + io.oneshot.config.Units.format(within),
                                "the limit is api.bodyTimeout in the dispatcher's configuration",
                                "body")))
                    .onComplete(x -> c.close());
              });
      ctx.put(BODY_TIMER, timer);
      ctx.addEndHandler(v -> vertx.cancelTimer(timer));
    }
    ctx.next();
  }

  /** The body is in: its deadline no longer applies. */
  private static void bodyReceived(RoutingContext ctx) {
    Long timer = ctx.get(BODY_TIMER);
    if (timer != null) {
      ctx.vertx().cancelTimer(timer);
    }
    ctx.next();
  }

  /**
   * Counts requests in flight, for {@link #drain}; while draining, answers new ones (but liveness)
   * with 503, which provisionerd and the CLI retry, and which sends them to another replica.
   */
  private void track(RoutingContext ctx) {
    headersArrived(ctx);
    if (draining && !ctx.request().path().equals("/healthz")) {
      ctx.response().putHeader("Connection", "close");
      json(
          ctx,
          503,
          Map.of(
              "error",
              "this replica is shutting down",
              "detail",
              "try again: another replica serves the same API"));
      return;
    }
    inFlight.incrementAndGet();
    long start = System.nanoTime();
    ctx.addEndHandler(
        v -> {
          inFlight.decrementAndGet();
          metrics.apiRequest(
              endpoint(ctx.request().path()),
              ctx.request().method().name(),
              ctx.response().getStatusCode(),
              (System.nanoTime() - start) / 1e9);
        });
    ctx.next();
  }

  /**
   * The endpoint a path is for, as its route's pattern ({@code /api/v1/builds/:id}); {@code other}
   * for a path no endpoint has, so that a scan of random paths adds no series.
   */
  String endpoint(String path) {
    Map<String, Pattern> all = endpoints;
    if (all.containsKey(path)) {
      // An exact path (the runners' calls, for one): it is its own endpoint.
      return path;
    }
    for (Map.Entry<String, Pattern> e : all.entrySet()) {
      if (e.getValue().matcher(path).matches()) {
        return e.getKey();
      }
    }
    return "other";
  }

  /** The endpoints' patterns, from the router's routes with an exact or parameterised path. */
  private static Map<String, Pattern> endpoints(Router router) {
    Map<String, Pattern> out = new LinkedHashMap<>();
    for (Route r : router.getRoutes()) {
      String name = r.getName();
      if (name != null && name.startsWith("/") && (r.isExactPath() || name.contains("/:"))) {
        out.putIfAbsent(
            name, Pattern.compile(Pattern.quote(name).replaceAll(":[A-Za-z]+", "\\\\E[^/]+\\\\Q")));
      }
    }
    return out;
  }

  /**
   * Stops taking requests and waits up to {@code timeout} for those in flight to finish; log
   * streams that follow a build end now (the CLI picks up after their last line elsewhere). Returns
   * how many were still running when it gave up.
   */
  public int drain(Duration timeout) {
    draining = true;
    followers.wakeAll();
    long deadline = System.nanoTime() + timeout.toNanos();
    while (inFlight.get() > 0 && System.nanoTime() < deadline) {
      try {
        Thread.sleep(20);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        break;
      }
    }
    return inFlight.get();
  }

  public int port() {
    return server == null ? -1 : server.actualPort();
  }

  @Override
  public void close() {
    if (server != null) {
      io.oneshot.build.Database.await(server.close());
    }
    if (metricsServer != null) {
      io.oneshot.build.Database.await(metricsServer.close());
    }
  }
}
