package io.oneshot.dispatch;

import io.oneshot.api.Metrics;
import io.oneshot.build.BuildStore;
import io.oneshot.build.Database;
import io.oneshot.build.WarmStore;
import io.oneshot.config.OneshotConfig;
import io.oneshot.launch.AttemptEvents;
import io.oneshot.launch.AttemptRef;
import io.oneshot.launch.WarmRoom;
import java.time.Duration;
import java.time.Instant;
import java.time.InstantSource;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Warm capacity, on the leading replica: counts each warm route's balloons ({@link WarmCount}) on
 * every change of the queue and at least every {@code dispatch.warmInterval}, has the launcher keep
 * that many ({@link WarmRoom}), and records what it counted and saw, with the balloons' cost, for
 * every replica to show. A follower does nothing: it never touches balloons, and the balloons the
 * last leader set stay as they are until a leader counts again. A build's pod that took a balloon's
 * place is a step in that build's timeline.
 */
public final class Warmth implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(Warmth.class);

  /** How long a route's forecast is used before the history is read again. */
  static final Duration FORECAST_KEPT = Duration.ofMinutes(1);

  private final BuildStore store;
  private final OneshotConfig config;
  private final Optional<WarmRoom> room;
  private final BooleanSupplier leader;
  private final Metrics metrics;
  private final AttemptEvents events;
  private final InstantSource clock;
  private final LoopThread worker = new LoopThread("oneshot-warm");
  private final List<OneshotConfig.Route> warm;
  private final Map<String, AtomicInteger> preempted = new ConcurrentHashMap<>();
  private final Map<String, Forecast> forecasts = new HashMap<>();

  /**
   * When balloons were last counted as leader ({@link #nanoTime}: their time is measured on a
   * monotonic clock, never the schedule's), or null after a follower's pass.
   */
  private Long lastCounted;

  private final java.util.function.LongSupplier nanoTime;

  /** Whether this leader's term has removed the balloons of routes no longer warm. */
  private boolean released;

  private record Forecast(OptionalInt figure, Instant readAt) {}

  public Warmth(
      BuildStore store,
      OneshotConfig config,
      Optional<WarmRoom> room,
      BooleanSupplier leader,
      Metrics metrics,
      AttemptEvents events,
      InstantSource clock) {
    this(store, config, room, leader, metrics, events, clock, System::nanoTime);
  }

  /** {@code nanoTime}: the monotonic clock balloon time is measured on (tests give their own). */
  Warmth(
      BuildStore store,
      OneshotConfig config,
      Optional<WarmRoom> room,
      BooleanSupplier leader,
      Metrics metrics,
      AttemptEvents events,
      InstantSource clock,
      java.util.function.LongSupplier nanoTime) {
    this.nanoTime = nanoTime;
    this.store = store;
    this.config = config;
    this.room = room;
    this.leader = leader;
    this.metrics = metrics;
    this.events = events;
    this.clock = clock;
    this.warm = config.routes().stream().filter(r -> r.warm().any()).toList();
    room.ifPresent(
        r ->
            r.listen(
                new WarmRoom.Listener() {
                  @Override
                  public void preempted(
                      String route, String balloon, String node, Optional<AttemptRef> by) {
                    onPreempted(route, balloon, node, by);
                  }

                  @Override
                  public void changed() {
                    worker.wake();
                  }
                }));
  }

  /**
   * Starts the loop where balloons can be kept (the Kubernetes launcher): also without a warm
   * route, so that a new leader removes the balloons of routes that no longer keep any.
   */
  public void start() {
    if (room.isEmpty()) {
      return;
    }
    worker.start(this::loop);
  }

  /** Counts again soon: the queue changed. */
  public void wake() {
    worker.wake();
  }

  private void loop() {
    while (worker.running()) {
      try {
        pass();
      } catch (RuntimeException e) {
        log.warn("Counting balloons failed: {}. Will try again.", Dispatcher.describe(e));
      }
      try {
        worker.await(config.dispatch().warmInterval().toMillis());
      } catch (InterruptedException e) {
        break;
      }
    }
  }

  /**
   * One count: on the leader, every warm route's balloons counted, kept and recorded; on a
   * follower, nothing. Returns the counts (empty on a follower), for tests.
   */
  public synchronized Map<String, WarmCount.Count> pass() {
    if (room.isEmpty() || !leader.getAsBoolean()) {
      if (lastCounted != null) {
        metrics.noBalloons();
      }
      lastCounted = null;
      released = false;
      return Map.of();
    }
    WarmRoom r = room.get();
    Instant now = clock.instant();
    Set<String> names = new LinkedHashSet<>();
    warm.forEach(w -> names.add(w.name()));
    if (!released) {
      r.release(names);
      released = true;
    }
    if (warm.isEmpty()) {
      return Map.of();
    }
    String trouble = r.trouble();
    Map<String, Integer> live = Database.await(store.warm().live());
    int globalFree =
        config.dispatch().maxConcurrent()
            - live.values().stream().mapToInt(Integer::intValue).sum();
    Map<String, WarmCount.Count> counts = new java.util.LinkedHashMap<>();
    Map<String, String> troubles = new HashMap<>();
    for (OneshotConfig.Route route : warm) {
      int routeLive = live.getOrDefault(route.name(), 0);
      WarmCount.Count c = WarmCount.count(route, now, routeLive, globalFree, forecast(route, now));
      globalFree -= c.wanted();
      counts.put(route.name(), c);
      if (trouble != null) {
        troubles.put(route.name(), trouble);
        continue;
      }
      try {
        r.hold(route, c.wanted());
      } catch (RuntimeException e) {
        String why = Dispatcher.describe(e);
        troubles.put(route.name(), "cannot keep its balloons: " + why);
        log.warn(
            "Route {}: cannot keep {} balloons: {}. Will try again.",
            route.name(),
            c.wanted(),
            why);
      }
    }
    record(counts, troubles, r.observed());
    return counts;
  }

  /** Records the counts and the balloons seen, and adds their time since the last count. */
  private void record(
      Map<String, WarmCount.Count> counts,
      Map<String, String> troubles,
      Map<String, WarmRoom.Observed> seen) {
    // A gap longer than a few intervals (no leader, a stalled pass) is not counted as balloon time:
    // what ran in it is not known.
    long cap = config.dispatch().warmInterval().multipliedBy(3).toNanos();
    long now = nanoTime.getAsLong();
    double elapsed = lastCounted == null ? 0 : Math.min(Math.max(0, now - lastCounted), cap) / 1e9;
    lastCounted = now;
    List<WarmStore.Seen> rows = new ArrayList<>();
    List<WarmStore.Cost> costs = new ArrayList<>();
    for (Map.Entry<String, WarmCount.Count> e : counts.entrySet()) {
      String route = e.getKey();
      WarmRoom.Observed o = seen.getOrDefault(route, WarmRoom.Observed.NONE);
      rows.add(
          new WarmStore.Seen(
              route,
              e.getValue().wanted(),
              e.getValue().why(),
              o.running(),
              o.pending(),
              troubles.get(route)));
      metrics.balloons(route, e.getValue().wanted(), o.running(), o.pending());
      AtomicInteger p = preempted.get(route);
      int preemptions = p == null ? 0 : p.getAndSet(0);
      double seconds = o.running() * elapsed;
      if (seconds > 0 || preemptions > 0) {
        costs.add(new WarmStore.Cost(route, seconds, preemptions));
        metrics.balloonSeconds(route, seconds);
      }
    }
    Database.await(store.warm().record(rows));
    Database.await(store.warm().addUsage(costs));
  }

  /** The route's forecast figure, read from the history at most every {@link #FORECAST_KEPT}. */
  private OptionalInt forecast(OneshotConfig.Route route, Instant now) {
    OneshotConfig.Forecast f = route.warm().forecast();
    if (f == null) {
      return OptionalInt.empty();
    }
    Forecast known = forecasts.get(route.name());
    if (known != null
        && !now.isBefore(known.readAt())
        && now.isBefore(known.readAt().plus(FORECAST_KEPT))) {
      return known.figure();
    }
    Duration longest = route.launchTimeout().plus(route.timeout()).plus(route.terminationGrace());
    List<Integer> peaks =
        Database.await(store.warm().weeklyPeaks(route.name(), now, f.weeks(), f.ahead(), longest));
    OptionalInt figure = WarmCount.percentile(peaks, f.percentile());
    forecasts.put(route.name(), new Forecast(figure, now));
    return figure;
  }

  /**
   * A build's pod took a balloon's place: a step in the build's timeline, counted for the route.
   * Told on the leader only (every replica's launcher hears the scheduler's Event).
   */
  private void onPreempted(String route, String balloon, String node, Optional<AttemptRef> by) {
    if (!leader.getAsBoolean()) {
      return;
    }
    preempted.computeIfAbsent(route, k -> new AtomicInteger()).incrementAndGet();
    metrics.balloonPreempted(route);
    by.ifPresent(
        ref ->
            events.note(
                ref,
                AttemptEvents.Note.milestone(
                    "its pod took the place of balloon "
                        + balloon
                        + (node == null ? "" : " on node " + node)
                        + " (warm room of route "
                        + route
                        + ")")));
    log.info(
        "Route {}: {} took the place of balloon {}{}.",
        route,
        by.map(r -> "build " + r.buildId() + "'s pod").orElse("a pod"),
        balloon,
        node == null ? "" : " on node " + node);
    worker.wake();
  }

  @Override
  public void close() {
    worker.close();
  }
}
