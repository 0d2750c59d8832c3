package io.oneshot.launch;

import io.oneshot.config.OneshotConfig;
import java.util.Map;
import java.util.Set;

/**
 * Warm room on the platform where builds run: balloons, placeholders of a route's pod shape and
 * image at a priority below every build's, which keep room on a node (and the image pulled) for the
 * route's next builds; a build's pod takes a balloon's place, and the platform brings the balloon
 * back, asking for room elsewhere (docs/warm-capacity.md). Only the leading dispatcher sets them.
 * Every method may block; none is called on an event loop.
 */
public interface WarmRoom {

  /**
   * Keeps {@code count} balloons of the route (making what is missing, changing what its template
   * changed). Throws when the platform refused; the caller tries again on its next count.
   */
  void hold(OneshotConfig.Route route, int count);

  /** Removes the balloons of every route not in {@code keep}. Throws when the platform refused. */
  void release(Set<String> keep);

  /** The balloons there are, by route: asked for, running (holding room) and pending (waiting). */
  Map<String, Observed> observed();

  /**
   * Why balloons cannot be kept at all (the PriorityClass they need is missing, or not below the
   * builds'); null when they can. Checked again on each call until it holds.
   */
  String trouble();

  /** Registers who to tell when a build's pod took a balloon's place, and when balloons change. */
  void listen(Listener listener);

  /** A route's balloons as last seen: asked for, running (holding room), pending (waiting). */
  record Observed(int asked, int running, int pending) {
    public static final Observed NONE = new Observed(0, 0, 0);
  }

  /** What the platform says of balloons. */
  interface Listener {
    /**
     * A build's pod took the place of balloon {@code balloon} of {@code route} on {@code node}: the
     * attempt is the build pod's, when it is known.
     */
    void preempted(String route, String balloon, String node, java.util.Optional<AttemptRef> by);

    /** Balloons started, ended or waited: worth counting again. */
    void changed();
  }
}
