package io.oneshot.testing;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** Limits as the event table tells them: how many builds were live at once. */
public final class Limits {
  private Limits() {}

  /**
   * Replays every status change in order and returns the most builds that were launching or running
   * at once: under {@code global}, {@code route:<name>} and {@code ws:<workspace>}.
   */
  public static Map<String, Integer> maxConcurrency() {
    List<Map<String, Object>> events =
        Sql.rows(
            """
            SELECT e.from_status, e.to_status, b.route, b.workspace
            FROM oneshot.build_events e JOIN oneshot.builds b ON b.id = e.build_id
            WHERE e.from_status IS DISTINCT FROM e.to_status
            ORDER BY e.at, e.id
            """);
    Map<String, Integer> live = new HashMap<>();
    Map<String, Integer> max = new HashMap<>();
    for (Map<String, Object> e : events) {
      boolean wasLive = isLive((String) e.get("from_status"));
      boolean nowLive = isLive((String) e.get("to_status"));
      if (wasLive == nowLive) {
        continue;
      }
      int delta = nowLive ? 1 : -1;
      List<String> keys = new ArrayList<>(List.of("global", "route:" + e.get("route")));
      if (e.get("workspace") != null) {
        keys.add("ws:" + e.get("workspace"));
      }
      for (String k : keys) {
        int v = live.merge(k, delta, Integer::sum);
        max.merge(k, v, Math::max);
      }
    }
    return max;
  }

  private static boolean isLive(String status) {
    return "launching".equals(status) || "running".equals(status);
  }
}
