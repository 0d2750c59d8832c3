package io.oneshot.dispatch;

import io.oneshot.api.Metrics;
import io.oneshot.build.BuildState;
import io.oneshot.build.BuildStore;
import io.oneshot.build.Database;
import java.util.Optional;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A lost attempt's requeue as the dispatcher and the rescuer both make it: the compare-and-set
 * (which also writes the build's log line), then its metric and its WARN.
 */
final class Requeues {
  private static final Logger log = LoggerFactory.getLogger(Requeues.class);

  private Requeues() {}

  /**
   * Requeues the build, or fails it on its route's last attempt. False: the attempt moved on
   * meanwhile (acquired, reported, canceled) and nothing was done.
   */
  static boolean requeue(
      BuildStore store,
      Metrics metrics,
      long id,
      int attempt,
      String route,
      BuildState from,
      String why,
      Metrics.Requeue kind) {
    Optional<BuildState> now = Database.await(store.attempts().requeue(id, attempt, from, why));
    if (now.isEmpty()) {
      return false;
    }
    boolean again = now.get() == BuildState.PENDING;
    if (again) {
      metrics.requeued(route, kind);
    } else {
      metrics.finished(route, "failed", null);
    }
    log.warn(
        "Build {} (route {}, attempt {}): {}; {}.",
        id,
        route,
        attempt,
        why,
        again ? "requeued for attempt " + (attempt + 1) : "no attempts left, the build failed");
    return true;
  }
}
