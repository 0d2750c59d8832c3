package io.oneshot.build;

import io.oneshot.api.Json;
import io.oneshot.config.OneshotConfig;
import io.vertx.core.Future;
import io.vertx.sqlclient.Pool;
import io.vertx.sqlclient.Tuple;
import java.util.ArrayList;
import java.util.List;

/**
 * The configuration's routes and size caps, mirrored into the database, where {@code
 * oneshot.enqueue()} binds builds to routes and the claim counts against their limits.
 */
public final class RouteMirror {
  private static final Sql DELETE_MISSING = Sql.load("routes/delete-missing");
  private static final Sql UPSERT = Sql.load("routes/upsert");
  private static final Sql LIMITS = Sql.load("routes/limits");
  private static final Sql FAIL_ORPHANED = Sql.load("routes/fail-orphaned");

  private final Pool pool;

  public RouteMirror(Pool pool) {
    this.pool = pool;
  }

  /**
   * Writes the configured routes (in order) and size caps, and fails queued builds whose route is
   * gone, in one transaction. Returns the routes of the builds it failed, one per build.
   */
  public Future<List<String>> write(List<OneshotConfig.Route> routes, OneshotConfig.Limits limits) {
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
                    .addBoolean(r.untagged());
            f = f.compose(x -> conn.preparedQuery(UPSERT.text()).execute(t));
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
}
