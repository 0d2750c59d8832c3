package io.oneshot.api;

import static io.oneshot.api.Http.json;

import io.oneshot.build.BuildStore;
import io.vertx.core.Vertx;
import io.vertx.ext.web.Router;
import io.vertx.ext.web.RoutingContext;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Supplier;

/**
 * Health and metrics: {@code /healthz} (the process answers), {@code /readyz} (the database answers
 * within 2 s; with the leader and listener status) and {@code /metrics} (Prometheus).
 */
final class HealthApi {
  private final Vertx vertx;
  private final BuildStore store;
  private final Supplier<Map<String, Object>> status;
  private final Metrics metrics;

  /**
   * @param status what {@code /readyz} reports beside the database check (leader, listener)
   */
  HealthApi(Vertx vertx, BuildStore store, Supplier<Map<String, Object>> status, Metrics metrics) {
    this.vertx = vertx;
    this.store = store;
    this.status = status;
    this.metrics = metrics;
  }

  void mount(Router router) {
    router.get("/healthz").handler(ctx -> json(ctx, 200, Map.of("status", "ok")));
    router.get("/readyz").handler(this::ready);
  }

  /** {@code GET /metrics}, the Prometheus text, behind {@code guard}. */
  void mountMetrics(Router router, io.vertx.core.Handler<RoutingContext> guard) {
    router
        .get("/metrics")
        .handler(guard)
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
}
