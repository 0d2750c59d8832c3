package io.oneshot.build;

import io.vertx.core.Future;
import io.vertx.sqlclient.Pool;
import io.vertx.sqlclient.Row;
import io.vertx.sqlclient.Tuple;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Warm capacity's part of the queue: the live builds and the history its counts are made from, and
 * what the leader counted and saw of each warm route's balloons, with their cost by the hour
 * (db/017_warm_capacity.sql).
 */
public final class WarmStore {
  private static final Sql LIVE = Sql.load("warm/live");
  private static final Sql FORECAST = Sql.load("warm/forecast");
  private static final Sql RECORD = Sql.load("warm/record");
  private static final Sql USAGE = Sql.load("warm/usage");

  private final Pool pool;

  WarmStore(Pool pool) {
    this.pool = pool;
  }

  /** Each route's builds launching or running; a route with none is absent. */
  public Future<Map<String, Integer>> live() {
    return pool.preparedQuery(LIVE.text())
        .execute()
        .map(
            rows -> {
              Map<String, Integer> out = new HashMap<>();
              for (Row r : rows) {
                out.put(r.getString("route"), r.getInteger("live"));
              }
              return out;
            });
  }

  /**
   * For each of the last {@code weeks} weeks before {@code at} that the route's history reaches,
   * the most of its builds that held a slot at once between that week's {@code at} and {@code
   * ahead} later; {@code longest}: the longest a build may hold a slot.
   */
  public Future<List<Integer>> weeklyPeaks(
      String route, Instant at, int weeks, Duration ahead, Duration longest) {
    return pool.preparedQuery(FORECAST.text())
        .execute(
            Tuple.of(
                route,
                OffsetDateTime.ofInstant(at, ZoneOffset.UTC),
                weeks,
                ahead.toMillis(),
                longest.toMillis()))
        .map(
            rows -> {
              List<Integer> out = new ArrayList<>();
              for (Row r : rows) {
                out.add(r.getInteger("peak"));
              }
              return out;
            });
  }

  /** What the leader counted and saw of one warm route's balloons. */
  public record Seen(
      String route, int wanted, String why, int running, int pending, String trouble) {}

  /** Records every warm route's balloons; rows of routes not among them go. */
  public Future<Void> record(List<Seen> routes) {
    return pool.preparedQuery(RECORD.text())
        .execute(
            Tuple.of(
                routes.stream().map(Seen::route).toArray(String[]::new),
                routes.stream().map(Seen::wanted).toArray(Integer[]::new),
                routes.stream().map(Seen::why).toArray(String[]::new),
                routes.stream().map(Seen::running).toArray(Integer[]::new),
                routes.stream().map(Seen::pending).toArray(Integer[]::new),
                routes.stream().map(Seen::trouble).toArray(String[]::new)))
        .mapEmpty();
  }

  /** What balloons cost a route since the last record: their seconds, and preemptions. */
  public record Cost(String route, double seconds, int preemptions) {}

  /** Adds each route's cost to its current hour (and forgets hours older than eight days). */
  public Future<Void> addUsage(List<Cost> costs) {
    if (costs.isEmpty()) {
      return Future.succeededFuture();
    }
    return pool.preparedQuery(USAGE.text())
        .execute(
            Tuple.of(
                costs.stream().map(Cost::route).toArray(String[]::new),
                costs.stream().map(Cost::seconds).toArray(Double[]::new),
                costs.stream().map(Cost::preemptions).toArray(Integer[]::new)))
        .mapEmpty();
  }
}
