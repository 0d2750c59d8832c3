package io.oneshot.api;

import static io.oneshot.api.Http.bodyObject;
import static io.oneshot.api.Http.buildId;
import static io.oneshot.api.Http.emptyToNull;
import static io.oneshot.api.Http.fail;
import static io.oneshot.api.Http.intParam;
import static io.oneshot.api.Http.json;
import static io.oneshot.api.Http.longParam;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.build.AuditStore;
import io.oneshot.build.BuildReads;
import io.oneshot.build.BuildState;
import io.oneshot.build.BuildStore;
import io.oneshot.build.LogLine;
import io.oneshot.build.QueueStore;
import io.oneshot.build.Sensitive;
import io.oneshot.build.TokenStore.Role;
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
  private final Access access;

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
      int globalLimit,
      Access access) {
    this.globalLimit = globalLimit;
    this.access = access;
    this.vertx = vertx;
    this.store = store;
    this.metrics = metrics;
    this.followers = followers;
    this.draining = draining;
    this.routeStatus =
        new Snapshot<>(() -> store.reads().routes(globalLimit), Duration.ofSeconds(1));
  }

  /** The routes' status is read again at the next ask (a hold or release changed it). */
  void routesChanged() {
    routeStatus.invalidate();
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
    router.get("/api/v1/sources").handler(this::sources);
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
    Caller caller = Access.caller(ctx);
    AuditStore.Entry entry =
        AuditStore.Entry.of(caller.name(), "submit", null, null).withWorkspace(workspace);
    if (!caller.atLeast(Role.SUBMITTER)) {
      access.refuseAudited(ctx, entry, access.role(ctx, Role.SUBMITTER, "submitting a build"));
      return;
    }
    store
        .queue()
        .enqueue(tagsJson, inputJson, priority, workspace, caller.submitter())
        .onSuccess(
            e -> {
              log.info("Build {}: enqueued on route {} by {}.", e.id(), e.route(), caller.name());
              ctx.response().putHeader("Location", "/api/v1/builds/" + e.id());
              json(ctx, 201, e);
            })
        .onFailure(e -> refusedSubmit(ctx, entry, e));
  }

  /**
   * A submit or rerun that failed: one outside the caller's routes is a 403 that names no route
   * (and is audited); anything else is answered as it is.
   */
  private void refusedSubmit(RoutingContext ctx, AuditStore.Entry entry, Throwable e) {
    if (e instanceof Answered) {
      return;
    }
    if (e instanceof QueueStore.OutOfScopeException o) {
      access.countRefused("out_of_scope");
      access
          .audit(entry.withOutcome("out_of_scope"))
          .onComplete(
              x ->
                  fail(
                      ctx,
                      new ApiError(
                          403,
                          "forbidden: " + o.getMessage(),
                          "token "
                              + Access.caller(ctx).name()
                              + " covers the routes oneshot routes lists for it",
                          o.field())));
    } else if (QueueStore.translate(e) instanceof io.oneshot.build.InvalidBuildException ib
        && "tags".equals(ib.field())
        && Access.caller(ctx).routes() != null) {
      // The hint of a build no route takes lists the routes: a scoped token sees its own only.
      fail(
          ctx,
          new ApiError(400, ib.getMessage(), access.routesHint(Access.caller(ctx)), ib.field()));
    } else {
      ctx.fail(e);
    }
  }

  /**
   * Succeeds when the caller's routes cover build {@code id}, at once when they cover every route
   * (the read that follows answers a build that does not exist); else the request fails with a 404
   * (a build outside them is answered as one that does not exist) and the future with it.
   */
  private io.vertx.core.Future<Void> inScope(RoutingContext ctx, long id) {
    Caller caller = Access.caller(ctx);
    if (caller.routes() == null) {
      return io.vertx.core.Future.succeededFuture();
    }
    return store
        .reads()
        .owner(id)
        .compose(
            o -> {
              if (o.isEmpty()) {
                return io.vertx.core.Future.failedFuture(ApiError.notFound("build " + id));
              }
              if (!caller.covers(o.get().route())) {
                return io.vertx.core.Future.failedFuture(access.outOfScope("build " + id));
              }
              return io.vertx.core.Future.succeededFuture();
            });
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
    // tag=key=value, repeatable: builds whose tags hold every one.
    java.util.TreeMap<String, String> tags = new java.util.TreeMap<>();
    for (String t : ctx.queryParam("tag")) {
      int eq = t.indexOf('=');
      if (eq <= 0) {
        throw ApiError.badRequest("tag", "'" + t + "' is not key=value");
      }
      tags.put(t.substring(0, eq), t.substring(eq + 1));
    }
    java.time.Instant since = null;
    String sinceText = emptyToNull(Http.queryText(ctx, "since"));
    if (sinceText != null) {
      try {
        since = java.time.Instant.parse(sinceText);
      } catch (java.time.format.DateTimeParseException e) {
        throw ApiError.badRequest(
            "since", "'" + sinceText + "' is not a time in ISO-8601 (2026-11-24T09:00:00Z)");
      }
    }
    BuildReads.Filter filter =
        new BuildReads.Filter(
            status,
            route,
            tags.isEmpty() ? null : Json.write(tags),
            emptyToNull(Http.queryText(ctx, "workspace")),
            since);
    store
        .reads()
        .list(filter, before, limit, Access.caller(ctx).routes())
        .compose(list -> store.reads().withWhy(list, globalLimit))
        .onSuccess(list -> json(ctx, 200, Map.of("builds", list)))
        .onFailure(ctx::fail);
  }

  private void showBuild(RoutingContext ctx) {
    long id = buildId(ctx);
    // The scope first, by the build's route alone: a build outside it is answered after the same
    // one small read as a build that does not exist, not after reading all of it.
    io.vertx.core.Future<Void> scoped = inScope(ctx, id);
    scoped
        .compose(x -> store.reads().get(id, globalLimit))
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
    inScope(ctx, id)
        .compose(o -> store.reads().input(id))
        .onSuccess(
            in -> {
              if (in.isEmpty()) {
                fail(ctx, ApiError.notFound("build " + id));
              } else {
                // Sensitive values never leave: a build submitted through the API holds them
                // sealed already; one enqueued from SQL holds them as given.
                json(ctx, 200, Sensitive.masked(Json.tree(in.get())));
              }
            })
        .onFailure(ctx::fail);
  }

  private void cancelBuild(RoutingContext ctx) {
    Http.emptyBody(ctx);
    long id = buildId(ctx);
    Caller caller = Access.caller(ctx);
    AuditStore.Entry entry = AuditStore.Entry.of(caller.name(), "cancel", id, null);
    changing(ctx, id, entry, "canceling build " + id)
        .compose(o -> store.queue().cancel(id, caller.name()))
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
                  log.info("Build {} (route {}): canceled by {}.", id, c.route(), caller.name());
                  access
                      .audit(entry.withRoute(c.route()))
                      .onComplete(x -> json(ctx, 202, Map.of("id", id, "status", "canceled")));
                }
                case REQUESTED -> {
                  log.info(
                      "Build {} (route {}): cancel requested by {}; provisionerd will stop it.",
                      id,
                      c.route(),
                      caller.name());
                  access
                      .audit(entry.withRoute(c.route()))
                      .onComplete(
                          x ->
                              json(
                                  ctx,
                                  202,
                                  Map.of("id", id, "status", "running", "cancelRequested", true)));
                }
              }
            })
        .onFailure(e -> failUnlessAnswered(ctx, e));
  }

  /**
   * A rerun: a new build with the finished one's input, tags, priority, workspace and sensitive
   * values; an optional body {@code {"pod": {...}}} changes its pod settings (a resource replaces
   * that resource, any other setting replaces the setting), held to its route's rules as a
   * submit's.
   */
  private void rerunBuild(RoutingContext ctx) {
    JsonNode body = Http.optionalBody(ctx, Set.of("pod"));
    JsonNode pod = body.path("pod");
    if (!pod.isMissingNode() && !pod.isObject()) {
      throw ApiError.badRequest(
          "pod",
          "must be an object of pod settings, like {\"resources\": {\"limits\": {\"memory\": \"1Gi\"}}}");
    }
    String podOverride = pod.isObject() ? Json.write(pod) : null;
    long id = buildId(ctx);
    Caller caller = Access.caller(ctx);
    AuditStore.Entry entry =
        AuditStore.Entry.of(caller.name(), "rerun", null, null)
            .withDetail(Json.MAPPER.createObjectNode().put("rerunOf", id));
    changing(ctx, id, entry, "rerunning build " + id)
        .compose(o -> store.queue().rerun(id, caller.submitter(), podOverride))
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
                  Map<String, Object> answer = new java.util.LinkedHashMap<>();
                  answer.put("id", e.id());
                  answer.put("status", e.status());
                  answer.put("route", e.route());
                  answer.put("rerunOf", id);
                  if (!e.notes().isEmpty()) {
                    answer.put("notes", e.notes());
                  }
                  json(ctx, 201, answer);
                }
              }
            })
        .onFailure(e -> refusedSubmit(ctx, entry, e));
  }

  private void routes(RoutingContext ctx) {
    Caller caller = Access.caller(ctx);
    routeStatus
        .get()
        .onSuccess(
            list ->
                json(
                    ctx,
                    200,
                    caller.routes() == null
                        ? list
                        : list.stream().filter(r -> caller.covers(r.name())).toList()))
        .onFailure(ctx::fail);
  }

  /** The queue sources; a token sees those that feed its routes, with those feeds alone. */
  @SuppressWarnings("unchecked")
  private void sources(RoutingContext ctx) {
    Caller caller = Access.caller(ctx);
    Object all = sources.get();
    if (caller.routes() == null || !(all instanceof List<?> list)) {
      json(ctx, 200, all);
      return;
    }
    List<Object> mine = new java.util.ArrayList<>();
    for (Object o : list) {
      com.fasterxml.jackson.databind.node.ObjectNode n = Json.MAPPER.valueToTree(o);
      com.fasterxml.jackson.databind.node.ArrayNode feeds = Json.MAPPER.createArrayNode();
      for (com.fasterxml.jackson.databind.JsonNode f : n.path("feeds")) {
        if (caller.covers(f.path("route").asText())) {
          feeds.add(f);
        }
      }
      if (!feeds.isEmpty()) {
        n.set("feeds", feeds);
        mine.add(n);
      }
    }
    json(ctx, 200, mine);
  }

  /**
   * For a cancel or a rerun of build {@code id}: its owner when the caller covers its route and may
   * change it (an operator, or the submitter that submitted it; a viewer changes nothing).
   * Otherwise the refusal is audited and answered (404 outside the caller's routes, 403 for a role
   * too narrow), and the future fails with {@link Answered}.
   */
  private io.vertx.core.Future<BuildReads.Owner> changing(
      RoutingContext ctx, long id, AuditStore.Entry entry, String what) {
    Caller caller = Access.caller(ctx);
    return store
        .reads()
        .owner(id)
        .compose(
            found -> {
              BuildReads.Owner owner = found.orElse(null);
              if (owner == null) {
                fail(ctx, ApiError.notFound("build " + id));
              } else if (!caller.covers(owner.route())) {
                access.refuseAudited(ctx, entry, access.outOfScope("build " + id));
              } else if (!caller.mayChange(owner.token())) {
                access.refuseAudited(
                    ctx,
                    entry.withRoute(owner.route()),
                    caller.atLeast(Role.SUBMITTER)
                        ? access.role(ctx, Role.OPERATOR, what + ", which another token submitted,")
                        : access.role(ctx, Role.SUBMITTER, what));
              } else {
                return io.vertx.core.Future.succeededFuture(owner);
              }
              return io.vertx.core.Future.failedFuture(Answered.INSTANCE);
            });
  }

  /** Fails the request with {@code e}, unless its answer has been sent already. */
  private static void failUnlessAnswered(RoutingContext ctx, Throwable e) {
    if (!(e instanceof Answered)) {
      ctx.fail(e);
    }
  }

  /** A failure whose answer has been sent already. */
  static final class Answered extends RuntimeException {
    static final Answered INSTANCE = new Answered();

    private Answered() {
      super("answered", null, false, false);
    }
  }

  /**
   * NDJSON, one {@link LogLine} per line, after {@code after}. With {@code follow=true} the
   * response stays open and streams new lines until the build ends.
   */
  private void buildLogs(RoutingContext ctx) {
    long id = buildId(ctx);
    long after = longParam(ctx, "after") == null ? 0 : longParam(ctx, "after");
    boolean follow = "true".equals(ctx.queryParams().get("follow"));
    Context context = Vertx.currentContext();
    inScope(ctx, id)
        .onSuccess(o -> new LogStream(ctx, id, after, follow, context).next())
        .onFailure(ctx::fail);
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
