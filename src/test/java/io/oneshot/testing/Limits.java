package io.oneshot.testing;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Limits as the event table tells them: how many builds were live at once, replayed in the order
 * the transitions committed. Ordering by the time a statement ran would under-count: a build's end
 * written at 10:00:01 but committed at 10:00:03 would free its slot two seconds early in the
 * replay, hiding a claim that took the slot in between.
 */
public final class Limits {
  private Limits() {}

  /**
   * From now on, every event is numbered in commit order ({@code audit/commit-order.sql}). Call it
   * before the run whose limits {@link #maxConcurrency()} will check. It costs every transaction
   * that writes an event one lock at commit.
   */
  public static void track() {
    try (var in = Limits.class.getResourceAsStream("/audit/commit-order.sql")) {
      Sql.exec(new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8));
    } catch (java.io.IOException e) {
      throw new java.io.UncheckedIOException(e);
    }
  }

  /**
   * Stops numbering events: drops what {@link #track()} installed, so that the transactions after
   * the run no longer pay its lock at commit (a benchmark scenario after one that tracked drained a
   * third slower). Read {@link #maxConcurrency()} first.
   */
  public static void untrack() {
    Sql.exec(
        "DROP TRIGGER IF EXISTS audit_commit_order ON oneshot.build_events;"
            + " DROP SCHEMA IF EXISTS oneshot_audit CASCADE");
  }

  /** Whether {@link #track()}'s trigger is on the event table now. */
  public static boolean tracking() {
    return Sql.count(
            "SELECT count(*) FROM pg_trigger WHERE tgrelid = 'oneshot.build_events'::regclass"
                + " AND tgname = 'audit_commit_order'")
        > 0;
  }

  /**
   * Replays every status change in commit order and returns the most builds that were launching or
   * running at once: under {@code global}, {@code route:<name>}, {@code team:<name>} (a route's
   * team as the routes table names it now, its own name when none) and {@code
   * ws:<route>/<workspace>}. Needs {@link #track()} before the run.
   */
  public static Map<String, Integer> maxConcurrency() {
    return replay(c -> {});
  }

  /**
   * A build's claim in the replay: its team, and every team's live builds right after it (the
   * claimed one counted).
   */
  public record Claim(String team, Map<String, Integer> liveByTeam) {}

  /**
   * {@link #maxConcurrency()}, telling {@code onClaim} of each claim (a change to launching from
   * pending) with what was live at that point of the commit order.
   */
  public static Map<String, Integer> replay(java.util.function.Consumer<Claim> onClaim) {
    List<Map<String, Object>> events;
    try {
      events =
          Sql.rows(
              """
              SELECT e.id, e.from_status, e.to_status, b.route, b.workspace, c.seq,
                     coalesce(r.team, b.route) AS team
              FROM oneshot.build_events e JOIN oneshot.builds b ON b.id = e.build_id
              LEFT JOIN oneshot.routes r ON r.name = b.route
              LEFT JOIN oneshot_audit.commit_order c ON c.event_id = e.id
              WHERE e.from_status IS DISTINCT FROM e.to_status
              ORDER BY c.seq
              """);
    } catch (IllegalStateException e) {
      throw new IllegalStateException(
          "Limits.track() was not called before the run: " + e.getMessage(), e);
    }
    Map<String, Integer> live = new HashMap<>();
    Map<String, Integer> max = new HashMap<>();
    for (Map<String, Object> e : events) {
      boolean wasLive = isLive((String) e.get("from_status"));
      boolean nowLive = isLive((String) e.get("to_status"));
      if (wasLive == nowLive) {
        continue;
      }
      if (e.get("seq") == null) {
        throw new IllegalStateException(
            "event " + e.get("id") + " was written before Limits.track(): its commit is unknown");
      }
      int delta = nowLive ? 1 : -1;
      List<String> keys =
          new ArrayList<>(List.of("global", "route:" + e.get("route"), "team:" + e.get("team")));
      if (e.get("workspace") != null) {
        keys.add("ws:" + e.get("route") + "/" + e.get("workspace"));
      }
      for (String k : keys) {
        int v = live.merge(k, delta, Integer::sum);
        max.merge(k, v, Math::max);
      }
      if ("pending".equals(e.get("from_status")) && "launching".equals(e.get("to_status"))) {
        Map<String, Integer> teams = new HashMap<>();
        live.forEach(
            (k, v) -> {
              if (k.startsWith("team:")) {
                teams.put(k.substring(5), v);
              }
            });
        onClaim.accept(new Claim((String) e.get("team"), teams));
      }
    }
    return max;
  }

  private static boolean isLive(String status) {
    return "launching".equals(status) || "running".equals(status);
  }
}
