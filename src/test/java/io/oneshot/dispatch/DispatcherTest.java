package io.oneshot.dispatch;

import static io.oneshot.testing.TestServer.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.oneshot.launch.LaunchOutcome;
import io.oneshot.testing.RecordingLauncher;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TcpProxy;
import io.oneshot.testing.TestServer;
import java.sql.Connection;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Wakes, the poll backstop, the listener's reconnects, and what the claim loop does with them. */
class DispatcherTest {
  /**
   * pg_locks shows every database's locks: without this, a test here would end the leader session
   * of another test database on the same server (another JVM's test, run beside this one).
   */
  private static final String THIS_DATABASE =
      " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())";

  private static final String SCRIPT = "{\"provisioner\": \"script\", \"command\": [\"true\"]}";

  /** With this poll, nothing but a notification or a reconnect wakes the dispatcher. */
  private static final String NO_POLL =
      "pollInterval: 1h, rescueInterval: 1h, heartbeatInterval: 200ms, listenerHealthInterval: 500ms";

  private TestServer t;
  private TcpProxy proxy;

  @AfterEach
  void tearDown() {
    if (t != null) {
      t.close();
    }
    if (proxy != null) {
      proxy.close();
    }
  }

  private static long enqueueDirectly() {
    return ((Number) Sql.value("SELECT id FROM oneshot.enqueue('{}', ?::jsonb)", SCRIPT))
        .longValue();
  }

  private void awaitLeader() {
    await()
        .atMost(10, TimeUnit.SECONDS)
        .until(() -> t.server.leader() && t.server.listener().listening());
  }

  @Test
  void wakesArrivingTogetherFoldIntoOne() throws Exception {
    Wakeup w = new Wakeup();
    for (int i = 0; i < 10; i++) {
      w.wake();
    }
    assertThat(w.await(0)).isTrue();
    assertThat(w.await(0)).as("ten wakes before one wait are one wake").isFalse();
    assertThat(w.await(20)).as("no wake: the poll timeout").isFalse();
  }

  @Test
  void aNotificationWakesTheDispatcherWithoutAPoll() {
    RecordingLauncher launcher = new RecordingLauncher();
    leadWithoutPolling(launcher, null);
    long id = enqueueDirectly();
    await().atMost(10, TimeUnit.SECONDS).until(() -> launcher.launched.size() == 1);
    assertThat(launcher.last().buildId()).isEqualTo(id);
    await().atMost(5, TimeUnit.SECONDS).until(() -> Sql.launchRecorded(id));
  }

  /**
   * {@code wakeOnNotify: false} (the poll-only baseline): the dispatcher does not even hear of new
   * builds. A notification it does listen for, sent after the enqueue, arrives alone: had it
   * listened for builds, the enqueue's would have come first (one connection delivers in commit
   * order).
   */
  @Test
  void withoutWakeOnNotifyAnEnqueueWakesNothing() {
    RecordingLauncher launcher = new RecordingLauncher();
    t =
        TestServer.with()
            .dispatch(NO_POLL + ", wakeOnNotify: false")
            .routes("routes: [{name: a}]")
            .launcher(launcher)
            .start();
    awaitLeader();
    long before = t.server.listener().notifications();
    long id = enqueueDirectly();
    Sql.exec("NOTIFY oneshot_cancel");
    await().atMost(10, TimeUnit.SECONDS).until(() -> t.server.listener().notifications() > before);
    assertThat(t.server.listener().notifications()).isEqualTo(before + 1);
    // What the poll would do: a wake claims it.
    t.server.dispatcher().wake();
    await().atMost(10, TimeUnit.SECONDS).until(() -> launcher.launched.size() == 1);
    assertThat(launcher.last().buildId()).isEqualTo(id);
  }

  /**
   * The dispatcher makes no more launch calls at once than its launcher takes: each launch here
   * holds until the test lets one go, one at a time, so every launch the bound let through piles
   * up.
   */
  @Test
  void noMoreLaunchesAreUnderWayAtOnceThanTheLauncherTakes() {
    RecordingLauncher launcher = new RecordingLauncher();
    launcher.launchesAtOnce(3);
    java.util.concurrent.atomic.AtomicInteger under =
        new java.util.concurrent.atomic.AtomicInteger();
    java.util.concurrent.atomic.AtomicInteger most =
        new java.util.concurrent.atomic.AtomicInteger();
    java.util.concurrent.Semaphore letGo = new java.util.concurrent.Semaphore(0);
    launcher.answer(
        a -> {
          most.accumulateAndGet(under.incrementAndGet(), Math::max);
          letGo.acquireUninterruptibly();
          under.decrementAndGet();
          return new LaunchOutcome.Launched(null, "recorded");
        });
    leadWithoutPolling(launcher, null);
    Sql.exec("SELECT oneshot.enqueue('{}', ?::jsonb) FROM generate_series(1, 9)", SCRIPT);

    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(
            () -> {
              if (under.get() > 0 && letGo.availablePermits() == 0) {
                letGo.release();
              }
              return launcher.launched.size() == 9;
            });
    assertThat(most).as("launches under way at once").hasValue(3);
  }

  /** The poll is jittered (±20%), so that replicas and restarts do not poll in step. */
  @Test
  void thePollIntervalIsJitteredWithinAFifthEitherWay() {
    long min = Long.MAX_VALUE;
    long max = 0;
    for (int i = 0; i < 2000; i++) {
      long d = Dispatcher.jitter(1000);
      min = Math.min(min, d);
      max = Math.max(max, d);
    }
    assertThat(min).isBetween(800L, 850L);
    assertThat(max).isBetween(1150L, 1200L);
  }

  @Test
  void thePollFindsWorkThatWasNeverNotified() {
    RecordingLauncher launcher = new RecordingLauncher();
    t =
        TestServer.with()
            .dispatch("pollInterval: 100ms, rescueInterval: 1h")
            .routes("routes: [{name: a}]")
            .launcher(launcher)
            .start();
    awaitLeader();
    Sql.exec("ALTER TABLE oneshot.builds DISABLE TRIGGER builds_notify_enqueued");
    try {
      enqueueDirectly();
      await().atMost(10, TimeUnit.SECONDS).until(() -> launcher.launched.size() == 1);
    } finally {
      Sql.exec("ALTER TABLE oneshot.builds ENABLE TRIGGER builds_notify_enqueued");
    }
  }

  /**
   * A leader whose database connections go through {@link #proxy}, with no poll: only the
   * listener's notifications wake it.
   */
  private void leadBehindAProxyWithoutPolling(RecordingLauncher launcher) {
    proxy = TcpProxy.forTestDatabase();
    leadWithoutPolling(launcher, proxy.url());
  }

  /** A leader with no poll (only notifications wake it), on {@code databaseUrl} when not null. */
  private void leadWithoutPolling(RecordingLauncher launcher, String databaseUrl) {
    TestServer.Builder b =
        TestServer.with().dispatch(NO_POLL).routes("routes: [{name: a}]").launcher(launcher);
    t = (databaseUrl == null ? b : b.databaseUrl(databaseUrl)).start();
    awaitLeader();
  }

  @Test
  void aNotificationLostWhileTheListenerWasDownIsPickedUpAfterItReconnects() {
    RecordingLauncher launcher = new RecordingLauncher();
    leadBehindAProxyWithoutPolling(launcher);
    long reconnectsBefore = t.server.listener().reconnects();

    proxy.cut();
    await().atMost(10, TimeUnit.SECONDS).until(() -> !t.server.listener().listening());
    long lost = enqueueDirectly();
    assertThat(status(lost)).isEqualTo("pending");

    proxy.restore();
    await().atMost(20, TimeUnit.SECONDS).until(() -> launcher.launched.size() == 1);
    assertThat(launcher.last().buildId()).isEqualTo(lost);
    assertThat(t.server.listener().reconnects()).isGreaterThan(reconnectsBefore);

    // The listener works again: with no poll, only its notification can wake the dispatcher.
    long next = enqueueDirectly();
    await().atMost(10, TimeUnit.SECONDS).until(() -> launcher.launched.size() == 2);
    assertThat(launcher.last().buildId()).isEqualTo(next);
  }

  @Test
  void theHealthCheckReplacesAConnectionThatStoppedAnswering() {
    RecordingLauncher launcher = new RecordingLauncher();
    leadBehindAProxyWithoutPolling(launcher);
    proxy.freeze();
    await().atMost(10, TimeUnit.SECONDS).until(() -> !t.server.listener().listening());
    long id = enqueueDirectly();
    proxy.restore();
    await().atMost(20, TimeUnit.SECONDS).until(() -> launcher.launched.size() == 1);
    assertThat(launcher.last().buildId()).isEqualTo(id);
  }

  @Test
  void anEnqueueRolledBackWakesNothingAndLeavesNothing() throws Exception {
    RecordingLauncher launcher = new RecordingLauncher();
    leadWithoutPolling(launcher, null);
    long notifications = t.server.listener().notifications();
    try (Connection c = Sql.connect()) {
      c.setAutoCommit(false);
      Sql.rows(c, "SELECT oneshot.enqueue('{}', ?::jsonb)", SCRIPT);
      c.rollback();
      Sql.rows(c, "SELECT pg_notify('oneshot_logs', '0')");
      c.commit();
    }
    // Notifications arrive in commit order: once the sentinel is in, nothing else is coming.
    await()
        .atMost(10, TimeUnit.SECONDS)
        .until(() -> t.server.listener().notifications() > notifications);
    assertThat(t.server.listener().notifications()).isEqualTo(notifications + 1);
    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds")).isZero();
    assertThat(Sql.count("SELECT count(*) FROM oneshot.build_events")).isZero();
    assertThat(launcher.launched).isEmpty();
  }

  /**
   * A launch's thread ends once the launcher has answered, and its record goes on without it
   * (docs/performance.md, its history: "The launch record in a table of its own, without a
   * thread"): stopping the dispatcher waits for the records under way, so a stop between a launch
   * and its record's commit still records it, and the rescuer of the next start has nothing to
   * adopt.
   */
  @Test
  void stoppingWaitsForTheLaunchRecordsUnderWay() throws Exception {
    RecordingLauncher launcher = new RecordingLauncher();
    leadWithoutPolling(launcher, null);
    try (Connection holder = Sql.connect()) {
      // The record's INSERT waits for this lock; the claim and every read go by.
      holder.setAutoCommit(false);
      Sql.rows(holder, "LOCK TABLE oneshot.build_launches IN EXCLUSIVE MODE");
      long id = enqueueDirectly();
      await().atMost(10, TimeUnit.SECONDS).until(() -> launcher.launched.size() == 1);
      await()
          .atMost(10, TimeUnit.SECONDS)
          .until(() -> Sql.ranElsewhere("Launch bookkeeping: records the launches"));
      TestServer stopping = t;
      t = null;
      Thread closer = Thread.ofPlatform().name("test-stop").start(stopping::close);
      await()
          .atMost(10, TimeUnit.SECONDS)
          .until(
              () ->
                  closer.getState() == Thread.State.TIMED_WAITING
                      && java.util.Arrays.stream(closer.getStackTrace())
                          .anyMatch(
                              f ->
                                  f.getClassName().equals(Dispatcher.class.getName())
                                      && f.getMethodName().equals("close")));
      assertThat(Sql.launchRecorded(id)).isFalse();
      holder.rollback();
      closer.join(Duration.ofSeconds(30));
      assertThat(closer.isAlive()).as("the stop ended").isFalse();
      assertThat(Sql.launchRecorded(id)).isTrue();
    }
  }

  @Test
  void aRejectedLaunchFailsTheBuildWithTheLaunchersReason() {
    RecordingLauncher launcher = new RecordingLauncher();
    launcher.answer(a -> new LaunchOutcome.Rejected("Job is invalid: spec.template: bad"));
    t = TestServer.with().routes("routes: [{name: a}]").launcher(launcher).start();
    long id = enqueueDirectly();
    await().atMost(10, TimeUnit.SECONDS).until(() -> status(id).equals("failed"));
    assertThat(Sql.value("SELECT error FROM oneshot.builds WHERE id = ?", id))
        .isEqualTo("launch rejected: Job is invalid: spec.template: bad");
  }

  @Test
  void aLaunchToRetryLaterIsRetriedAndKeepsTheBuildLaunching() {
    RecordingLauncher launcher = new RecordingLauncher();
    AtomicInteger calls = new AtomicInteger();
    launcher.answer(
        a ->
            calls.incrementAndGet() < 3
                ? new LaunchOutcome.RetryLater(Duration.ofMillis(50), "quota exceeded")
                : new LaunchOutcome.Launched(null, "at last"));
    t = TestServer.with().routes("routes: [{name: a}]").launcher(launcher).start();
    long id = enqueueDirectly();
    await().atMost(10, TimeUnit.SECONDS).until(() -> launcher.launched.size() == 1);
    assertThat(calls.get()).isEqualTo(3);
    await().atMost(5, TimeUnit.SECONDS).until(() -> Sql.launchRecorded(id));
    assertThat(status(id)).isEqualTo("launching");
    assertThat(Sql.count("SELECT attempt FROM oneshot.builds WHERE id = ?", id)).isEqualTo(1);
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.build_logs WHERE build_id = ? AND text LIKE"
                    + " '%will be retried for up to 5m from its claim: quota exceeded'",
                id))
        .isEqualTo(1);
  }

  private static String reason(long id) {
    return (String) Sql.value("SELECT reason FROM oneshot.builds WHERE id = ?", id);
  }

  /**
   * Retries of a launch count against the route's launch timeout: while it waits, the reason says
   * why and when it is tried next; at the timeout the attempt is lost (requeued), and after the
   * last attempt the build fails with the launcher's reason.
   */
  @Test
  void aLaunchThatKeepsFailingIsRequeuedAtItsLaunchTimeoutAndFailsAfterItsLastAttempt() {
    RecordingLauncher launcher = new RecordingLauncher();
    AtomicInteger calls = new AtomicInteger();
    launcher.answer(
        a -> {
          calls.incrementAndGet();
          return new LaunchOutcome.RetryLater(Duration.ofMillis(300), "quota exceeded");
        });
    t =
        TestServer.with()
            .dispatch("rescueInterval: 200ms")
            .routes("routes: [{name: a, launchTimeout: 2s, maxAttempts: 2}]")
            .launcher(launcher)
            .start();
    long id = enqueueDirectly();
    await()
        .atMost(10, TimeUnit.SECONDS)
        .until(() -> reason(id).matches("quota exceeded; try [0-9]+ in 300ms"));
    await().atMost(20, TimeUnit.SECONDS).until(() -> status(id).equals("failed"));
    assertThat((String) Sql.value("SELECT error FROM oneshot.builds WHERE id = ?", id))
        .matches(
            "not launched within the launch timeout of 2s \\([0-9]+ tries\\): quota exceeded"
                + " \\(attempt 2 of 2\\)");
    assertThat(Sql.transitions(id))
        .containsExactly(
            "pending>launching", "launching>pending", "pending>launching", "launching>failed");
    int tried = calls.get();
    assertThat(tried).isGreaterThanOrEqualTo(4);
    assertThat(launcher.launched).isEmpty();
    // Given up means given up: the launcher is not called again for it.
    await()
        .during(1, TimeUnit.SECONDS)
        .atMost(3, TimeUnit.SECONDS)
        .until(() -> calls.get() == tried);
  }

  /**
   * A launch into a cluster in trouble is tried past its launch timeout without spending an
   * attempt, and goes through once the cluster is fine.
   */
  @Test
  void aLaunchIntoAClusterInTroubleOutlastsItsLaunchTimeoutAndGoesOnceItIsFine() {
    RecordingLauncher launcher = new RecordingLauncher();
    AtomicInteger calls = new AtomicInteger();
    java.util.concurrent.atomic.AtomicBoolean fine =
        new java.util.concurrent.atomic.AtomicBoolean();
    launcher.clusters(
        new io.oneshot.launch.ClusterState(
            "home",
            null,
            false,
            "cannot reach the Kubernetes API",
            java.time.Instant.now(),
            java.util.List.of("a"),
            java.util.Map.of()));
    launcher.answer(
        a -> {
          calls.incrementAndGet();
          return fine.get()
              ? new LaunchOutcome.Launched(null, "launched")
              : new LaunchOutcome.RetryLater(Duration.ofMillis(200), "cannot reach the API");
        });
    t =
        TestServer.with()
            .dispatch("rescueInterval: 200ms")
            .routes("routes: [{name: a, launchTimeout: 1s, maxAttempts: 1}]")
            .launcher(launcher)
            .start();
    long id = enqueueDirectly();
    // Well past its launch timeout, still tried, still on its first attempt.
    await().atMost(20, TimeUnit.SECONDS).until(() -> calls.get() >= 12);
    assertThat(status(id)).isEqualTo("launching");
    assertThat(Sql.transitions(id)).containsExactly("pending>launching");
    launcher.clusters(
        new io.oneshot.launch.ClusterState(
            "home",
            null,
            true,
            null,
            java.time.Instant.now(),
            java.util.List.of("a"),
            java.util.Map.of()));
    fine.set(true);
    launcher.answersAgain();
    launcher.awaitLaunched(id, 1);
    assertThat(Sql.value("SELECT attempt FROM oneshot.builds WHERE id = ?", id)).isEqualTo(1);
  }

  /** When the platform answers again, a launch waiting for its next try is tried at once. */
  @Test
  void aWaitingLaunchIsTriedAtOnceWhenThePlatformAnswersAgain() {
    RecordingLauncher launcher = new RecordingLauncher();
    launcher.answer(
        a -> new LaunchOutcome.RetryLater(Duration.ofHours(1), "cannot reach the platform"));
    t =
        TestServer.with()
            .routes("routes: [{name: a, launchTimeout: 2h}]")
            .launcher(launcher)
            .start();
    long id = enqueueDirectly();
    await()
        .atMost(10, TimeUnit.SECONDS)
        .until(() -> "cannot reach the platform; try 2 in 1h".equals(reason(id)));
    launcher.answer(a -> new LaunchOutcome.Launched(null, "at last"));
    launcher.answersAgain();
    await().atMost(10, TimeUnit.SECONDS).until(() -> Sql.launchRecorded(id));
    assertThat(launcher.launched).hasSize(1);
  }

  /**
   * The platform answers again while a try is under way, before the launch is among those waiting
   * for their next try: the launch is tried at once all the same, not an hour later.
   */
  @Test
  void aLaunchWhoseTryOverlapsThePlatformsReturnIsTriedAtOnce() {
    RecordingLauncher launcher = new RecordingLauncher();
    AtomicInteger tries = new AtomicInteger();
    launcher.answer(
        a -> {
          if (tries.incrementAndGet() > 1) {
            return new LaunchOutcome.Launched(null, "at last");
          }
          launcher.answersAgain(); // as another call would, while this one is still failing
          return new LaunchOutcome.RetryLater(Duration.ofHours(1), "cannot reach the platform");
        });
    t =
        TestServer.with()
            .routes("routes: [{name: a, launchTimeout: 2h}]")
            .launcher(launcher)
            .start();
    long id = enqueueDirectly();
    await().atMost(10, TimeUnit.SECONDS).until(() -> Sql.launchRecorded(id));
    assertThat(tries.get()).isEqualTo(2);
    assertThat(launcher.launched).hasSize(1);
  }

  /**
   * A leader deposed while one of its launches waits to be tried again stops trying it (the fence
   * is checked before every try); the replica that leads next launches it, with a new token.
   */
  @Test
  void aBuildCanceledWhileItsLaunchWaitsForARetryIsNotLaunchedAgain() {
    AtomicInteger tries = new AtomicInteger();
    RecordingLauncher launcher = new RecordingLauncher();
    launcher.answer(
        a -> {
          tries.incrementAndGet();
          return new LaunchOutcome.RetryLater(Duration.ofSeconds(3), "quota exceeded");
        });
    // A leader check that stalls past its interval on a loaded machine would depose the leader,
    // and the fence, not the attempt check under test, would then stop the try: a long interval
    // keeps the leadership as it was for the few seconds this takes.
    t =
        TestServer.with()
            .dispatch("leaderInterval: 10s")
            .routes("routes: [{name: a, launchTimeout: 1h}]")
            .launcher(launcher)
            .start();
    await().atMost(10, TimeUnit.SECONDS).until(() -> t.server.leader());
    long id = enqueueDirectly();
    // The first try failed and the next is scheduled (its reason says when): none is under way.
    await()
        .atMost(10, TimeUnit.SECONDS)
        .until(
            () ->
                String.valueOf(Sql.value("SELECT reason FROM oneshot.builds WHERE id = ?", id))
                    .contains("try 2 in 3s"));
    assertThat(t.api.post("/api/v1/builds/" + id + "/cancel", "{}").status()).isEqualTo(202);
    assertThat(tries.get()).isEqualTo(1);
    // The scheduled try comes and finds the attempt no longer current: it ends the launch without
    // calling the launcher. Waiting for that end, not for a while, keeps a late try from passing
    // unseen on a loaded machine; a try that did call the launcher ends the launch too (its retry
    // finds the attempt canceled), so the count below tells the two apart.
    await().atMost(20, TimeUnit.SECONDS).until(() -> !t.server.dispatcher().launching(id));
    assertThat(tries.get()).isEqualTo(1);
    assertThat(status(id)).isEqualTo("canceled");
  }

  @Test
  void aDeposedLeaderStopsTryingItsLaunches() throws Exception {
    java.util.List<String> tokensTried = new java.util.concurrent.CopyOnWriteArrayList<>();
    RecordingLauncher first = new RecordingLauncher();
    first.answer(
        a -> {
          tokensTried.add(a.token().value());
          return new LaunchOutcome.RetryLater(Duration.ofMillis(200), "quota exceeded");
        });
    String routes = "routes: [{name: a, launchTimeout: 1h}]";
    String dispatch = "rescueInterval: 200ms, leaderInterval: 300ms";
    t = TestServer.with().dispatch(dispatch).routes(routes).launcher(first).start();
    await().atMost(10, TimeUnit.SECONDS).until(() -> t.server.leader());
    long id = enqueueDirectly();
    await().atMost(10, TimeUnit.SECONDS).until(() -> tokensTried.size() >= 2);
    String claimedWith = tokensTried.get(0);
    RecordingLauncher second = new RecordingLauncher();
    long lockClass = io.oneshot.build.AdvisoryLocks.CLASS;
    long leaderLock = io.oneshot.build.AdvisoryLocks.LEADER;
    try (TestServer other =
            TestServer.with()
                .dispatch(dispatch)
                .routes(routes)
                .launcher(second)
                .keepQueue()
                .start();
        Connection successor = Sql.connect()) {
      // A session queued for the leader lock is granted it the moment the leader's session ends,
      // so no replica leads while the deposed one would go on trying.
      var queued =
          java.util.concurrent.CompletableFuture.runAsync(
              () -> {
                try {
                  Sql.rows(
                      successor, "SELECT pg_advisory_lock(?::int, ?::int)", lockClass, leaderLock);
                } catch (java.sql.SQLException e) {
                  throw new IllegalStateException(e);
                }
              });
      String lockRows =
          "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 2"
              + " AND classid::bigint = ? AND objid::bigint = ? AND granted = ?"
              + THIS_DATABASE;
      await()
          .atMost(10, TimeUnit.SECONDS)
          .until(() -> Sql.count(lockRows, lockClass, leaderLock, false) == 1);
      Sql.exec(
          "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory'"
              + " AND granted AND objsubid = 2 AND classid::bigint = ? AND objid::bigint = ?"
              + THIS_DATABASE,
          lockClass,
          leaderLock);
      assertThat(queued).succeedsWithin(Duration.ofSeconds(10));
      int triedWhenDeposed = tokensTried.size();
      // One try may have passed its check just before the session ended; none after that, though
      // the launch keeps asking to be tried again every 200 ms.
      await()
          .during(2, TimeUnit.SECONDS)
          .atMost(4, TimeUnit.SECONDS)
          .until(
              () ->
                  tokensTried.subList(triedWhenDeposed, tokensTried.size()).stream()
                          .filter(claimedWith::equals)
                          .count()
                      <= 1);
      assertThat(t.server.leader() || other.server.leader()).isFalse();
      // The lock is free again: a replica leads and launches the build under its own claim.
      Sql.rows(successor, "SELECT pg_advisory_unlock(?::int, ?::int)", lockClass, leaderLock);
      await()
          .atMost(10, TimeUnit.SECONDS)
          .until(
              () ->
                  !second.launched.isEmpty()
                      || tokensTried.stream().anyMatch(x -> !x.equals(claimedWith)));
      assertThat(status(id)).isEqualTo("launching");
      assertThat(other.server.leader() || t.server.leader()).isTrue();
    }
  }
}
