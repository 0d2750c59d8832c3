package io.oneshot.launch;

import java.time.Instant;
import java.util.List;
import java.util.Map;

/**
 * How a cluster that routes launch into is doing, as its launcher last saw it: shown by {@code
 * /readyz}, exported as gauges, listed by the console, and read by the dispatcher and the rescuer,
 * which leave a cluster in trouble alone (its routes are not claimed, its attempts neither requeued
 * nor killed) until it is fine again.
 *
 * @param name the cluster's name ({@code home}: the dispatcher's own)
 * @param api the URL of its API server, when known
 * @param reachable whether its API server answered the latest call
 * @param trouble what keeps launches from going through (cannot be reached, refuses the
 *     dispatcher's credentials, forbids it a namespace); null when nothing does
 * @param since when the current state (fine, or this trouble) began
 * @param routes the routes that launch into it
 * @param stalled the routes that cannot launch now, with why (every route of a cluster in trouble;
 *     those of a namespace it forbids)
 */
public record ClusterState(
    String name,
    String api,
    boolean reachable,
    String trouble,
    Instant since,
    List<String> routes,
    Map<String, String> stalled) {

  /** Whether launches can go through. */
  public boolean fine() {
    return trouble == null;
  }
}
