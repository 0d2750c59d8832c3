package io.oneshot.dispatch;

import io.oneshot.api.Metrics;
import io.oneshot.build.AttemptStore;
import io.oneshot.build.BuildState;
import io.oneshot.build.BuildStore;
import io.oneshot.build.BuildToken;
import io.oneshot.build.Database;
import io.oneshot.build.FencedOutException;
import io.oneshot.build.LeaderFence;
import io.oneshot.build.QueueStore.ClaimSteps;
import io.oneshot.build.QueueStore.ClaimToken;
import io.oneshot.build.QueueStore.Claimed;
import io.oneshot.config.OneshotConfig;
import io.oneshot.config.Units;
import io.oneshot.launch.Attempt;
import io.oneshot.launch.ClusterState;
import io.oneshot.launch.LaunchOutcome;
import io.oneshot.launch.Launcher;
import io.vertx.core.AsyncResult;
import io.vertx.core.Future;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The claim loop. It sleeps until woken (NOTIFY, a reconnect of the listener, a freed slot) or
 * until the jittered poll tick, then runs one {@link #cycle()}: claim what the limits allow, in one
 * committed statement, then launch each claimed build on its own virtual thread. Only the leader
 * claims.
 */
public final class Dispatcher implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(Dispatcher.class);

  private final BuildStore store;
  private final Launcher launcher;
  private final OneshotConfig config;
  private final String apiUrl;
  private final Supplier<LeaderFence> fence;
  private volatile boolean fencedOut;
  private final LoopThread worker = new LoopThread("oneshot-dispatch");
  private final Set<Long> inFlight = ConcurrentHashMap.newKeySet();
  private final Map<Long, Launch> waiting = new ConcurrentHashMap<>();

  /**
   * How many times the platform has answered again after it could not be reached. A launch notes it
   * before its try, and one that is told to wait checks it once it waits: a return that came while
   * it was being tried, or before it was put among those waiting, finds it there no more.
   */
  private final AtomicLong answeredAgain = new AtomicLong();

  private final ExecutorService launches = Executors.newVirtualThreadPerTaskExecutor();

  /**
   * Launcher calls under way at once, at most ({@link Launcher#launchesAtOnce}). A burst claims
   * thousands of builds in a few cycles; unbounded, their launches would open as many API requests
   * or process starts at once.
   */
  private final Semaphore launchSlots;

  private final ScheduledExecutorService retries;

  /** The launch records' timers: a held row's next write, a record's timeout. */
  private final ScheduledExecutorService recordTimer;

  private final Deque<ClaimToken> spareTokens = new ArrayDeque<>();
  private final AtomicLong cycles = new AtomicLong();
  private volatile long lastWake;
  private volatile Consumer<CycleTimes> cycleTimes;
  private volatile Consumer<List<Long>> claimCommitted;

  /**
   * Claims sent, and claims whose builds are registered as launching here (or that failed), by
   * number. A claim commits before its answer reaches this replica, so between the two a reader of
   * the queue sees its builds claimed while {@link #launching} does not know them yet: the rescuer
   * waits for the claims sent before its read ({@link #awaitClaimsSentBefore}). Cycles run one at a
   * time, so every claim up to {@code claimsSettled} is settled.
   */
  private long claimsSent;

  private long claimsSettled;
  private int claimWaiters;
  private final Object claims = new Object();
  private final AtomicLong relaunches = new AtomicLong();
  private final AtomicLong polls = new AtomicLong();
  private final AtomicLong pollsWithWork = new AtomicLong();
  private final Metrics metrics;
  private final LaunchRecorder recorder;

  /** Launch records under way ({@link #record}): one counter, its own lock. */
  private final int[] recording = {0};

  public Dispatcher(
      BuildStore store,
      Launcher launcher,
      OneshotConfig config,
      String apiUrl,
      Supplier<LeaderFence> fence,
      Metrics metrics) {
    this.metrics = metrics;
    this.store = store;
    this.launcher = launcher;
    this.config = config;
    this.apiUrl = apiUrl;
    this.fence = fence;
    this.launchSlots = new Semaphore(Math.max(1, launcher.launchesAtOnce()), true);
    this.retries =
        Executors.newSingleThreadScheduledExecutor(
            Thread.ofPlatform().name("oneshot-launch-retry").daemon().factory());
    this.recordTimer =
        Executors.newSingleThreadScheduledExecutor(
            Thread.ofPlatform().name("oneshot-launch-record").daemon().factory());
    this.recorder = new LaunchRecorder(store, recordTimer);
    launcher.whenReachable(
        () -> {
          retryWaitingNow();
          wake(); // a route stalled on its cluster may be claimed again
        });
  }

  public void start() {
    worker.start(this::loop);
    wake();
  }

  /** Asks for one more cycle; wakes that arrive during a cycle fold into one. */
  public void wake() {
    lastWake = System.nanoTime();
    worker.wake();
  }

  /**
   * When the steps of a cycle that claimed builds happened, on {@link System#nanoTime}'s clock: the
   * last wake before it (a notification heard, for one), its start on the dispatch thread, a pooled
   * connection in hand (on the client's event loop), the answer to the transaction's BEGIN (sent
   * with the rest), the claim's rows arriving (its COMMIT, sent with it, not yet answered), and the
   * commit's answer. What the benchmark breaks dispatch latency down with.
   */
  public record CycleTimes(
      long wokenAt,
      long startedAt,
      long connectedAt,
      long begunAt,
      long answeredAt,
      long committedAt,
      List<Long> ids) {}

  /** Hears the times of every cycle that claimed builds, on the dispatch thread (keep it quick). */
  public void onCycle(Consumer<CycleTimes> observer) {
    cycleTimes = observer;
  }

  /**
   * Who to tell, on the dispatch thread, that a cycle claimed builds (what holds a slot changed:
   * warm capacity counts from it). Keep it quick.
   */
  public void onClaimed(Runnable listener) {
    claimedListener = listener;
  }

  private volatile Runnable claimedListener = () -> {};

  /**
   * For tests: runs on the dispatch thread after a claim committed and before its builds are
   * registered as launching here, with their ids.
   */
  public void onClaimCommitted(Consumer<List<Long>> hook) {
    claimCommitted = hook;
  }

  /**
   * Waits until every claim sent before this call has its builds registered as launching here, or
   * failed: after it, {@link #launching} knows every build that a read of the queue made before the
   * call saw claimed by this replica. False when {@code max} passed first (the database is slow to
   * answer a claim): the caller must then not act on builds it found launching.
   */
  public boolean awaitClaimsSentBefore(Duration max) throws InterruptedException {
    long deadline = System.nanoTime() + max.toNanos();
    synchronized (claims) {
      long sent = claimsSent;
      claimWaiters++;
      try {
        while (claimsSettled < sent) {
          long remaining = deadline - System.nanoTime();
          if (remaining <= 0) {
            return false;
          }
          TimeUnit.NANOSECONDS.timedWait(claims, remaining);
        }
        return true;
      } finally {
        claimWaiters--;
      }
    }
  }

  /** Threads in {@link #awaitClaimsSentBefore} now (for tests). */
  public int claimWaiters() {
    synchronized (claims) {
      return claimWaiters;
    }
  }

  /** Launches the rescuer asked for again (its builds' launches were lost), so far. */
  public long relaunches() {
    return relaunches.get();
  }

  /** Cycles run so far (for tests and diagnostics). */
  public long cycles() {
    return cycles.get();
  }

  /** Cycles the poll tick started (rather than a wake). */
  public long polls() {
    return polls.get();
  }

  /** Polls that claimed builds: work no notification had announced in time. */
  public long pollsWithWork() {
    return pollsWithWork.get();
  }

  /** Whether a launch of this build is under way here; the rescuer leaves such builds alone. */
  public boolean launching(long buildId) {
    return inFlight.contains(buildId);
  }

  private void loop() {
    long poll = config.dispatch().pollInterval().toMillis();
    while (worker.running()) {
      try {
        boolean woken = worker.await(jitter(poll));
        if (!worker.running()) {
          break;
        }
        int claimed = cycle();
        if (!woken) {
          polls.incrementAndGet();
          if (claimed > 0) {
            pollsWithWork.incrementAndGet();
          }
        }
      } catch (InterruptedException e) {
        break;
      } catch (RuntimeException e) {
        log.warn("Dispatch cycle failed: {}. Will keep running.", describe(e));
        try {
          Thread.sleep(Math.min(poll, 1000));
        } catch (InterruptedException ie) {
          break;
        }
      }
    }
  }

  /** How often the routes' stalls are written again though they did not change. */
  static final Duration STALLS_REWRITTEN = Duration.ofSeconds(30);

  /** The stalls this replica wrote last, under which leadership, and when. */
  private Map<String, String> stallsWritten;

  private LeaderFence stallsFence;
  private long stallsWrittenAt;

  /**
   * Writes which routes are stalled, as the launcher sees their clusters, before the claim that
   * must skip them: when they changed, when this replica began to lead, and every {@link
   * #STALLS_REWRITTEN} (a deposed leader's late write does not last). A write that fails is tried
   * on the next cycle; the claim goes on.
   */
  private void writeStalls(LeaderFence leading) {
    Map<String, String> now = launcher.stalledRoutes();
    long t = System.nanoTime();
    if (now.equals(stallsWritten)
        && leading.equals(stallsFence)
        && t - stallsWrittenAt < STALLS_REWRITTEN.toNanos()) {
      return;
    }
    try {
      Database.await(
          store
              .routeMirror()
              .stalls(config.routes().stream().map(OneshotConfig.Route::name).toList(), now));
    } catch (RuntimeException e) {
      log.warn("Cannot write which routes are stalled: {}. Will try again.", describe(e));
      return;
    }
    if (!now.equals(stallsWritten == null ? Map.of() : stallsWritten)) {
      now.forEach(
          (route, why) -> {
            if (stallsWritten == null || !why.equals(stallsWritten.get(route))) {
              log.warn("Route {}: its builds are not claimed until it can launch: {}.", route, why);
            }
          });
      if (stallsWritten != null) {
        stallsWritten.keySet().stream()
            .filter(route -> !now.containsKey(route))
            .forEach(route -> log.info("Route {}: its builds are claimed again.", route));
      }
    }
    stallsWritten = Map.copyOf(now);
    stallsFence = leading;
    stallsWrittenAt = t;
  }

  /** The poll's wait: {@code ms} give or take a fifth, at random. */
  static long jitter(long ms) {
    return Math.max(1, (long) (ms * (0.8 + 0.4 * ThreadLocalRandom.current().nextDouble())));
  }

  /**
   * One cycle: claims up to the free capacity of every route (within the global limit and the
   * workspace rule), commits, then hands each claimed build to a launch. Returns how many it
   * claimed. Public so that tests can drive the loop one step at a time.
   */
  public int cycle() {
    LeaderFence leading = fence.get();
    if (leading == null) {
      return 0;
    }
    writeStalls(leading);
    long startedAt = System.nanoTime();
    long wokenAt = lastWake;
    // When the claim's connection came, its BEGIN was answered, its rows arrived.
    long[] at = new long[3];
    int batch = Math.min(config.dispatch().claimBatch(), config.dispatch().maxConcurrent());
    List<ClaimToken> tokens = takeTokens(batch);
    List<Claimed> claimed;
    List<Long> ids;
    long claim;
    synchronized (claims) {
      claim = ++claimsSent;
    }
    try {
      claimed =
          Database.await(
              store
                  .queue()
                  .claim(
                      config.dispatch().maxConcurrent(),
                      launcher.kind(),
                      tokens,
                      leading,
                      new ClaimSteps() {
                        @Override
                        public void connected() {
                          at[0] = System.nanoTime();
                        }

                        @Override
                        public void begun() {
                          at[1] = System.nanoTime();
                        }

                        @Override
                        public void answered(List<Claimed> c) {
                          at[2] = System.nanoTime();
                        }
                      }));
      ids = claimed.stream().map(Claimed::id).toList();
      Consumer<List<Long>> hook = claimCommitted;
      if (hook != null && !ids.isEmpty()) {
        hook.accept(ids);
      }
      // The rescuer, having read these builds claimed, waits for this before it looks at them:
      // it never takes them for builds whose launch was lost.
      inFlight.addAll(ids);
    } catch (FencedOutException e) {
      returnUnused(tokens, List.of());
      if (!fencedOut) {
        fencedOut = true;
        log.warn(
            "Claimed nothing: {}. Claims wait until this replica leads again.", e.getMessage());
      }
      return 0;
    } finally {
      synchronized (claims) {
        claimsSettled = claim;
        claims.notifyAll();
      }
      cycles.incrementAndGet();
    }
    fencedOut = false;
    long claimedAt = System.nanoTime();
    Consumer<CycleTimes> observer = cycleTimes;
    if (observer != null && !claimed.isEmpty()) {
      observer.accept(new CycleTimes(wokenAt, startedAt, at[0], at[1], at[2], claimedAt, ids));
    }
    if (!claimed.isEmpty()) {
      FaultPoint.AFTER_CLAIM.reach();
      claimedListener.run();
    }
    returnUnused(tokens, claimed);
    for (Claimed c : claimed) {
      if (c.attempt() == 1) {
        metrics.claimed(c.route(), c.waitSeconds());
      }
      Optional<OneshotConfig.Route> route = config.route(c.route());
      if (route.isEmpty()) {
        launches.execute(() -> unknownRoute(c.id(), c.attempt(), c.route()));
        continue;
      }
      Attempt a =
          new Attempt(c.id(), c.attempt(), c.launchName(), route.get(), c.token(), apiUrl, c.pod());
      Launch l = new Launch(a, leading, claimedAt + route.get().launchTimeout().toNanos());
      launches.execute(() -> tryLaunch(l, false));
    }
    refillTokens(batch);
    if (claimed.size() == batch) {
      wake();
    }
    return claimed.size();
  }

  /**
   * Launches a claimed build again with a fresh token, after the dispatcher that claimed it stopped
   * before its launch was recorded and the launcher has no such attempt. What is left of its {@code
   * launchTimeout} (counted from its claim) still bounds its tries; a build whose route is no
   * longer configured fails, as an unroutable one does.
   */
  public void relaunch(
      long buildId, int attempt, String routeName, String launchName, long claimedAgoMs) {
    LeaderFence leading = fence.get();
    if (leading == null || !inFlight.add(buildId)) {
      return;
    }
    relaunches.incrementAndGet();
    Optional<OneshotConfig.Route> route = config.route(routeName);
    if (route.isEmpty()) {
      launches.execute(() -> unknownRoute(buildId, attempt, routeName));
      return;
    }
    long deadline =
        System.nanoTime() + (route.get().launchTimeout().toMillis() - claimedAgoMs) * 1_000_000;
    launches.execute(
        () -> {
          BuildToken token = BuildToken.generate();
          String pod;
          try {
            pod = Database.await(store.attempts().podSettings(buildId));
            boolean current =
                Database.await(
                        store
                            .attempts()
                            .launchTry(
                                buildId, attempt, "launching " + launchName + " again", leading))
                    && Database.await(store.attempts().retoken(buildId, attempt, token));
            if (!current) {
              inFlight.remove(buildId);
              return;
            }
          } catch (RuntimeException e) {
            inFlight.remove(buildId);
            log.warn(
                "Build {} (route {}, attempt {}): cannot renew its token to launch again: {}.",
                buildId,
                route.get().name(),
                attempt,
                describe(e));
            return;
          }
          log.info(
              "Build {} (route {}, attempt {}): launching {} again; its launch was never recorded.",
              buildId,
              route.get().name(),
              attempt,
              launchName);
          Attempt a = new Attempt(buildId, attempt, launchName, route.get(), token, apiUrl, pod);
          tryLaunch(new Launch(a, leading, deadline), false);
        });
  }

  /**
   * One claimed attempt on its way to a launch: the leadership it was claimed (or adopted) under,
   * the end of its {@code launchTimeout} on this JVM's clock, and the tries so far.
   */
  private static final class Launch {
    final Attempt a;
    final LeaderFence fence;
    final long deadlineNanos;
    int tries;
    volatile ScheduledFuture<?> next;

    /** {@link #answeredAgain} as it was when this launch's latest try began. */
    long answeredAgainBefore;

    Launch(Attempt a, LeaderFence fence, long deadlineNanos) {
      this.a = a;
      this.fence = fence;
      this.deadlineNanos = deadlineNanos;
    }

    long id() {
      return a.buildId();
    }

    long leftMs() {
      return (deadlineNanos - System.nanoTime()) / 1_000_000;
    }
  }

  /**
   * Tries to launch: records a launch, fails the build for a refusal that cannot pass, and for one
   * that can, waits and tries again until the route's {@code launchTimeout} (counted from the
   * claim) is spent, then requeues the build as a lost attempt (or fails it on its last). With
   * {@code check} (every try after the first), it tries only while the attempt is still current and
   * this replica still holds the leadership it claimed under: a deposed leader stops before its
   * successor can launch.
   */
  private void tryLaunch(Launch l, boolean check) {
    Attempt a = l.a;
    try {
      if (check && !mayTry(l)) {
        inFlight.remove(a.buildId());
        return;
      }
    } catch (RuntimeException e) {
      // The database did not answer: the rescuer relaunches it if nobody else does.
      inFlight.remove(a.buildId());
      log.warn("Build {}: cannot check its launch before trying it: {}.", a.buildId(), describe(e));
      return;
    }
    long started = System.nanoTime();
    LaunchOutcome outcome;
    l.answeredAgainBefore = answeredAgain.get();
    launchSlots.acquireUninterruptibly();
    try {
      outcome = launcher.launch(a);
    } catch (RuntimeException e) {
      outcome = new LaunchOutcome.RetryLater(backoff(l.tries), describe(e));
    } finally {
      launchSlots.release();
    }
    boolean done = true;
    try {
      switch (outcome) {
        case LaunchOutcome.Launched x -> {
          FaultPoint.AFTER_LAUNCH.reach();
          done = false;
          record(a, x.namespace(), "launched " + x.detail(), started);
        }
        case LaunchOutcome.AlreadyLaunched x -> {
          done = false;
          record(a, x.namespace(), "already launched: " + x.detail(), started);
        }
        case LaunchOutcome.Rejected r -> {
          log.warn(
              "Build {} (route {}, attempt {}): launch of {} rejected: {}.",
              a.buildId(),
              a.route().name(),
              a.attempt(),
              a.name(),
              r.reason());
          fail(a.buildId(), a.attempt(), a.route().name(), "launch rejected: " + r.reason());
        }
        case LaunchOutcome.RetryLater r -> done = !retryLater(l, r);
      }
    } catch (RuntimeException e) {
      log.warn(
          "Build {}: cannot record the launch of {}: {}. The rescuer will look at it again.",
          a.buildId(),
          a.name(),
          describe(e));
    } finally {
      if (done) {
        inFlight.remove(a.buildId());
      }
    }
  }

  /** Whether a launch may be tried now: this replica leads as it did, the attempt is current. */
  private boolean mayTry(Launch l) {
    LeaderFence now = fence.get();
    if (now == null || !now.equals(l.fence)) {
      log.info(
          "Build {} (attempt {}): its launch is not tried again; this replica no longer leads as it"
              + " did when it claimed the build.",
          l.id(),
          l.a.attempt());
      return false;
    }
    return Database.await(
        store
            .attempts()
            .launchTry(
                l.id(),
                l.a.attempt(),
                "launching " + l.a.name() + " (try " + (l.tries + 1) + ")",
                l.fence));
  }

  /**
   * After a refusal that may pass: waits and tries again, at most until the launch timeout, or
   * gives up. True when a try is scheduled (the build stays in flight).
   */
  private boolean retryLater(Launch l, LaunchOutcome.RetryLater r) {
    Attempt a = l.a;
    long left = leftMs(l);
    if (left <= 0) {
      giveUp(l, r.reason());
      return false;
    }
    Duration delay = r.delay() == null ? backoff(l.tries) : r.delay();
    delay = Duration.ofMillis(Math.min(delay.toMillis(), left));
    String reason = r.reason() + "; try " + (l.tries + 2) + " in " + Units.format(roundUp(delay));
    if (!Database.await(store.attempts().launchWaits(a.buildId(), a.attempt(), reason))) {
      return false; // no longer current: canceled, or launched after all
    }
    log.warn(
        "Build {} (route {}, attempt {}): launch of {} will be tried again in {} ms: {}.",
        a.buildId(),
        a.route().name(),
        a.attempt(),
        a.name(),
        delay.toMillis(),
        r.reason());
    if (l.tries == 0) {
      store
          .attempts()
          .systemLog(
              a.buildId(),
              a.attempt(),
              "warn",
              "launch of "
                  + a.name()
                  + " failed and will be retried for up to "
                  + Units.format(a.route().launchTimeout())
                  + " from its claim: "
                  + r.reason())
          .onFailure(
              e -> log.debug("Build {}: cannot write log line: {}", a.buildId(), e.toString()));
    }
    l.tries++;
    waiting.put(l.id(), l);
    l.next =
        retries.schedule(
            () -> {
              if (waiting.remove(l.id(), l)) {
                launches.execute(() -> tryLaunch(l, true));
              }
            },
            delay.toMillis(),
            TimeUnit.MILLISECONDS);
    if (answeredAgain.get() != l.answeredAgainBefore) {
      retryNow(l); // the platform answered again while this try was under way
    }
    return true;
  }

  /** The longest a launch waits between tries while its cluster is in trouble. */
  static final Duration TROUBLED_RETRY = Duration.ofSeconds(30);

  /**
   * How long a launch may still be tried: the route's launch timeout from its claim, or from its
   * cluster's latest return, whichever is later; and while its cluster is in trouble, it does not
   * run out (the cluster's return tries it at once). A cluster down for longer than a launch
   * timeout costs its builds no attempt.
   */
  private long leftMs(Launch l) {
    long left = l.leftMs();
    Optional<ClusterState> c = launcher.cluster(l.a.route().cluster());
    if (c.isEmpty()) {
      return left;
    }
    if (!c.get().fine()) {
      return Math.max(left, TROUBLED_RETRY.toMillis());
    }
    long sinceFine = Duration.between(c.get().since(), java.time.Instant.now()).toMillis();
    return Math.max(left, l.a.route().launchTimeout().toMillis() - sinceFine);
  }

  /** Whole seconds for a reason ("try 4 in 30s"); a delay under one second as it is. */
  private static Duration roundUp(Duration d) {
    return d.toMillis() < 1000 ? d : Duration.ofSeconds((d.toMillis() + 999) / 1000);
  }

  /**
   * Launches waiting for their next try are tried now: the platform answers again, so their backoff
   * would only delay them.
   */
  private void retryWaitingNow() {
    answeredAgain.incrementAndGet();
    for (Launch l : waiting.values()) {
      retryNow(l);
    }
  }

  /** Tries a waiting launch now instead of at its scheduled time (unless another took it). */
  private void retryNow(Launch l) {
    if (waiting.remove(l.id(), l)) {
      ScheduledFuture<?> f = l.next;
      if (f != null) {
        f.cancel(false);
      }
      launches.execute(() -> tryLaunch(l, true));
    }
  }

  /**
   * The launch timeout is spent: the attempt is lost, as one that never acquired would be, and the
   * build is requeued (or failed, on its route's last attempt).
   */
  private void giveUp(Launch l, String lastReason) {
    Attempt a = l.a;
    LeaderFence now = fence.get();
    if (now == null || !now.equals(l.fence)) {
      return; // the leader that replaced this one decides
    }
    String why =
        "not launched within the launch timeout of "
            + Units.format(a.route().launchTimeout())
            + " ("
            + (l.tries + 1)
            + (l.tries == 0 ? " try" : " tries")
            + "): "
            + lastReason;
    Requeues.requeue(
        store,
        metrics,
        a.buildId(),
        a.attempt(),
        a.route().name(),
        BuildState.LAUNCHING,
        why,
        Metrics.Requeue.LAUNCH_TIMEOUT);
  }

  /**
   * Records the launch without holding the launch's thread: the thread ends here, and the record's
   * answer (the log line, the metric, the build leaving {@link #inFlight}) comes on the database
   * client's thread when the group commit that took it commits. A launch thread that waited for it
   * parked with a timeout and was woken again, two hand-overs between threads a launch that the
   * drain paid in the JVM's CPU. A record that has no answer within {@link Database#AWAIT_TIMEOUT}
   * is given up as a failed one (the rescuer looks at the build again); {@link #close} waits for
   * the records under way.
   */
  private void record(Attempt a, String namespace, String detail, long startedNanos) {
    synchronized (recording) {
      recording[0]++;
    }
    AtomicBoolean answered = new AtomicBoolean();
    Consumer<AsyncResult<Optional<Double>>> answer =
        ar -> {
          if (!answered.compareAndSet(false, true)) {
            return;
          }
          try {
            if (ar.succeeded()) {
              recorded(a, detail, ar.result(), startedNanos);
            } else {
              log.warn(
                  "Build {}: cannot record the launch of {}: {}. The rescuer will look at it again.",
                  a.buildId(),
                  a.name(),
                  describe(ar.cause()));
            }
          } finally {
            inFlight.remove(a.buildId());
            synchronized (recording) {
              if (--recording[0] == 0) {
                recording.notifyAll();
              }
            }
          }
        };
    Future<Optional<Double>> f;
    try {
      f =
          recorder.record(
              new AttemptStore.Launch(
                  a.buildId(), a.attempt(), launcher.kind(), a.name(), namespace, detail));
    } catch (RuntimeException e) {
      f = Future.failedFuture(e);
    }
    f.onComplete(answer::accept);
    if (!answered.get()) {
      ScheduledFuture<?> timeout =
          recordTimer.schedule(
              () -> answer.accept(Future.failedFuture(Database.noAnswer(Database.AWAIT_TIMEOUT))),
              Database.AWAIT_TIMEOUT.toMillis(),
              TimeUnit.MILLISECONDS);
      f.onComplete(ar -> timeout.cancel(false));
    }
  }

  private void recorded(Attempt a, String detail, Optional<Double> dispatch, long startedNanos) {
    long ms = (System.nanoTime() - startedNanos) / 1_000_000;
    if (dispatch.isPresent()) {
      if (a.attempt() == 1) {
        metrics.launched(a.route().name(), dispatch.get());
      }
      log.info(
          "Build {} (route {}, attempt {}): {} ({}, {} ms).",
          a.buildId(),
          a.route().name(),
          a.attempt(),
          detail,
          a.name(),
          ms);
    } else {
      log.info(
          "Build {} (route {}, attempt {}): {} but the attempt is no longer current; the rescuer"
              + " will remove it.",
          a.buildId(),
          a.route().name(),
          a.attempt(),
          detail);
    }
  }

  private void unknownRoute(long id, int attempt, String route) {
    try {
      fail(id, attempt, route, "route " + route + " is not in this dispatcher's configuration");
    } catch (RuntimeException e) {
      log.warn(
          "Build {} (route {}, attempt {}): cannot fail it for its unknown route: {}.",
          id,
          route,
          attempt,
          describe(e));
    } finally {
      inFlight.remove(id);
    }
  }

  /** Fails a launching build, saying why in its reason and log. */
  private void fail(long id, int attempt, String route, String why) {
    Database.await(
            store.attempts().finish(id, attempt, BuildState.LAUNCHING, BuildState.FAILED, why))
        .ifPresent(e -> metrics.finished(e.route(), "failed", e.ranSeconds()));
  }

  /** The wait before launch try {@code tries + 1}: {@code dispatch.launchRetry}. */
  private Duration backoff(int tries) {
    return config.dispatch().launchRetry().delay(tries);
  }

  /**
   * The tokens a claim sends: the kept ones (their hashes made), topped up with new ones when a
   * cycle ended before {@link #refillTokens} (the first, or one whose claim failed).
   */
  private synchronized List<ClaimToken> takeTokens(int n) {
    refillTokens(n);
    List<ClaimToken> out = new ArrayList<>(n);
    while (out.size() < n) {
      out.add(spareTokens.pop());
    }
    return out;
  }

  /** Tokens no claim used were never stored anywhere; they serve the next cycle. */
  private synchronized void returnUnused(List<ClaimToken> tokens, List<Claimed> claimed) {
    Set<BuildToken> used = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
    claimed.forEach(c -> used.add(c.token()));
    for (ClaimToken t : tokens) {
      if (!used.contains(t.token())) {
        spareTokens.push(t);
      }
    }
  }

  /**
   * Makes new tokens for those a claim used, once its builds are handed to their launches: the next
   * claim then finds a whole batch kept and does not wait for new randomness and hashes.
   */
  private synchronized void refillTokens(int n) {
    while (spareTokens.size() < n) {
      spareTokens.push(ClaimToken.of(BuildToken.generate()));
    }
  }

  static String describe(Throwable e) {
    String msg = e.getMessage();
    return msg == null ? e.getClass().getSimpleName() : msg;
  }

  @Override
  public void close() {
    worker.close();
    retries.shutdownNow();
    launches.shutdown();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    try {
      if (!launches.awaitTermination(deadline - System.nanoTime(), TimeUnit.NANOSECONDS)) {
        log.warn(
            "Launches still running after 30 s; leaving them to the rescuer of the next start.");
      }
      synchronized (recording) {
        long left;
        while (recording[0] > 0 && (left = deadline - System.nanoTime()) > 0) {
          TimeUnit.NANOSECONDS.timedWait(recording, left);
        }
        if (recording[0] > 0) {
          log.warn(
              "{} launch records still under way after 30 s; leaving them to the rescuer of the"
                  + " next start.",
              recording[0]);
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    recordTimer.shutdownNow();
  }
}
