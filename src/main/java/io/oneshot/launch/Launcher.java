package io.oneshot.launch;

import io.oneshot.build.Runner;
import java.time.Duration;
import java.util.List;

/**
 * Starts, inspects and stops attempts: the seam between the dispatcher and where builds run. Every
 * method may block (process starts, API calls); the dispatcher calls them from its own threads,
 * never from an event loop.
 *
 * <p>Implementations: {@code local} (one OS process per attempt) and {@code kubernetes} (one Job
 * per attempt). Both name an attempt deterministically ({@link Attempt#name()}), which makes {@link
 * #launch} idempotent: launching a name that exists answers {@link LaunchOutcome.AlreadyLaunched}.
 */
public interface Launcher extends AutoCloseable {

  /** {@code local} or {@code kubernetes}; recorded on the build as {@code launch.kind}. */
  String kind();

  /** Starts the attempt, or finds it already started. Never throws for an expected failure. */
  LaunchOutcome launch(Attempt attempt);

  /** What became of an attempt. */
  AttemptState inspect(AttemptRef ref);

  /**
   * Whether an attempt that runs, found without its launch recorded (its dispatcher stopped in
   * between), has all it needs to run and can be adopted as it is. One that has not (a Job whose
   * token Secret was never made) is launched again, which makes what it lacks. May block.
   */
  default boolean readyToAdopt(AttemptRef ref) {
    return true;
  }

  /**
   * Orders the attempt to stop: an interrupt now, a kill after {@code grace} (at once when zero),
   * then its resources removed. Returns without waiting for the attempt to end. Idempotent; a
   * missing attempt is not an error. Throws when the order could not be given (the rescuer tries
   * again on its next tick).
   */
  void kill(AttemptRef ref, Duration grace, String reason);

  /** Every attempt this launcher can see, finished or not, for finding ones no build needs. */
  List<AttemptRef> attempts();

  /**
   * Registers who to tell when an attempt may have ended (so that the rescuer looks at once) and
   * what is worth a line in a build's log. Called before {@link #start}.
   */
  void events(AttemptEvents events);

  /**
   * Gets ready to launch: for Kubernetes, starts watching Jobs and Pods and waits until it has seen
   * all that exist, so that the rescuer's first look adopts or removes them before anything is
   * claimed. Blocks.
   */
  default void start() {}

  /** Launches the dispatcher runs at once unless a launcher says otherwise. */
  int LAUNCHES_AT_ONCE = 64;

  /**
   * How many {@link #launch} calls the dispatcher makes at once, at most: the launcher's own
   * capacity (the Kubernetes launcher's {@code launchesInFlight}). A burst claims thousands of
   * builds in a few cycles; the others wait their turn, in claim order.
   */
  default int launchesAtOnce() {
    return LAUNCHES_AT_ONCE;
  }

  /**
   * Whether an attempt whose process ended still holds something worth keeping until the platform
   * removes it (a Job, whose pod's log {@code kubectl logs} reads, until its TTL): then the rescuer
   * leaves a finished build's attempt alone while it winds down, instead of removing it at once.
   */
  default boolean keepsEndedAttempts() {
    return false;
  }

  /**
   * Who sent a runner call: the runner this launcher started for an attempt, proven by what the
   * platform vouches for (a pod's projected ServiceAccount token, which the API server reviews; the
   * process that holds the call's connection), or nobody it knows. What the call states of itself
   * (its runner headers) proves nothing. May block; called off the event loop.
   */
  RunnerProof prove(RunnerCall call);

  /**
   * A second runner of this attempt was refused (a replaced pod, a copied manifest): removes it
   * when it is this launcher's own (a pod of the attempt's Job, a process it started), and never
   * the {@code holder}. Best effort, and may block; a runner it does not own exits by itself.
   */
  default void removeRunner(AttemptRef ref, Runner intruder, Runner holder) {}

  /**
   * What the launcher found wrong with its platform that an operator should know of (an API server
   * that drops Job fields oneshot sets); empty when nothing. Shown by {@code /readyz}.
   */
  default List<String> warnings() {
    return List.of();
  }

  /**
   * Whether the platform's API answered its latest call or watch; empty for a launcher with no API
   * (local).
   */
  default java.util.Optional<Reachability> reachability() {
    return java.util.Optional.empty();
  }

  /**
   * Registers who to tell when the platform answers again after it could not be reached, so that
   * launches waiting to be tried again are tried at once.
   */
  default void whenReachable(Runnable listener) {}

  /**
   * What the route's template asks for the runner's container, {requests: {...}, limits: {...}}
   * (quantities as written), for checking a build's own request against the limit its pod would
   * have; empty where the launcher has no templates (local).
   */
  default java.util.Map<String, java.util.Map<String, String>> templateResources(
      io.oneshot.config.OneshotConfig.Route route) {
    return java.util.Map.of();
  }

  /**
   * Warm room for the routes' next builds (balloons), where the platform has it: the Kubernetes
   * launcher's Deployments of placeholder pods; empty for the local launcher.
   */
  default java.util.Optional<WarmRoom> warmRoom() {
    return java.util.Optional.empty();
  }

  /**
   * The clusters this launcher launches into and how each is doing, in the order routes name them;
   * empty for a launcher with one place to launch (local, or one cluster's own).
   */
  default List<ClusterState> clusters() {
    return List.of();
  }

  /** The cluster of that name as {@link #clusters} says it; empty when there is none. */
  default java.util.Optional<ClusterState> cluster(String name) {
    return clusters().stream().filter(c -> c.name().equals(name)).findFirst();
  }

  /**
   * The routes whose builds cannot launch now, with why: their cluster cannot be reached or refuses
   * the dispatcher (its credentials, its Role in the route's namespace). The dispatcher claims none
   * of their builds until they can.
   */
  default java.util.Map<String, String> stalledRoutes() {
    java.util.Map<String, String> out = new java.util.LinkedHashMap<>();
    clusters().forEach(c -> out.putAll(c.stalled()));
    return out;
  }

  /** Releases the launcher's own resources. Running attempts are left running. */
  @Override
  void close();
}
