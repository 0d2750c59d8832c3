package io.oneshot.api;

import static io.oneshot.api.Http.bodyObject;
import static io.oneshot.api.Http.buildId;
import static io.oneshot.api.Http.emptyToNull;
import static io.oneshot.api.Http.fail;
import static io.oneshot.api.Http.intParam;
import static io.oneshot.api.Http.json;
import static io.oneshot.api.Http.longParam;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.build.BuildReads;
import io.oneshot.build.BuildState;
import io.oneshot.build.BuildStore;
import io.oneshot.build.LogLine;
import io.oneshot.build.QueueStore;
import io.vertx.core.Context;
import io.vertx.core.Vertx;
import io.vertx.core.http.HttpServerResponse;
import io.vertx.ext.web.Router;
import io.vertx.ext.web.RoutingContext;
import java.time.Duration;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The operators' API (admin token): builds under {@code /api/v1/builds} (create, list, show, follow
 * the log, cancel) and the routes' queues under {@code /api/v1/routes}.
 */
final class AdminApi {
  private static final Logger log = LoggerFactory.getLogger(AdminApi.class);
  private static final Set<String> CREATE_FIELDS = Set.of("tags", "input", "priority", "workspace");
  private static final int LOG_PAGE = 1000;
  private static final long FOLLOW_POLL_MS = 1000;

  private final Vertx vertx;
  private final BuildStore store;
  private final Metrics metrics;
  private final LogFollowers followers;
  private final BooleanSupplier draining;

  /**
   * What {@code GET /api/v1/routes} answers: at most a second old, one query however many
   * dashboards and operators poll it (the counts change by the millisecond in a burst anyway).
   */
  private final Snapshot<List<BuildReads.RouteStatus>> routeStatus;

  /** {@code dispatch.maxConcurrent}, for saying why a build waits. */
  private final int globalLimit;

  /**
   * @param draining true once the server drains: log streams that follow a build end
   * @param globalLimit {@code dispatch.maxConcurrent}
   */
  AdminApi(
      Vertx vertx,
      BuildStore store,
      Metrics metrics,
      LogFollowers followers,
      BooleanSupplier draining,
      int globalLimit) {
    this.globalLimit = globalLimit;
    this.vertx = vertx;
    this.store = store;
    this.metrics = metrics;
    this.followers = followers;
    this.draining = draining;
    this.routeStatus = new Snapshot<>(store.reads()::routes, Duration.ofSeconds(1));
  }

  void mount(Router router) {
    router.post("/api/v1/builds").handler(this::createBuild);
    router.get("/api/v1/builds").handler(this::listBuilds);
    router.get("/api/v1/builds/:id").handler(this::showBuild);
    router.get("/api/v1/builds/:id/logs").handler(this::buildLogs);
    router.get("/api/v1/builds/:id/input").handler(this::buildInput);
    router.post("/api/v1/builds/:id/cancel").handler(this::cancelBuild);
    router.post("/api/v1/builds/:id/rerun").handler(this::rerunBuild);
    router.get("/api/v1/routes").handler(this::routes);
    router.get("/api/v1/sources").handler(ctx -> json(ctx, 200, sources.get()));
  }

  private volatile java.util.function.Supplier<Object> sources = java.util.List::of;

  void sources(java.util.function.Supplier<Object> sources) {
    this.sources = sources;
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
        .queue()
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
    String s = Http.queryText(ctx, "status");
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
    String route = emptyToNull(Http.queryText(ctx, "route"));
    int limit = intParam(ctx, "limit", 100, 1, 1000);
    Long before = longParam(ctx, "before");
    store
        .reads()
        .list(status, route, before, limit)
        .onSuccess(list -> json(ctx, 200, Map.of("builds", list)))
        .onFailure(ctx::fail);
  }

  private void showBuild(RoutingContext ctx) {
    long id = buildId(ctx);
    store
        .reads()
        .get(id, globalLimit)
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

  private void buildInput(RoutingContext ctx) {
    long id = buildId(ctx);
    store
        .reads()
        .input(id)
        .onSuccess(
            in -> {
              if (in.isEmpty()) {
                fail(ctx, ApiError.notFound("build " + id));
              } else {
                ctx.response()
                    .setStatusCode(200)
                    .putHeader("Content-Type", "application/json")
                    .end(in.get());
              }
            })
        .onFailure(ctx::fail);
  }

  private void cancelBuild(RoutingContext ctx) {
    long id = buildId(ctx);
    store
        .queue()
        .cancel(id)
        .onSuccess(
            c -> {
              io.oneshot.dispatch.FaultPoint.AFTER_CANCEL.reach();
              switch (c.result()) {
                case NOT_FOUND -> fail(ctx, ApiError.notFound("build " + id));
                case ALREADY_FINISHED ->
                    store
                        .reads()
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

  private void rerunBuild(RoutingContext ctx) {
    long id = buildId(ctx);
    store
        .queue()
        .rerun(id)
        .onSuccess(
            r -> {
              switch (r.result()) {
                case NOT_FOUND -> fail(ctx, ApiError.notFound("build " + id));
                case NOT_FINISHED ->
                    fail(
                        ctx,
                        new ApiError(
                            409,
                            "build " + id + " is " + r.original().wire() + ", not finished",
                            "only a finished build can be rerun: wait for it, or cancel it first",
                            null));
                case ENQUEUED -> {
                  QueueStore.Enqueued e = r.build();
                  log.info(
                      "Build {}: enqueued on route {}, a rerun of build {}.",
                      e.id(),
                      e.route(),
                      id);
                  ctx.response().putHeader("Location", "/api/v1/builds/" + e.id());
                  json(
                      ctx,
                      201,
                      Map.of(
                          "id", e.id(), "status", e.status(), "route", e.route(), "rerunOf", id));
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

  /**
   * One reader's log stream: a single loop that reads a page after the last line sent, writes it,
   * and reads the next only once the response can take more (its write queue drained), so a slow
   * reader gets every line once, in order, with at most a page held for it. Every step runs on the
   * request's context, one at a time.
   */
  private final class LogStream {
    private final RoutingContext ctx;
    private final long id;
    private final boolean follow;
    private final Context context;
    private long after;
    private boolean started;

    /** A step of the loop is under way (a page being read, or awaited); no second one starts. */
    private boolean busy;

    /** The loop stopped for a full write queue and resumes on the next drain. */
    private boolean paused;

    LogStream(RoutingContext ctx, long id, long after, boolean follow, Context context) {
      this.ctx = ctx;
      this.id = id;
      this.after = after;
      this.follow = follow;
      this.context = context;
    }

    void next() {
      if (busy) {
        return;
      }
      HttpServerResponse resp = ctx.response();
      if (resp.closed() || resp.ended()) {
        return;
      }
      busy = true;
      store
          .reads()
          .logs(id, after, LOG_PAGE)
          .onComplete(
              ar ->
                  context.runOnContext(
                      v -> {
                        busy = false;
                        if (ar.succeeded()) {
                          write(ar.result());
                        } else {
                          failed(ar.cause());
                        }
                      }));
    }

    private void write(Optional<BuildReads.LogPage> page) {
      HttpServerResponse resp = ctx.response();
      if (resp.closed() || resp.ended()) {
        return;
      }
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
        // The loop stops while the response's write queue is full and goes on when it drains.
        resp.drainHandler(v -> next());
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
        if (!resp.writeQueueFull()) {
          context.runOnContext(v -> next());
        }
      } else if (!follow || page.get().status().terminal() || draining.getAsBoolean()) {
        resp.end();
      } else {
        waitForMore();
      }
    }

    private void failed(Throwable e) {
      if (started) {
        log.warn("Build {}: log stream failed: {}.", id, e.getMessage());
        ctx.response().reset();
      } else {
        ctx.fail(e);
      }
    }

    private void waitForMore() {
      AtomicBoolean fired = new AtomicBoolean();
      Runnable again =
          () -> {
            if (fired.compareAndSet(false, true)) {
              context.runOnContext(v -> next());
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
}
