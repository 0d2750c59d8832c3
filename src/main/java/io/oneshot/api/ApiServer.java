package io.oneshot.api;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.oneshot.build.BuildState;
import io.oneshot.build.BuildStore;
import io.oneshot.build.BuildToken;
import io.oneshot.build.InvalidBuildException;
import io.oneshot.build.LogLine;
import io.oneshot.build.Runner;
import io.oneshot.config.OneshotConfig;
import io.oneshot.config.Units;
import io.vertx.core.Context;
import io.vertx.core.Future;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpServer;
import io.vertx.core.http.HttpServerOptions;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.ext.web.Router;
import io.vertx.ext.web.RoutingContext;
import io.vertx.ext.web.handler.BodyHandler;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The HTTP API: admin calls under {@code /api/v1/builds} and {@code /api/v1/routes} (bearer: the
 * admin token), runner calls under {@code /api/v1/runner} (bearer: a build token), and {@code
 * /healthz}, {@code /readyz}. Every handler runs on the event loop and only talks to the database
 * through futures. Refusals are {@code {error, detail, field}} with a 4xx status, and write
 * nothing.
 */
public final class ApiServer implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(ApiServer.class);
  private static final Set<String> CREATE_FIELDS = Set.of("tags", "input", "priority", "workspace");
  private static final Set<String> LINE_FIELDS =
      Set.of("ts", "stream", "level", "stage", "text", "milestone");
  private static final Set<String> STREAMS = Set.of("stdout", "stderr", "system");
  private static final int LOG_PAGE = 1000;
  private static final int MAX_LINES_PER_BATCH = 1000;
  private static final long FOLLOW_POLL_MS = 1000;

  private final Vertx vertx;
  private final BuildStore store;

  /**
   * What {@code GET /api/v1/routes} answers: at most a second old, one query however many
   * dashboards and operators poll it (the counts change by the millisecond in a burst anyway).
   */
  private final Snapshot<List<BuildStore.RouteStatus>> routeStatus;

  private final OneshotConfig config;
  private final LogFollowers followers;
  private final Supplier<Map<String, Object>> status;
  private final Metrics metrics;
  private final byte[] adminToken;
  private final Consumer<RunnerConflict> conflicts;
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
      Metrics metrics) {
    this(vertx, store, config, followers, status, metrics, c -> {});
  }

  /**
   * @param conflicts told of every second runner refused, so that the launcher can remove it when
   *     it is its own (called on the event loop: hand blocking work to another thread)
   */
  public ApiServer(
      Vertx vertx,
      BuildStore store,
      OneshotConfig config,
      LogFollowers followers,
      Supplier<Map<String, Object>> status,
      Metrics metrics,
      Consumer<RunnerConflict> conflicts) {
    this.conflicts = conflicts;
    this.metrics = metrics;
    this.vertx = vertx;
    this.store = store;
    this.routeStatus = new Snapshot<>(store::routes, Duration.ofSeconds(1));
    this.config = config;
    this.followers = followers;
    this.status = status;
    this.adminToken = config.api().adminToken().getBytes(StandardCharsets.UTF_8);
    metrics.watchApi(inFlight::get);
  }

  /** Starts listening; returns the bound port (useful with port 0). */
  public Future<Integer> start() {
    Router router = Router.router(vertx);
    router.route().handler(this::track);
    router.get("/healthz").handler(ctx -> json(ctx, 200, Map.of("status", "ok")));
    router.get("/readyz").handler(this::ready);
    router
        .get("/metrics")
        .handler(
            ctx ->
                metrics
                    .scrapeFresh()
                    .onSuccess(
                        text ->
                            ctx.response()
                                .putHeader("Content-Type", Metrics.contentType())
                                .end(text))
                    .onFailure(ctx::fail));

    router
        .route("/api/v1/*")
        .handler(BodyHandler.create(false).setBodyLimit(config.limits().maxRequestBytes()));
    router.route("/api/v1/builds*").handler(this::requireAdmin);
    router.route("/api/v1/routes*").handler(this::requireAdmin);
    router.post("/api/v1/builds").handler(this::createBuild);
    router.get("/api/v1/builds").handler(this::listBuilds);
    router.get("/api/v1/builds/:id").handler(this::showBuild);
    router.get("/api/v1/builds/:id/logs").handler(this::buildLogs);
    router.post("/api/v1/builds/:id/cancel").handler(this::cancelBuild);
    router.get("/api/v1/routes").handler(this::routes);

    router.post("/api/v1/runner/acquire").handler(this::acquire);
    router.post("/api/v1/runner/heartbeat").handler(this::heartbeat);
    router.post("/api/v1/runner/logs").handler(this::logs);
    router.post("/api/v1/runner/state").handler(this::state);
    router.post("/api/v1/runner/complete").handler(this::complete);
    router.route("/api/v1/workspaces*").handler(this::requireAdmin);
    router.get("/api/v1/workspaces/states").handler(this::stateVersions);
    router.get("/api/v1/workspaces/state").handler(this::workspaceState);

    router
        .route()
        .last()
        .handler(
            ctx ->
                fail(
                    ctx,
                    new ApiError(
                        404,
                        "no such endpoint: " + ctx.request().method() + " " + ctx.request().path(),
                        "see the HTTP API section of the README",
                        null)));
    router.route().failureHandler(this::failure);

    server =
        vertx.createHttpServer(
            new HttpServerOptions()
                .setHost(config.api().host())
                .setPort(config.api().port())
                .setCompressionSupported(true)
                .setIdleTimeout(300));
    return server.requestHandler(router).listen().map(HttpServer::actualPort);
  }

  // ---------------------------------------------------------------------------------------------
  // Health

  /**
   * Counts requests in flight, for {@link #drain}; while draining, answers new ones (but liveness)
   * with 503, which provisionerd and the CLI retry, and which sends them to another replica.
   */
  private void track(RoutingContext ctx) {
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
    ctx.addEndHandler(v -> inFlight.decrementAndGet());
    ctx.next();
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

  private void ready(RoutingContext ctx) {
    Map<String, Object> body = new LinkedHashMap<>(status.get());
    long timer =
        vertx.setTimer(
            2000,
            t -> {
              if (!ctx.response().ended()) {
                body.put("database", "no answer within 2 s");
                body.put("ready", false);
                json(ctx, 503, body);
              }
            });
    store
        .pool()
        .query("SELECT 1")
        .execute()
        .onComplete(
            r -> {
              vertx.cancelTimer(timer);
              if (ctx.response().ended()) {
                return;
              }
              body.put("database", r.succeeded() ? "ok" : r.cause().getMessage());
              body.put("ready", r.succeeded());
              json(ctx, r.succeeded() ? 200 : 503, body);
            });
  }

  // ---------------------------------------------------------------------------------------------
  // Admin

  private void requireAdmin(RoutingContext ctx) {
    String token = bearer(ctx);
    if (token == null) {
      throw unauthorized("missing Authorization: Bearer <admin token>");
    }
    if (!MessageDigest.isEqual(token.getBytes(StandardCharsets.UTF_8), adminToken)) {
      throw unauthorized("the admin token is wrong");
    }
    ctx.next();
  }

  private void createBuild(RoutingContext ctx) {
    JsonNode body = bodyObject(ctx);
    for (Iterator<String> it = body.fieldNames(); it.hasNext(); ) {
      String f = it.next();
      if (!CREATE_FIELDS.contains(f)) {
        throw new ApiError(
            400,
            f + ": unknown field",
            "a build has the fields tags, input, priority and workspace",
            f);
      }
    }
    JsonNode tags = body.path("tags");
    String tagsJson = tags.isMissingNode() || tags.isNull() ? "{}" : tags.toString();
    JsonNode input = body.path("input");
    String inputJson = input.isMissingNode() ? "null" : input.toString();
    int priority = 0;
    JsonNode p = body.path("priority");
    if (!p.isMissingNode() && !p.isNull()) {
      if (!p.isIntegralNumber() || !p.canConvertToInt()) {
        throw ApiError.badRequest("priority", "must be an integer from -1000 to 1000, got " + p);
      }
      priority = p.intValue();
    }
    String workspace = null;
    JsonNode w = body.path("workspace");
    if (!w.isMissingNode() && !w.isNull()) {
      if (!w.isTextual()) {
        throw ApiError.badRequest("workspace", "must be a string, got " + w);
      }
      workspace = w.asText();
    }
    store
        .enqueue(tagsJson, inputJson, priority, workspace)
        .onSuccess(
            e -> {
              log.info("Build {}: enqueued on route {}.", e.id(), e.route());
              ctx.response().putHeader("Location", "/api/v1/builds/" + e.id());
              json(ctx, 201, e);
            })
        .onFailure(ctx::fail);
  }

  private void listBuilds(RoutingContext ctx) {
    BuildState status = null;
    String s = ctx.queryParams().get("status");
    if (s != null && !s.isEmpty()) {
      try {
        status = BuildState.ofWire(s);
      } catch (IllegalArgumentException e) {
        throw ApiError.badRequest(
            "status",
            "'"
                + s
                + "' is not a status: pending, launching, running, succeeded, failed or canceled");
      }
    }
    String route = emptyToNull(ctx.queryParams().get("route"));
    int limit = intParam(ctx, "limit", 100, 1, 1000);
    Long before = longParam(ctx, "before");
    store
        .list(status, route, before, limit)
        .onSuccess(list -> json(ctx, 200, Map.of("builds", list)))
        .onFailure(ctx::fail);
  }

  private void showBuild(RoutingContext ctx) {
    long id = buildId(ctx);
    store
        .get(id)
        .onSuccess(
            b -> {
              if (b.isEmpty()) {
                fail(ctx, ApiError.notFound("build " + id));
              } else {
                json(ctx, 200, b.get());
              }
            })
        .onFailure(ctx::fail);
  }

  private void cancelBuild(RoutingContext ctx) {
    long id = buildId(ctx);
    store
        .cancel(id)
        .onSuccess(
            c -> {
              io.oneshot.dispatch.FaultPoint.AFTER_CANCEL.reach();
              switch (c.result()) {
                case NOT_FOUND -> fail(ctx, ApiError.notFound("build " + id));
                case ALREADY_FINISHED ->
                    store
                        .get(id)
                        .onSuccess(
                            b ->
                                fail(
                                    ctx,
                                    new ApiError(
                                        409,
                                        "build "
                                            + id
                                            + " already "
                                            + b.map(x -> x.status().wire()).orElse("finished"),
                                        "only pending, launching and running builds can be canceled",
                                        null)))
                        .onFailure(ctx::fail);
                case CANCELED -> {
                  metrics.finished(c.route(), "canceled", null);
                  log.info("Build {} (route {}): canceled.", id, c.route());
                  json(ctx, 202, Map.of("id", id, "status", "canceled"));
                }
                case REQUESTED -> {
                  log.info(
                      "Build {} (route {}): cancel requested; provisionerd will stop it.",
                      id,
                      c.route());
                  json(ctx, 202, Map.of("id", id, "status", "running", "cancelRequested", true));
                }
              }
            })
        .onFailure(ctx::fail);
  }

  private void routes(RoutingContext ctx) {
    routeStatus.get().onSuccess(list -> json(ctx, 200, list)).onFailure(ctx::fail);
  }

  /**
   * NDJSON, one {@link LogLine} per line, after {@code after}. With {@code follow=true} the
   * response stays open and streams new lines until the build ends.
   */
  private void buildLogs(RoutingContext ctx) {
    long id = buildId(ctx);
    long after = longParam(ctx, "after") == null ? 0 : longParam(ctx, "after");
    boolean follow = "true".equals(ctx.queryParams().get("follow"));
    new LogStream(ctx, id, after, follow, Vertx.currentContext()).next();
  }

  private final class LogStream {
    private final RoutingContext ctx;
    private final long id;
    private final boolean follow;
    private final Context context;
    private long after;
    private boolean started;

    LogStream(RoutingContext ctx, long id, long after, boolean follow, Context context) {
      this.ctx = ctx;
      this.id = id;
      this.after = after;
      this.follow = follow;
      this.context = context;
    }

    void next() {
      HttpServerResponse resp = ctx.response();
      if (resp.closed() || resp.ended()) {
        return;
      }
      store
          .logs(id, after, LOG_PAGE)
          .onSuccess(
              page -> {
                if (page.isEmpty()) {
                  if (started) {
                    resp.end();
                  } else {
                    fail(ctx, ApiError.notFound("build " + id));
                  }
                  return;
                }
                if (!started) {
                  started = true;
                  resp.setChunked(true).putHeader("Content-Type", "application/x-ndjson");
                }
                StringBuilder out = new StringBuilder();
                for (LogLine l : page.get().lines()) {
                  out.append(Json.write(l)).append('\n');
                  after = l.seq();
                }
                if (!out.isEmpty()) {
                  resp.write(out.toString());
                }
                boolean full = page.get().lines().size() == LOG_PAGE;
                if (full) {
                  if (resp.writeQueueFull()) {
                    resp.drainHandler(v -> next());
                  } else {
                    context.runOnContext(v -> next());
                  }
                } else if (!follow || page.get().status().terminal() || draining) {
                  resp.end();
                } else {
                  waitForMore();
                }
              })
          .onFailure(
              e -> {
                if (started) {
                  log.warn("Build {}: log stream failed: {}.", id, e.getMessage());
                  resp.reset();
                } else {
                  ctx.fail(e);
                }
              });
    }

    private void waitForMore() {
      AtomicBoolean fired = new AtomicBoolean();
      Runnable again =
          () -> {
            if (fired.compareAndSet(false, true)) {
              next();
            }
          };
      long timer = vertx.setTimer(FOLLOW_POLL_MS, t -> again.run());
      followers.once(
          id,
          context,
          () -> {
            vertx.cancelTimer(timer);
            again.run();
          });
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Runner

  private byte[] runnerToken(RoutingContext ctx) {
    String token = bearer(ctx);
    if (token == null || !token.startsWith(BuildToken.PREFIX)) {
      throw unauthorized("missing Authorization: Bearer <build token>");
    }
    return BuildToken.hash(token);
  }

  /**
   * The runner a call comes from, as it names itself in its headers ({@link RunnerHeaders}); a call
   * that names none is refused: a token alone is not enough to run a build.
   */
  private static Runner runner(RoutingContext ctx) {
    return RunnerHeaders.parse(ctx.request().headers()::get);
  }

  private void acquire(RoutingContext ctx) {
    byte[] hash = runnerToken(ctx);
    Runner runner = runner(ctx);
    store
        .acquire(hash, runner)
        .onSuccess(
            a -> {
              switch (a) {
                case BuildStore.Acquire.Granted g -> granted(ctx, g.build(), runner);
                case BuildStore.Acquire.HeldByOther h ->
                    conflict(ctx, h.holder(), runner, "acquire");
                case BuildStore.Acquire.NoAttempt n -> refuse(ctx, hash, runner, "acquire");
              }
            })
        .onFailure(ctx::fail);
  }

  private void granted(RoutingContext ctx, BuildStore.Acquired b, Runner runner) {
    if (b.first()) {
      if (b.startSeconds() != null) {
        metrics.acquired(b.route(), b.startSeconds());
      }
      log.info(
          "Build {} (route {}, attempt {}): acquired by provisionerd, {}.",
          b.id(),
          b.route(),
          b.attempt(),
          runner.describe());
    }
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("buildId", b.id());
    body.put("attempt", b.attempt());
    body.put("route", b.route());
    body.put("workspace", b.workspace());
    body.put("input", b.input());
    body.put("timeoutMs", b.timeoutMs());
    body.put("cancelGraceMs", b.cancelGraceMs());
    body.put("heartbeatIntervalMs", config.dispatch().heartbeatInterval().toMillis());
    body.put("leaseMs", lease(b.route()).toMillis());
    body.put("maxLogLineBytes", config.limits().maxLogLineBytes());
    body.put("cancelRequested", b.cancelRequested());
    body.put("stateVersion", b.stateVersion());
    body.put("state", b.state());
    json(ctx, 200, body);
  }

  /** The route's runner lease; a route the configuration no longer has gets the default. */
  private Duration lease(String route) {
    return config
        .route(route)
        .map(OneshotConfig.Route::lease)
        .orElse(io.oneshot.config.ConfigLoader.DEFAULT_LEASE);
  }

  /**
   * A call from a runner other than the one the attempt is bound to: refused with 409, and made
   * visible: a line in the build's log and timeline, a WARN, a metric, and the launcher told, so
   * that it removes the second runner's pod or process when it is its own.
   */
  private void conflict(RoutingContext ctx, BuildStore.Holder holder, Runner caller, String call) {
    String line =
        "a second runner was refused: "
            + caller.describe()
            + " tried to "
            + call
            + ", but "
            + holder.describe()
            + "; it runs nothing and exits";
    log.warn(
        "Build {} (route {}, attempt {}): {} tried to {}; the attempt is held by {}. Refused.",
        holder.buildId(),
        holder.route(),
        holder.attempt(),
        caller.describe(),
        call,
        holder.runner().describe());
    metrics.runnerConflict(holder.route());
    conflicts.accept(new RunnerConflict(holder, caller));
    Map<String, Object> body =
        errorBody(holder.describe(), "this runner must not run the build", null);
    Map<String, Object> h = new LinkedHashMap<>();
    h.put("runner", holder.runner().fingerprint());
    h.putAll(holder.runner().details());
    h.put("since", holder.since());
    body.put("holder", h);
    store
        .recordConflict(holder.buildId(), holder.attempt(), line)
        .onComplete(x -> json(ctx, 409, body));
  }

  private void heartbeat(RoutingContext ctx) {
    byte[] hash = runnerToken(ctx);
    Runner runner = runner(ctx);
    store
        .heartbeat(hash, runner.id())
        .onSuccess(
            c -> {
              if (c.isEmpty()) {
                refuse(ctx, hash, runner, "heartbeat");
              } else {
                json(ctx, 200, Map.of("cancelRequested", c.get()));
              }
            })
        .onFailure(ctx::fail);
  }

  private void logs(RoutingContext ctx) {
    byte[] hash = runnerToken(ctx);
    Runner runner = runner(ctx);
    JsonNode body = bodyObject(ctx);
    JsonNode first = body.path("first");
    if (!first.canConvertToLong() || !first.isIntegralNumber() || first.longValue() < 1) {
      throw ApiError.badRequest(
          "first", "must be the runner's number of the batch's first line, from 1");
    }
    JsonNode lines = body.path("lines");
    if (!lines.isArray()) {
      throw ApiError.badRequest("lines", "must be an array of log lines");
    }
    if (lines.size() > MAX_LINES_PER_BATCH) {
      throw ApiError.badRequest("lines", "at most " + MAX_LINES_PER_BATCH + " lines per batch");
    }
    List<BuildStore.NewLine> parsed = new ArrayList<>(lines.size());
    for (int i = 0; i < lines.size(); i++) {
      parsed.add(parseLine(lines.get(i), "lines[" + i + "]"));
    }
    store
        .appendLogs(hash, runner.id(), first.longValue(), parsed, config.limits().maxLogBytes())
        .onSuccess(
            ack -> {
              if (ack.isEmpty()) {
                refuse(ctx, hash, runner, "send logs");
                return;
              }
              BuildStore.LogAck a = ack.get();
              int dropped = a.fresh() - a.accepted();
              Future<Void> note = Future.succeededFuture();
              if (dropped > 0 && a.bytesBefore() <= config.limits().maxLogBytes()) {
                note =
                    store
                        .systemLog(
                            a.buildId(),
                            a.attempt(),
                            "warn",
                            "log truncated: this build's log reached its limit of "
                                + Units.formatSize(config.limits().maxLogBytes())
                                + " (limits.maxLogBytes); later output is dropped, the build goes"
                                + " on")
                        .mapEmpty();
              }
              note.onComplete(
                  x ->
                      json(
                          ctx,
                          200,
                          Map.of(
                              "cancelRequested", a.cancelRequested(), "accepted", a.accepted())));
            })
        .onFailure(ctx::fail);
  }

  private BuildStore.NewLine parseLine(JsonNode n, String path) {
    if (!n.isObject()) {
      throw ApiError.badRequest(path, "must be an object {ts, stream, level, stage, text}");
    }
    for (Iterator<String> it = n.fieldNames(); it.hasNext(); ) {
      String f = it.next();
      if (!LINE_FIELDS.contains(f)) {
        throw ApiError.badRequest(path + "." + f, "unknown field");
      }
    }
    JsonNode text = n.path("text");
    if (!text.isTextual()) {
      throw ApiError.badRequest(path + ".text", "must be a string");
    }
    String stream = n.path("stream").asText("stdout");
    if (!STREAMS.contains(stream)) {
      throw ApiError.badRequest(path + ".stream", "must be stdout, stderr or system");
    }
    Instant ts;
    try {
      ts = n.hasNonNull("ts") ? Instant.parse(n.get("ts").asText()) : Instant.now();
    } catch (RuntimeException e) {
      throw ApiError.badRequest(path + ".ts", "must be an RFC 3339 time");
    }
    JsonNode milestone = n.path("milestone");
    if (!milestone.isMissingNode() && !milestone.isBoolean()) {
      throw ApiError.badRequest(path + ".milestone", "must be true or false");
    }
    return new BuildStore.NewLine(
        ts,
        stream,
        textOrNull(n, "level"),
        textOrNull(n, "stage"),
        truncate(text.asText(), config.limits().maxLogLineBytes()),
        milestone.asBoolean(false));
  }

  private void complete(RoutingContext ctx) {
    byte[] hash = runnerToken(ctx);
    Runner runner = runner(ctx);
    JsonNode body = bodyObject(ctx);
    for (Iterator<String> it = body.fieldNames(); it.hasNext(); ) {
      String f = it.next();
      if (!Set.of("outcome", "exitCode", "error", "outputs", "state").contains(f)) {
        throw ApiError.badRequest(f, "unknown field");
      }
    }
    BuildState outcome;
    try {
      outcome = BuildState.ofWire(body.path("outcome").asText());
    } catch (IllegalArgumentException e) {
      outcome = null;
    }
    if (outcome == null || !outcome.terminal()) {
      throw ApiError.badRequest("outcome", "must be succeeded, failed or canceled");
    }
    JsonNode code = body.path("exitCode");
    if (!code.isMissingNode() && !code.isNull() && !code.canConvertToInt()) {
      throw ApiError.badRequest("exitCode", "must be an integer");
    }
    Integer exitCode = code.isIntegralNumber() ? code.intValue() : null;
    String error = textOrNull(body, "error");
    if (error != null && error.length() > 4096) {
      error = error.substring(0, 4096) + "…";
    }
    JsonNode outputs = body.hasNonNull("outputs") ? body.get("outputs") : null;
    BuildStore.StateUpload state =
        body.hasNonNull("state") ? stateUpload(body.get("state"), "state") : null;
    String reason =
        switch (outcome) {
          case SUCCEEDED -> "provisionerd reported success";
          case CANCELED -> error == null ? "canceled" : error;
          default -> error == null ? "provisionerd reported failure" : error;
        };
    BuildState finalOutcome = outcome;
    store
        .complete(
            hash,
            runner.id(),
            new BuildStore.Completion(outcome, exitCode, error, outputs, reason, state))
        .onSuccess(
            s -> {
              if (s.isEmpty()) {
                refuse(ctx, hash, runner, "complete");
                return;
              }
              BuildStore.Completed done = s.get();
              metrics.finished(done.route(), done.status().wire(), done.ranSeconds());
              log.info(
                  "Build {} (route {}, attempt {}): {} (exit code {}).",
                  done.id(),
                  done.route(),
                  done.attempt(),
                  finalOutcome.wire(),
                  exitCode);
              Future<?> note = Future.succeededFuture();
              if (done.stateRefused() != null) {
                log.warn(
                    "Build {}: its final state was refused: {}.", done.id(), done.stateRefused());
                note =
                    store.systemLog(
                        done.id(),
                        done.attempt(),
                        "warn",
                        "the final terraform state was not stored: " + done.stateRefused());
              }
              note.onComplete(x -> json(ctx, 200, Map.of("status", done.status().wire())));
            })
        .onFailure(ctx::fail);
  }

  /** An upload of the workspace's terraform state while the build runs. */
  private void state(RoutingContext ctx) {
    byte[] hash = runnerToken(ctx);
    Runner runner = runner(ctx);
    JsonNode body = bodyObject(ctx);
    for (Iterator<String> it = body.fieldNames(); it.hasNext(); ) {
      String f = it.next();
      if (!f.equals("state")) {
        throw ApiError.badRequest(f, "unknown field");
      }
    }
    BuildStore.StateUpload upload = stateUpload(body.path("state"), "state");
    store
        .saveState(hash, runner.id(), upload, false)
        .onSuccess(
            v -> {
              switch (v) {
                case BuildStore.StateSaved.NotRunning n -> refuse(ctx, hash, runner, "save state");
                case BuildStore.StateSaved.Refused r ->
                    fail(
                        ctx,
                        new ApiError(
                            409,
                            "state: " + r.why(),
                            "a state upload must continue this attempt's terraform state",
                            "state"));
                case BuildStore.StateSaved.Stored st -> {
                  Future<?> note = Future.succeededFuture();
                  if (st.note() != null) {
                    note = stateNote(hash, st.note());
                  }
                  note.onComplete(x -> json(ctx, 200, Map.of("version", st.version())));
                }
              }
            })
        .onFailure(ctx::fail);
  }

  /**
   * Checks an uploaded state (a string holding terraform's state JSON, within the size cap) and
   * reads its serial and lineage without building a tree of the whole document.
   */
  private BuildStore.StateUpload stateUpload(JsonNode node, String field) {
    if (!node.isTextual()) {
      throw ApiError.badRequest(field, "must be the terraform state as a string");
    }
    String text = node.asText();
    int bytes = text.getBytes(StandardCharsets.UTF_8).length;
    if (bytes > config.limits().maxStateBytes()) {
      throw new ApiError(
          413,
          field
              + ": is "
              + bytes
              + " bytes; the limit is "
              + config.limits().maxStateBytes()
              + " bytes",
          "the limit is limits.maxStateBytes in the dispatcher's configuration",
          field);
    }
    Long serial = null;
    String lineage = null;
    try (com.fasterxml.jackson.core.JsonParser p = Json.MAPPER.getFactory().createParser(text)) {
      if (p.nextToken() != com.fasterxml.jackson.core.JsonToken.START_OBJECT) {
        throw ApiError.badRequest(field, "is not a terraform state (a JSON object)");
      }
      com.fasterxml.jackson.core.JsonToken t;
      while ((t = p.nextToken()) == com.fasterxml.jackson.core.JsonToken.FIELD_NAME
          && (serial == null || lineage == null)) {
        String name = p.currentName();
        p.nextToken();
        if (name.equals("serial") && p.currentToken().isNumeric()) {
          serial = p.getLongValue();
        } else if (name.equals("lineage")) {
          lineage = p.getValueAsString();
        } else {
          p.skipChildren();
        }
      }
    } catch (java.io.IOException e) {
      throw ApiError.badRequest(field, "is not a terraform state: " + e.getMessage());
    }
    return new BuildStore.StateUpload(text, serial, lineage);
  }

  private void stateVersions(RoutingContext ctx) {
    String ws = requiredParam(ctx, "workspace");
    store
        .stateVersions(ws)
        .onSuccess(list -> json(ctx, 200, Map.of("workspace", ws, "versions", list)))
        .onFailure(ctx::fail);
  }

  /** The state itself: the latest version, or {@code version=N}; for recovery and inspection. */
  private void workspaceState(RoutingContext ctx) {
    String ws = requiredParam(ctx, "workspace");
    Long v = longParam(ctx, "version");
    store
        .state(ws, v == null ? null : v.intValue())
        .onSuccess(
            st -> {
              if (st.isEmpty()) {
                fail(
                    ctx,
                    ApiError.notFound(
                        "state of workspace " + ws + (v == null ? "" : " at version " + v)));
              } else {
                ctx.response().putHeader("Content-Type", "application/json").end(st.get());
              }
            })
        .onFailure(ctx::fail);
  }

  private static String requiredParam(RoutingContext ctx, String name) {
    String v = ctx.queryParams().get(name);
    if (v == null || v.isEmpty()) {
      throw ApiError.badRequest(name, "is required");
    }
    return v;
  }

  /** Writes a note about a stored state (a new lineage) into the build's log. */
  private Future<?> stateNote(byte[] hash, String note) {
    return store
        .tokenState(hash)
        .compose(
            t ->
                t.isEmpty()
                    ? Future.succeededFuture()
                    : store.systemLog(t.get().id(), t.get().attempt(), "warn", note));
  }

  /**
   * Says why a runner call found no running attempt of its runner for its token. A repeated {@code
   * complete} by the bound runner for a build that already ended is answered as a success, so that
   * a retry after a lost reply ends provisionerd cleanly; from any other runner it is a conflict.
   */
  private void refuse(RoutingContext ctx, byte[] hash, Runner caller, String call) {
    store
        .tokenState(hash)
        .onSuccess(
            st -> {
              if (st.isEmpty()) {
                fail(ctx, unauthorized("this token belongs to no current attempt"));
                return;
              }
              BuildStore.TokenState t = st.get();
              BuildStore.Holder holder = t.holder();
              boolean other = holder != null && !holder.runner().id().equals(caller.id());
              if (t.status().terminal()) {
                if (other) {
                  conflict(ctx, holder, caller, call);
                } else if (call.equals("complete")) {
                  json(ctx, 200, Map.of("status", t.status().wire()));
                } else {
                  fail(
                      ctx,
                      new ApiError(
                          410,
                          "build " + t.id() + " has ended: " + t.status().wire(),
                          "this attempt should stop and exit",
                          null));
                }
                return;
              }
              if (other) {
                conflict(ctx, holder, caller, call);
                return;
              }
              fail(
                  ctx,
                  new ApiError(
                      409,
                      "build " + t.id() + " is " + t.status().wire(),
                      call.equals("acquire")
                          ? null
                          : t.status() == BuildState.RUNNING
                              ? "build " + t.id() + " has no workspace to save state for"
                              : "acquire the build first",
                      null));
            })
        .onFailure(ctx::fail);
  }

  // ---------------------------------------------------------------------------------------------
  // Plumbing

  private void failure(RoutingContext ctx) {
    Throwable e = ctx.failure();
    if (e == null) {
      int code = ctx.statusCode();
      String error =
          switch (code) {
            case 413 ->
                "body: larger than the limit of "
                    + Units.formatSize(config.limits().maxRequestBytes());
            case 405 -> "method not allowed";
            default -> "request failed";
          };
      json(ctx, code < 400 ? 500 : code, errorBody(error, null, code == 413 ? "body" : null));
      return;
    }
    fail(ctx, e);
  }

  private void fail(RoutingContext ctx, Throwable e) {
    if (ctx.response().ended() || ctx.response().closed()) {
      return;
    }
    Throwable t = BuildStore.translate(e);
    if (t instanceof ApiError a) {
      json(ctx, a.status(), errorBody(a.getMessage(), a.detail(), a.field()));
    } else if (t instanceof InvalidBuildException ib) {
      json(ctx, 400, errorBody(ib.getMessage(), ib.hint(), ib.field()));
    } else {
      log.error("{} {} failed.", ctx.request().method(), ctx.request().path(), t);
      json(
          ctx,
          500,
          errorBody("internal error: " + t.getMessage(), "see the dispatcher's log", null));
    }
  }

  private static Map<String, Object> errorBody(String error, String detail, String field) {
    Map<String, Object> body = new LinkedHashMap<>();
    body.put("error", error);
    body.put("detail", detail);
    if (field != null) {
      body.put("field", field);
    }
    return body;
  }

  private static void json(RoutingContext ctx, int status, Object body) {
    if (ctx.response().ended() || ctx.response().closed()) {
      return;
    }
    ctx.response()
        .setStatusCode(status)
        .putHeader("Content-Type", "application/json")
        .end(Json.write(body));
  }

  private static ApiError unauthorized(String detail) {
    return new ApiError(401, "unauthorized", detail, null);
  }

  private static String bearer(RoutingContext ctx) {
    String h = ctx.request().getHeader("Authorization");
    if (h == null || !h.regionMatches(true, 0, "Bearer ", 0, 7)) {
      return null;
    }
    return h.substring(7).strip();
  }

  private static JsonNode bodyObject(RoutingContext ctx) {
    String text = ctx.body() == null ? null : ctx.body().asString();
    if (text == null || text.isBlank()) {
      throw new ApiError(400, "body: a JSON object is required", null, "body");
    }
    JsonNode n;
    try {
      n = Json.MAPPER.readTree(text);
    } catch (JsonProcessingException e) {
      throw new ApiError(
          400,
          "body: malformed JSON",
          e.getOriginalMessage()
              + (e.getLocation() == null
                  ? ""
                  : " at line "
                      + e.getLocation().getLineNr()
                      + ", column "
                      + e.getLocation().getColumnNr()),
          "body");
    }
    if (!(n instanceof ObjectNode)) {
      throw new ApiError(400, "body: must be a JSON object", null, "body");
    }
    return n;
  }

  private static long buildId(RoutingContext ctx) {
    String s = ctx.pathParam("id");
    try {
      long id = Long.parseLong(s);
      if (id > 0) {
        return id;
      }
    } catch (NumberFormatException e) {
      // below
    }
    throw new ApiError(404, "build " + s + " not found", "build ids are positive integers", "id");
  }

  private static int intParam(RoutingContext ctx, String name, int fallback, int min, int max) {
    String s = ctx.queryParams().get(name);
    if (s == null || s.isEmpty()) {
      return fallback;
    }
    try {
      int v = Integer.parseInt(s);
      if (v >= min && v <= max) {
        return v;
      }
    } catch (NumberFormatException e) {
      // below
    }
    throw ApiError.badRequest(name, "must be an integer from " + min + " to " + max);
  }

  private static Long longParam(RoutingContext ctx, String name) {
    String s = ctx.queryParams().get(name);
    if (s == null || s.isEmpty()) {
      return null;
    }
    try {
      long v = Long.parseLong(s);
      if (v >= 0) {
        return v;
      }
    } catch (NumberFormatException e) {
      // below
    }
    throw ApiError.badRequest(name, "must be a non-negative integer");
  }

  private static String textOrNull(JsonNode n, String field) {
    JsonNode v = n.path(field);
    return v.isTextual() ? v.asText() : null;
  }

  private static String emptyToNull(String s) {
    return s == null || s.isEmpty() ? null : s;
  }

  /** Cuts a line to at most {@code maxBytes} of UTF-8, on a character boundary. */
  static String truncate(String text, int maxBytes) {
    byte[] b = text.getBytes(StandardCharsets.UTF_8);
    if (b.length <= maxBytes) {
      return text;
    }
    String marker = " …[truncated]";
    int limit = maxBytes - marker.getBytes(StandardCharsets.UTF_8).length;
    int end = Math.max(0, limit);
    while (end > 0 && (b[end] & 0xC0) == 0x80) {
      end--;
    }
    return new String(b, 0, end, StandardCharsets.UTF_8) + marker;
  }

  public int port() {
    return server == null ? -1 : server.actualPort();
  }

  @Override
  public void close() {
    if (server != null) {
      io.oneshot.build.Database.await(server.close());
    }
  }
}
