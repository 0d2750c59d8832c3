package io.oneshot.dispatch;

import io.oneshot.api.Metrics;
import io.oneshot.build.AttemptStore;
import io.oneshot.build.AttemptStore.Current;
import io.oneshot.build.AttemptStore.LiveBuild;
import io.oneshot.build.BuildState;
import io.oneshot.build.BuildStore;
import io.oneshot.build.Database;
import io.oneshot.config.OneshotConfig;
import io.oneshot.config.Units;
import io.oneshot.launch.AttemptRef;
import io.oneshot.launch.AttemptState;
import io.oneshot.launch.ClusterState;
import io.oneshot.launch.Launcher;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Compares what the queue says is launching or running with what the launcher and the heartbeats
 * say, and settles every difference:
 *
 * <ul>
 *   <li>an attempt that ended or vanished before provisionerd acquired its build is an
 *       infrastructure failure: requeued while attempts remain, else failed;
 *   <li>an attempt that did not acquire within the route's {@code launchTimeout} is killed and
 *       treated the same way;
 *   <li>an attempt that ended after acquiring without reporting fails the build (script builds of
 *       routes with {@code retryAfterAcquire} are requeued instead);
 *   <li>a heartbeat older than {@code hangTimeout} fails the build as hung; a cancel or timeout
 *       that provisionerd did not carry out in time is carried out here;
 *   <li>a claimed build whose launch was never recorded (the dispatcher stopped in between) is
 *       adopted if its attempt runs, launched again if it does not;
 *   <li>an attempt that no live build needs is killed.
 * </ul>
 *
 * Every move is a compare-and-set on (build, attempt, status) that revokes the old attempt's hold
 * (its token, or its running status) and writes why into the build's log, before the old attempt is
 * killed: never two live attempts for one build, and a kill that fails is retried on the next tick.
 */
public final class Rescuer implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(Rescuer.class);

  /** Extra time the dispatcher allows provisionerd to enforce a timeout or cancel itself. */
  static final Duration SLACK = Duration.ofSeconds(15);

  /** How long an attempt that reported its outcome gets to exit before it is removed. */
  static final Duration FINISHING = Duration.ofSeconds(30);

  /** How long a tick waits for a claim sent before its read to be registered, at most. */
  static final Duration CLAIM_WAIT = Duration.ofSeconds(10);

  private static final OneshotConfig.Route UNKNOWN_ROUTE =
      new OneshotConfig.Route(
          "(unknown)",
          Map.of(),
          null,
          null,
          0,
          Duration.ofHours(1),
          Duration.ofMinutes(5),
          Duration.ofMinutes(2),
          io.oneshot.config.ConfigLoader.DEFAULT_LEASE,
          Duration.ofSeconds(60),
          1,
          false,
          false,
          new OneshotConfig.Retention(null, 0, Duration.ofMinutes(1), 1),
          null,
          java.util.List.of(),
          null,
          OneshotConfig.Warm.NONE,
          null,
          null,
          OneshotConfig.HOME);

  private final BuildStore store;
  private final Launcher launcher;
  private final OneshotConfig config;
  private final Dispatcher dispatcher;
  private final BooleanSupplier leader;
  private final Metrics metrics;
  private final LoopThread worker = new LoopThread("oneshot-rescue");

  /**
   * The least time from one pass's start to the next when wakes ask for it (or the rescue interval,
   * when shorter). Every attempt that ends wakes the rescuer, and each pass reads every live build:
   * builds ending by the hundred a second kept it reading them back to back, for decisions that
   * never need to come sooner than this.
   */
  static final Duration WOKEN_PASS_GAP = Duration.ofMillis(200);

  public Rescuer(
      BuildStore store,
      Launcher launcher,
      OneshotConfig config,
      Dispatcher dispatcher,
      BooleanSupplier leader,
      Metrics metrics) {
    this.metrics = metrics;
    this.store = store;
    this.launcher = launcher;
    this.config = config;
    this.dispatcher = dispatcher;
    this.leader = leader;
  }

  public void start() {
    worker.start(this::loop);
  }

  /** Asks for a tick now (an attempt ended, a build was canceled). */
  public void wake() {
    worker.wake();
  }

  private void loop() {
    long interval = config.dispatch().rescueInterval().toMillis();
    long gap = Math.min(interval, WOKEN_PASS_GAP.toMillis());
    long last = System.nanoTime() - gap * 1_000_000;
    while (worker.running()) {
      try {
        worker.await(interval);
        // Woken passes come at most once a gap: wakes that arrive meanwhile fold into the next.
        long early = gap - (System.nanoTime() - last) / 1_000_000;
        if (early > 0) {
          Thread.sleep(early);
        }
        last = System.nanoTime();
        if (worker.running()) {
          tick();
        }
      } catch (InterruptedException e) {
        break;
      } catch (RuntimeException e) {
        log.warn("Rescue tick failed: {}. Will keep running.", Dispatcher.describe(e));
      }
    }
  }

  /** One pass over every live build and every attempt the launcher knows. */
  public void tick() {
    if (!leader.getAsBoolean()) {
      return;
    }
    for (OwedKill k : List.copyOf(owed.values())) {
      if (k.ref().cluster() != null
          && launcher.cluster(k.ref().cluster()).map(c -> !c.fine()).orElse(false)) {
        continue; // given when its cluster is fine again
      }
      kill(k.ref(), k.why());
    }
    List<LiveBuild> live = Database.await(store.attempts().live());
    // A claim commits before this replica registers its builds as launching: one this read saw
    // claimed may not be registered yet, and would look like a build whose launch was lost.
    try {
      if (!dispatcher.awaitClaimsSentBefore(CLAIM_WAIT)) {
        log.warn(
            "Rescue tick skipped: a claim has not been answered within {}. Will try again.",
            Units.format(CLAIM_WAIT));
        return;
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return;
    }
    Set<String> needed = new HashSet<>();
    for (LiveBuild b : live) {
      needed.add(key(b.id(), b.attempt()));
      if (dispatcher.launching(b.id())) {
        continue;
      }
      try {
        settle(b);
      } catch (RuntimeException e) {
        log.warn(
            "Build {}: cannot settle attempt {}: {}. Will try again.",
            b.id(),
            b.attempt(),
            Dispatcher.describe(e));
      }
    }
    removeOrphans(needed);
  }

  private void settle(LiveBuild b) {
    OneshotConfig.Route route = config.route(b.route()).orElse(UNKNOWN_ROUTE);
    Optional<ClusterState> cluster = launcher.cluster(route.cluster());
    if (cluster.isPresent() && !cluster.get().fine()) {
      // What its platform says cannot be known now, and a kill could not be given: the build is
      // left as it is until its cluster is fine (a running one still heartbeats and reports).
      return;
    }
    AttemptRef ref =
        new AttemptRef(
            b.id(),
            b.attempt(),
            b.launchName(),
            b.launchNamespace(),
            cluster.isPresent() ? route.cluster() : null);
    if (b.status() == BuildState.LAUNCHING) {
      settleLaunching(b, route, ref, launchAgoMs(b, route, cluster));
    } else {
      settleRunning(b, route, ref);
    }
  }

  /**
   * How long the attempt has been launching, as its launch timeout counts it: from its claim, or
   * from its cluster's latest return when that is later (a cluster that was down costs its
   * launching builds no attempt).
   */
  static long launchAgoMs(LiveBuild b, OneshotConfig.Route route, Optional<ClusterState> cluster) {
    if (cluster.isEmpty()) {
      return b.claimedAgoMs();
    }
    long sinceFine = Duration.between(cluster.get().since(), java.time.Instant.now()).toMillis();
    return Math.min(b.claimedAgoMs(), Math.max(0, sinceFine));
  }

  private void settleLaunching(
      LiveBuild b, OneshotConfig.Route route, AttemptRef ref, long launchAgoMs) {
    AttemptState state = launcher.inspect(ref);
    if (!b.launched()) {
      switch (state) {
        case AttemptState.Running r when !launcher.readyToAdopt(ref) ->
            dispatcher.relaunch(b.id(), b.attempt(), b.route(), b.launchName(), b.claimedAgoMs());
        case AttemptState.Running r -> {
          boolean adopted =
              Database.await(
                      store
                          .attempts()
                          .markLaunched(
                              b.id(),
                              b.attempt(),
                              launcher.kind(),
                              ref.name(),
                              ref.namespace(),
                              "adopted after a dispatcher restart: " + r.detail()))
                  .isPresent();
          if (adopted) {
            log.info(
                "Build {} (route {}, attempt {}): adopted {} ({}).",
                b.id(),
                b.route(),
                b.attempt(),
                ref,
                r.detail());
          }
        }
        case AttemptState.Missing m ->
            dispatcher.relaunch(b.id(), b.attempt(), b.route(), b.launchName(), b.claimedAgoMs());
        case AttemptState.Exited e -> endedBeforeAcquire(b, ref, e);
      }
      return;
    }
    switch (state) {
      case AttemptState.Running r
          when r.stuck() != null && launchAgoMs > route.launchTimeout().toMillis() ->
          // Another attempt would meet the same (no node takes the pod, its image cannot be had):
          // the build fails with the reason rather than waiting as long again, and again.
          end(
              b,
              ref,
              BuildState.FAILED,
              "the attempt did not start within the launch timeout of "
                  + Units.format(route.launchTimeout())
                  + ": "
                  + r.stuck(),
              true);
      case AttemptState.Running r -> {
        if (launchAgoMs > route.launchTimeout().toMillis()) {
          requeue(
              b,
              ref,
              "provisionerd did not acquire the build within "
                  + Units.format(route.launchTimeout())
                  + " ("
                  + r.detail()
                  + ")",
              Metrics.Requeue.LAUNCH_TIMEOUT);
        }
      }
      case AttemptState.Exited e -> endedBeforeAcquire(b, ref, e);
      case AttemptState.Missing m ->
          requeue(
              b,
              ref,
              "attempt "
                  + ref.name()
                  + " vanished before provisionerd acquired the build: "
                  + m.detail(),
              Metrics.Requeue.VANISHED);
    }
  }

  private void settleRunning(LiveBuild b, OneshotConfig.Route route, AttemptRef ref) {
    AttemptState state = launcher.inspect(ref);
    Optional<String> ended =
        switch (state) {
          case AttemptState.Running r -> Optional.empty();
          case AttemptState.Exited e -> Optional.of(e.detail());
          case AttemptState.Missing m -> Optional.of(m.detail());
        };
    // The platform's word that nothing of the attempt runs (the kubelet reported its containers
    // terminated) needs no waiting out the lease; and what ended by itself is kept where its
    // launcher keeps ended attempts (a Job, for kubectl logs, until its ttlSecondsAfterFinished).
    boolean nothingRuns = state instanceof AttemptState.Exited e && e.nothingRuns();
    boolean killAfter = !(nothingRuns && launcher.keepsEndedAttempts());
    // A runner that is cut off stops its provisioner once its lease runs out, and takes up to the
    // cancel grace to do so. Until then the build stays running (and its workspace locked),
    // whatever its pod or process looks like from here: a pod on a node that dropped off the
    // network may still be applying.
    long fenced = fencedAfter(route).toMillis();
    boolean quietLongEnough = b.heartbeatAgoMs() == null || b.heartbeatAgoMs() > fenced;
    if (ended.isPresent()) {
      if (!quietLongEnough && !nothingRuns) {
        return;
      }
      String why = "provisionerd ended without reporting an outcome: " + ended.get();
      if (b.cancelRequested()) {
        // The cancel was asked for first: the build ends as its user asked, not as a failure,
        // and is not run again.
        end(b, ref, BuildState.CANCELED, "canceled; " + why, killAfter);
      } else if (route.retryAfterAcquire() && "script".equals(b.provisioner())) {
        requeue(b, ref, why, Metrics.Requeue.LOST_AFTER_ACQUIRE);
      } else {
        end(b, ref, BuildState.FAILED, why, killAfter);
      }
      return;
    }
    long hang = Math.max(route.hangTimeout().toMillis(), fenced);
    if (b.heartbeatAgoMs() != null && b.heartbeatAgoMs() > hang) {
      end(
          b,
          ref,
          BuildState.FAILED,
          "provisionerd stopped reporting: no heartbeat for "
              + Units.format(Duration.ofMillis(b.heartbeatAgoMs() / 1000 * 1000))
              + " (the limit is "
              + Units.format(Duration.ofMillis(hang))
              + "); its attempt was killed");
      return;
    }
    long cancelLimit = route.cancelGrace().plus(SLACK).toMillis();
    if (b.cancelRequested()
        && b.cancelRequestedAgoMs() != null
        && b.cancelRequestedAgoMs() > cancelLimit) {
      end(
          b,
          ref,
          BuildState.CANCELED,
          "canceled; provisionerd did not stop within the cancel grace of "
              + Units.format(route.cancelGrace())
              + ", so its attempt was killed");
      return;
    }
    long timeoutLimit = route.timeout().plus(route.cancelGrace()).plus(SLACK).toMillis();
    if (b.startedAgoMs() != null && b.startedAgoMs() > timeoutLimit) {
      end(
          b,
          ref,
          BuildState.FAILED,
          "timed out after "
              + Units.format(route.timeout())
              + " (enforced by the dispatcher; provisionerd did not stop by itself)");
    }
  }

  /**
   * How long after its last accepted heartbeat a running build's runner has surely stopped its
   * provisioner: its lease, then the cancel grace, plus {@link #SLACK}.
   */
  static Duration fencedAfter(OneshotConfig.Route route) {
    return route.lease().plus(route.cancelGrace()).plus(SLACK);
  }

  /**
   * Requeues the build (or fails it, on its last attempt), then kills its attempt. The requeue is a
   * compare-and-set on (build, attempt, status) that also revokes the attempt's token and writes
   * why into the build's log, so the old attempt can no longer acquire, heartbeat or report
   * whatever the kill does: an attempt that acquires at that very moment either wins (the requeue
   * does nothing, and it is left running) or is refused. The kill is best effort; one that fails is
   * retried on the next tick, as the attempt is no longer needed.
   */
  private void requeue(LiveBuild b, AttemptRef ref, String why, Metrics.Requeue kind) {
    requeue(b, ref, why, kind, true);
  }

  /** {@link #requeue}; without {@code kill}, the old attempt (ended by itself) is left as it is. */
  private void requeue(
      LiveBuild b, AttemptRef ref, String why, Metrics.Requeue kind, boolean kill) {
    if (!Requeues.requeue(store, metrics, b.id(), b.attempt(), b.route(), b.status(), why, kind)) {
      return; // it moved on meanwhile (acquired, reported, canceled)
    }
    FaultPoint.DURING_REQUEUE.reach();
    if (kill) {
      kill(ref, why);
    }
  }

  /**
   * Ends the build in {@code to} (a compare-and-set that writes why into its log), then kills its
   * attempt, best effort: the runner's calls are refused from the end on, and a failed kill is
   * retried on the next tick.
   */
  private void end(LiveBuild b, AttemptRef ref, BuildState to, String why) {
    end(b, ref, to, why, true);
  }

  /** {@link #end}; without {@code kill}, the attempt (which ended by itself) is left as it is. */
  private void end(LiveBuild b, AttemptRef ref, BuildState to, String why, boolean kill) {
    Optional<AttemptStore.Ended> ended =
        Database.await(store.attempts().finish(b.id(), b.attempt(), b.status(), to, why));
    if (ended.isEmpty()) {
      return;
    }
    metrics.finished(ended.get().route(), to.wire(), ended.get().ranSeconds());
    log.warn(
        "Build {} (route {}, attempt {}): {}: {}.", b.id(), b.route(), b.attempt(), to.wire(), why);
    if (kill) {
      kill(ref, why);
    }
  }

  private void kill(AttemptRef ref, String why) {
    try {
      launcher.kill(ref, Duration.ZERO, why);
      owed.remove(key(ref.buildId(), ref.attempt()));
    } catch (RuntimeException e) {
      owed.put(key(ref.buildId(), ref.attempt()), new OwedKill(ref, why));
      log.warn(
          "Cannot remove attempt {} ({}): {}. Will try again.", ref, why, Dispatcher.describe(e));
      return;
    }
    // What the rescuer deleted is no longer there for kubectl: the launch record says so, and
    // why (builds show, the console). Best effort: the next kill of the same attempt writes it.
    try {
      Database.await(store.attempts().removed(ref.buildId(), ref.attempt(), why));
    } catch (RuntimeException e) {
      owed.put(key(ref.buildId(), ref.attempt()), new OwedKill(ref, why));
      log.warn(
          "Removed attempt {} ({}) but cannot mark its launch record: {}. Will try again.",
          ref,
          why,
          Dispatcher.describe(e));
    }
  }

  /** A kill that failed, to be tried again on the next tick. */
  private record OwedKill(AttemptRef ref, String why) {}

  /**
   * Kills that failed, by attempt: tried again on every tick until one succeeds, whatever the
   * attempt looks like meanwhile (a hung one still runs, and would otherwise be left to wind down).
   */
  private final Map<String, OwedKill> owed = new java.util.concurrent.ConcurrentHashMap<>();

  /** Kills attempts that no live build needs: canceled, finished, or superseded ones. */
  private void removeOrphans(Set<String> needed) {
    List<AttemptRef> candidates = new ArrayList<>();
    for (AttemptRef ref : launcher.attempts()) {
      if (!needed.contains(key(ref.buildId(), ref.attempt()))
          && !dispatcher.launching(ref.buildId())) {
        candidates.add(ref);
      }
    }
    if (candidates.isEmpty()) {
      return;
    }
    Map<Long, Current> now =
        Database.await(
            store.attempts().current(candidates.stream().map(AttemptRef::buildId).toList()));
    for (AttemptRef ref : candidates) {
      Current cur = now.get(ref.buildId());
      if (cur != null && cur.status().live() && cur.attempt() == ref.attempt()) {
        continue; // claimed after this tick read the live builds
      }
      if (cur != null
          && cur.attempt() == ref.attempt()
          && cur.started()
          && cur.finishedAgoMs() != null
          && cur.finishedAgoMs() < FINISHING.toMillis()
          && windingDown(ref)) {
        continue; // its provisionerd reported and the attempt is ending by itself
      }
      String why =
          cur == null
              ? "build " + ref.buildId() + " no longer exists"
              : "build "
                  + ref.buildId()
                  + (cur.status().terminal() ? " already " : " is ")
                  + cur.status().wire()
                  + " (attempt "
                  + cur.attempt()
                  + ")";
      FaultPoint.BEFORE_KILL.reach();
      kill(ref, why);
    }
  }

  /**
   * Whether a finished build's attempt is still ending by itself: running, or ended but kept by its
   * launcher (a Job the Job controller has yet to mark complete). A local attempt that ended leaves
   * only its directory, which can go at once.
   */
  private boolean windingDown(AttemptRef ref) {
    return switch (launcher.inspect(ref)) {
      case AttemptState.Running r -> true;
      case AttemptState.Exited e -> launcher.keepsEndedAttempts();
      case AttemptState.Missing m -> false;
    };
  }

  private static String key(long id, int attempt) {
    return id + "/" + attempt;
  }

  /**
   * Requeues a build whose attempt ended before acquiring; an attempt the platform vouches ended
   * whole stays where its launcher keeps ended attempts (its Job, for {@code kubectl logs}).
   */
  private void endedBeforeAcquire(LiveBuild b, AttemptRef ref, AttemptState.Exited e) {
    requeue(
        b,
        ref,
        "attempt " + ref.name() + " ended before provisionerd acquired the build: " + e.detail(),
        Metrics.Requeue.ENDED_BEFORE_ACQUIRE,
        !(e.nothingRuns() && launcher.keepsEndedAttempts()));
  }

  @Override
  public void close() {
    worker.close();
  }
}
