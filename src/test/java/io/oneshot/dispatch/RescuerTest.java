package io.oneshot.dispatch;

import static io.oneshot.testing.TestServer.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.oneshot.build.BuildToken;
import io.oneshot.build.Database;
import io.oneshot.build.QueueStore;
import io.oneshot.launch.Attempt;
import io.oneshot.testing.Api;
import io.oneshot.testing.RecordingLauncher;
import io.oneshot.testing.Sql;
import io.oneshot.testing.StoreFixture;
import io.oneshot.testing.TestServer;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The rescuer settles every live build whose attempt is not doing what the queue says. */
class RescuerTest {
  private static final String SCRIPT = "{\"provisioner\": \"script\", \"command\": [\"true\"]}";
  private static final String ROUTES =
      """
      routes:
        - {name: a, maxAttempts: 2}
        - {name: cancels, tags: {c: "yes"}, retryAfterAcquire: true, maxAttempts: 3}
        - {name: retry, tags: {retry: "yes"}, retryAfterAcquire: true, maxAttempts: 2}
      """;

  private TestServer t;
  private final RecordingLauncher launcher = new RecordingLauncher();

  @AfterEach
  void tearDown() {
    if (t != null) {
      t.close();
    }
  }

  private void start() {
    t = TestServer.with().routes(ROUTES).launcher(launcher).start();
  }

  private long enqueue(String tags) {
    return ((Number) Sql.value("SELECT id FROM oneshot.enqueue(?::jsonb, ?::jsonb)", tags, SCRIPT))
        .longValue();
  }

  private Attempt awaitLaunch(long id, int attempt) {
    await()
        .atMost(10, TimeUnit.SECONDS)
        .until(
            () ->
                launcher.launched.stream()
                    .anyMatch(a -> a.buildId() == id && a.attempt() == attempt));
    return launcher.launched.stream()
        .filter(a -> a.buildId() == id && a.attempt() == attempt)
        .findFirst()
        .orElseThrow();
  }

  private Api runner() {
    return new Api(t.api.base(), null);
  }

  private void acquire(Attempt a) {
    Api.Response r = runner().post("/api/v1/runner/acquire", "{}", a.token().value());
    assertThat(r.status()).as(r.text()).isEqualTo(200);
  }

  private static String error(long id) {
    return (String) Sql.value("SELECT error FROM oneshot.builds WHERE id = ?", id);
  }

  private static List<String> systemLog(long id) {
    return Sql.rows(
            "SELECT text FROM oneshot.build_logs WHERE build_id = ? AND stream = 'system' ORDER BY seq",
            id)
        .stream()
        .map(r -> (String) r.get("text"))
        .toList();
  }

  /**
   * A claim commits before its answer reaches the dispatcher, so for a moment its builds are
   * launching in the queue and unknown to the dispatcher: a rescue pass that reads them then waits
   * for the claim to be registered, instead of taking them for builds whose launch was lost and
   * launching them a second time with a new token.
   */
  @Test
  void aBuildClaimedButNotYetRegisteredIsNotLaunchedAgainByTheRescuer() throws Exception {
    // The rescuer's own ticks are left out (a long interval); this test ticks it by hand.
    t =
        TestServer.with()
            .routes(ROUTES)
            .dispatch("pollInterval: 200ms, rescueInterval: 1h, leaderInterval: 10s")
            .launcher(launcher)
            .start();
    await().atMost(10, TimeUnit.SECONDS).until(() -> t.server.leader());
    java.util.concurrent.CountDownLatch committed = new java.util.concurrent.CountDownLatch(1);
    java.util.concurrent.CountDownLatch register = new java.util.concurrent.CountDownLatch(1);
    Dispatcher dispatcher = t.server.dispatcher();
    dispatcher.onClaimCommitted(
        ids -> {
          committed.countDown();
          try {
            register.await();
          } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
          }
        });
    long id = enqueue("{}");
    assertThat(committed.await(10, TimeUnit.SECONDS)).isTrue();
    assertThat(status(id)).isEqualTo("launching");
    assertThat(dispatcher.launching(id)).isFalse();

    java.util.concurrent.CompletableFuture<Void> tick =
        java.util.concurrent.CompletableFuture.runAsync(() -> t.server.rescuer().tick());
    // The pass has read the queue (it waits for the claim) or is done with it.
    await()
        .atMost(10, TimeUnit.SECONDS)
        .until(() -> dispatcher.claimWaiters() > 0 || tick.isDone());
    register.countDown();
    tick.get(10, TimeUnit.SECONDS);

    assertThat(dispatcher.relaunches()).isZero();
    Attempt a = awaitLaunch(id, 1);
    acquire(a);
    assertThat(status(id)).isEqualTo("running");
  }

  @Test
  void anAttemptThatEndsBeforeAcquiringIsRequeuedUntilItsAttemptsRunOut() {
    start();
    long id = enqueue("{}");
    Attempt first = awaitLaunch(id, 1);
    launcher.exit(first.name(), 1);
    Attempt second = awaitLaunch(id, 2);
    assertThat(second.name()).isEqualTo("oneshot-" + id + "-2");
    assertThat(launcher.history)
        .containsSubsequence("launch " + first.name(), "launch " + second.name());
    await()
        .atMost(10, TimeUnit.SECONDS)
        .until(() -> launcher.history.contains("kill " + first.name()));
    // The old attempt's token is dead.
    assertThat(runner().post("/api/v1/runner/acquire", "{}", first.token().value()).status())
        .isEqualTo(401);

    launcher.exit(second.name(), 1);
    await().atMost(10, TimeUnit.SECONDS).until(() -> status(id).equals("failed"));
    assertThat(error(id))
        .isEqualTo(
            "attempt "
                + second.name()
                + " ended before provisionerd acquired the build: exited with code 1 (attempt 2 of 2)");
    assertThat(Sql.transitions(id))
        .containsExactly(
            "pending>launching", "launching>pending", "pending>launching", "launching>failed");
    assertThat(systemLog(id).get(0)).endsWith("; requeued for attempt 2");
    assertThat(finished("a", "failed")).isEqualTo(1.0);
  }

  /** {@code oneshot_builds_total} for a route and outcome, as /metrics reports it. */
  private double finished(String route, String outcome) {
    return io.oneshot.testing.PromText.parse(t.api.get("/metrics").text())
        .sum("oneshot_builds_total", "route", route, "outcome", outcome);
  }

  @Test
  void anAttemptThatDoesNotAcquireWithinTheLaunchTimeoutIsReplaced() {
    start();
    long id = enqueue("{}");
    Attempt first = awaitLaunch(id, 1);
    await().atMost(10, TimeUnit.SECONDS).until(() -> Sql.launchRecorded(id));
    Sql.exec("UPDATE oneshot.builds SET claimed_at = now() - interval '1 hour' WHERE id = ?", id);
    Sql.exec(
        "UPDATE oneshot.build_launches SET launched_at = now() - interval '1 hour'"
            + " WHERE build_id = ?",
        id);
    awaitLaunch(id, 2);
    assertThat(launcher.killed).extracting(r -> r.name()).contains(first.name());
    assertThat(systemLog(id).get(0)).startsWith("provisionerd did not acquire the build within 5m");
  }

  private static io.oneshot.launch.ClusterState home(String trouble, java.time.Instant since) {
    return new io.oneshot.launch.ClusterState(
        "home", null, trouble == null, trouble, since, List.of("a"), java.util.Map.of());
  }

  /**
   * While its cluster is in trouble an attempt is neither requeued nor killed, however long it has
   * been launching; once the cluster is fine, its launch timeout counts from the cluster's return.
   */
  @Test
  void anAttemptInAClusterInTroubleIsLeftAloneAndItsLaunchTimeoutCountsFromTheReturn() {
    start();
    long id = enqueue("{}");
    Attempt first = awaitLaunch(id, 1);
    await().atMost(10, TimeUnit.SECONDS).until(() -> Sql.launchRecorded(id));
    launcher.clusters(
        home("cannot reach the Kubernetes API", java.time.Instant.now().minusSeconds(7200)));
    Sql.exec("UPDATE oneshot.builds SET claimed_at = now() - interval '1 hour' WHERE id = ?", id);
    Sql.exec(
        "UPDATE oneshot.build_launches SET launched_at = now() - interval '1 hour'"
            + " WHERE build_id = ?",
        id);
    t.server.rescuer().tick();
    t.server.rescuer().tick();
    assertThat(status(id)).isEqualTo("launching");
    assertThat(launcher.killed).isEmpty();
    // Fine again a second ago: the 5m launch timeout runs from there.
    launcher.clusters(home(null, java.time.Instant.now().minusSeconds(1)));
    t.server.rescuer().tick();
    assertThat(status(id)).isEqualTo("launching");
    assertThat(launcher.killed).isEmpty();
    // Fine for an hour: past it, the attempt is replaced as any other.
    launcher.clusters(home(null, java.time.Instant.now().minusSeconds(3600)));
    awaitLaunch(id, 2);
    assertThat(launcher.killed).extracting(r -> r.name()).contains(first.name());
  }

  @Test
  void aRunningBuildWhoseHeartbeatStopsFailsAsHung() {
    start();
    long id = enqueue("{}");
    Attempt a = awaitLaunch(id, 1);
    acquire(a);
    assertThat(status(id)).isEqualTo("running");
    Sql.exec(
        "UPDATE oneshot.builds SET heartbeat_at = now() - interval '3 minutes' WHERE id = ?", id);
    await().atMost(10, TimeUnit.SECONDS).until(() -> status(id).equals("failed"));
    assertThat(error(id))
        .startsWith("provisionerd stopped reporting: no heartbeat for 3m")
        .endsWith("(the limit is 2m); its attempt was killed");
    assertThat(launcher.killed).extracting(r -> r.name()).contains(a.name());
    assertThat(systemLog(id)).anyMatch(l -> l.startsWith("provisionerd stopped reporting"));
    assertThat(finished("a", "failed")).isEqualTo(1.0);
    // Its token can no longer act on the build, and its runner's late outcome does not undo the
    // end: the answer tells it the outcome that stands.
    assertThat(runner().post("/api/v1/runner/heartbeat", "{}", a.token().value()).status())
        .isEqualTo(410);
    Api.Response late =
        runner()
            .post(
                "/api/v1/runner/complete",
                "{\"outcome\": \"succeeded\", \"exitCode\": 0}",
                a.token().value());
    assertThat(late.status()).as(late.text()).isEqualTo(200);
    assertThat(late.json().path("status").asText()).isEqualTo("failed");
    assertThat(status(id)).isEqualTo("failed");
    assertThat(error(id)).startsWith("provisionerd stopped reporting");
  }

  @Test
  void theDispatcherEnforcesTheTimeoutWhenProvisionerdDoesNot() {
    start();
    long id = enqueue("{}");
    Attempt a = awaitLaunch(id, 1);
    acquire(a);
    // Route a: timeout 1h, grace 60s; the dispatcher allows 15 s more before it steps in.
    Sql.exec(
        "UPDATE oneshot.builds SET started_at = now() - interval '62 minutes' WHERE id = ?", id);
    await().atMost(10, TimeUnit.SECONDS).until(() -> status(id).equals("failed"));
    assertThat(error(id))
        .isEqualTo(
            "timed out after 1h (enforced by the dispatcher; provisionerd did not stop by itself)");
    assertThat(launcher.killed).extracting(r -> r.name()).contains(a.name());
  }

  @Test
  void theDispatcherCarriesOutACancelThatProvisionerdDidNot() {
    start();
    long id = enqueue("{}");
    Attempt a = awaitLaunch(id, 1);
    acquire(a);
    assertThat(
            t.api
                .post("/api/v1/builds/" + id + "/cancel", "{}")
                .json()
                .path("cancelRequested")
                .asBoolean())
        .isTrue();
    assertThat(status(id)).isEqualTo("running");
    assertThat(
            runner()
                .post("/api/v1/runner/heartbeat", "{}", a.token().value())
                .json()
                .path("cancelRequested")
                .asBoolean())
        .isTrue();
    Sql.exec(
        "UPDATE oneshot.builds SET cancel_requested_at = now() - interval '2 minutes' WHERE id = ?",
        id);
    await().atMost(10, TimeUnit.SECONDS).until(() -> status(id).equals("canceled"));
    assertThat(error(id))
        .isEqualTo(
            "canceled; provisionerd did not stop within the cancel grace of 1m, so its attempt was"
                + " killed");
    assertThat(launcher.killed).extracting(r -> r.name()).contains(a.name());
  }

  /**
   * Makes a running build's last heartbeat {@code seconds} old, as if its runner had gone quiet
   * that long ago.
   */
  private static void quietFor(long id, long seconds) {
    Sql.exec(
        "UPDATE oneshot.builds SET heartbeat_at = clock_timestamp() - make_interval(secs => ?)"
            + " WHERE id = ?",
        (double) seconds,
        id);
  }

  /** The route's lease (30s) + cancel grace (60s) + the rescuer's slack (15s). */
  private static final long FENCED_AFTER_SECONDS = 30 + 60 + 15;

  @Test
  void aRunningBuildWhoseAttemptVanishesFailsOnlyOnceItsRunnerHasSurelyStopped() {
    start();
    long id = enqueue("{}");
    Attempt a = awaitLaunch(id, 1);
    acquire(a);
    launcher.vanish(a.name());
    // A pod on a node that dropped off the network may still be running: until its runner's
    // lease and the cancel grace have passed since its last heartbeat, the build stays running.
    quietFor(id, FENCED_AFTER_SECONDS - 5);
    t.server.rescuer().tick();
    assertThat(status(id)).isEqualTo("running");
    quietFor(id, FENCED_AFTER_SECONDS + 1);
    await().atMost(10, TimeUnit.SECONDS).until(() -> status(id).equals("failed"));
    assertThat(error(id)).isEqualTo("provisionerd ended without reporting an outcome: vanished");
    assertThat(launcher.launched).hasSize(1);
  }

  @Test
  void aScriptBuildOfARouteThatAllowsItIsRequeuedAfterAcquire() {
    start();
    long id = enqueue("{\"retry\": \"yes\"}");
    Attempt a = awaitLaunch(id, 1);
    acquire(a);
    launcher.vanish(a.name());
    quietFor(id, FENCED_AFTER_SECONDS - 5);
    t.server.rescuer().tick();
    assertThat(launcher.launched).as("no second attempt while the first may still run").hasSize(1);
    quietFor(id, FENCED_AFTER_SECONDS + 1);
    awaitLaunch(id, 2);
    assertThat(launcher.history)
        .containsSubsequence("launch " + a.name(), "launch oneshot-" + id + "-2");
  }

  /**
   * {@code retryAfterAcquire} is for scripts: a terraform build that acquired may have applied part
   * of its plan, so a lost attempt fails it, on any route, rather than apply again.
   */
  @Test
  void aTerraformBuildIsNeverRetriedAfterAcquireEvenOnARouteThatRetriesScripts() {
    start();
    long id =
        ((Number)
                Sql.value(
                    "SELECT id FROM oneshot.enqueue(?::jsonb, ?::jsonb)",
                    "{\"retry\": \"yes\"}",
                    "{\"provisioner\": \"terraform\", \"files\": {\"main.tf\": \"\"}}"))
            .longValue();
    Attempt a = awaitLaunch(id, 1);
    acquire(a);
    launcher.vanish(a.name());
    quietFor(id, FENCED_AFTER_SECONDS + 1);
    await().atMost(10, TimeUnit.SECONDS).until(() -> status(id).equals("failed"));
    assertThat(error(id)).isEqualTo("provisionerd ended without reporting an outcome: vanished");
    assertThat(launcher.launched).as("no second apply").hasSize(1);
  }

  @Test
  void aClaimWhoseLaunchWasNeverRecordedIsAdoptedWhenItsAttemptRuns() {
    long id = claimedBeforeTheServerStarts();
    launcher.running("oneshot-" + id + "-1");
    startKeepingQueue();
    await().atMost(10, TimeUnit.SECONDS).until(() -> Sql.launchRecorded(id));
    assertThat(launcher.launched).isEmpty();
    assertThat(
            Sql.value(
                "SELECT reason FROM oneshot.build_events WHERE build_id = ? AND from_status = to_status",
                id))
        .isEqualTo("adopted after a dispatcher restart: found");
  }

  @Test
  void aClaimWhoseLaunchWasNeverRecordedIsLaunchedAgainWithANewToken() {
    BuildToken lost = BuildToken.generate();
    long id = claimedBeforeTheServerStarts(lost);
    startKeepingQueue();
    Attempt a = awaitLaunch(id, 1);
    assertThat(a.token().value()).isNotEqualTo(lost.value());
    assertThat(runner().post("/api/v1/runner/acquire", "{}", lost.value()).status()).isEqualTo(401);
    acquire(a);
  }

  /**
   * Every attempt that ends wakes the rescuer, and each pass reads every live build. Wakes that
   * keep coming (builds ending by the hundred a second) still make passes, at most one a {@link
   * Rescuer#WOKEN_PASS_GAP}: five passes then span at least three gaps (the first may have begun
   * before the wakes did, the second begins after the first ends).
   */
  @Test
  void wakesThatKeepComingMakeAPassAtMostOnceAGap() throws Exception {
    t =
        TestServer.with()
            .routes(ROUTES)
            // Only wakes make passes here.
            .dispatch("pollInterval: 200ms, rescueInterval: 1h, heartbeatInterval: 200ms")
            .launcher(launcher)
            .start();
    AtomicBoolean waking = new AtomicBoolean(true);
    int before = launcher.listings.get();
    long from = System.nanoTime();
    Thread waker =
        Thread.ofPlatform()
            .start(
                () -> {
                  while (waking.get()) {
                    launcher.exit("oneshot-999999-1", 0);
                    Thread.onSpinWait();
                  }
                });
    try {
      await().atMost(10, TimeUnit.SECONDS).until(() -> launcher.listings.get() >= before + 5);
    } finally {
      waking.set(false);
      waker.join();
    }
    long took = System.nanoTime() - from;
    assertThat(Duration.ofNanos(took))
        .isGreaterThanOrEqualTo(Rescuer.WOKEN_PASS_GAP.multipliedBy(3));
  }

  @Test
  void attemptsNoLiveBuildNeedsAreKilled() {
    start();
    long id = enqueue("{}");
    Attempt a = awaitLaunch(id, 1);
    // An attempt nobody needs (found while another build lives) goes, and the live one's stays.
    launcher.running("oneshot-999-1");
    launcher.awaitKilled("oneshot-999-1");
    assertThat(status(id)).isEqualTo("launching");
    assertThat(launcher.killed).extracting(r -> r.name()).doesNotContain(a.name());
    assertThat(t.api.post("/api/v1/builds/" + id + "/cancel", "{}").status()).isEqualTo(202);
    await()
        .atMost(10, TimeUnit.SECONDS)
        .until(
            () ->
                launcher.killed.stream()
                    .map(r -> r.name())
                    .toList()
                    .containsAll(List.of("oneshot-999-1", a.name())));
    assertThat(status(id)).isEqualTo("canceled");
  }

  /**
   * The requeue records itself (transition, log line, metric) before the old attempt is killed: a
   * kill that fails loses none of it, and is tried again on the next tick.
   */
  @Test
  void aRequeueWhoseKillFailsKeepsItsRecordAndIsKilledOnTheNextTick() {
    start();
    long id = enqueue("{}");
    Attempt first = awaitLaunch(id, 1);
    launcher.failKills(1);
    await().atMost(10, TimeUnit.SECONDS).until(() -> Sql.launchRecorded(id));
    Sql.exec("UPDATE oneshot.builds SET claimed_at = now() - interval '1 hour' WHERE id = ?", id);
    Sql.exec(
        "UPDATE oneshot.build_launches SET launched_at = now() - interval '1 hour'"
            + " WHERE build_id = ?",
        id);
    awaitLaunch(id, 2);
    assertThat(launcher.history).contains("failed kill " + first.name());
    assertThat(systemLog(id).get(0))
        .startsWith("provisionerd did not acquire the build within 5m")
        .endsWith("; requeued for attempt 2");
    assertThat(
            io.oneshot.testing.PromText.parse(t.api.get("/metrics").text())
                .value("oneshot_build_requeues_total", "route", "a", "reason", "launch_timeout"))
        .isEqualTo(1.0);
    launcher.awaitKilled(first.name());
  }

  /** An end (here: hung) whose kill fails still ends the build, and the kill is tried again. */
  @Test
  void anEndWhoseKillFailsStillEndsTheBuild() {
    start();
    long id = enqueue("{}");
    Attempt a = awaitLaunch(id, 1);
    acquire(a);
    launcher.failKills(1);
    quietFor(id, 3600);
    await().atMost(10, TimeUnit.SECONDS).until(() -> status(id).equals("failed"));
    assertThat(error(id)).startsWith("provisionerd stopped reporting: no heartbeat for 1h");
    assertThat(systemLog(id)).last().isEqualTo(error(id));
    launcher.awaitKilled(a.name());
    assertThat(launcher.history).containsSubsequence("failed kill " + a.name(), "kill " + a.name());
  }

  /**
   * A cancel asked for while the build runs wins over the death of its attempt: the build ends
   * canceled, on a route that would requeue a lost script as on one that would fail it.
   */
  @Test
  void aCancelRequestedBeforeTheAttemptDiesEndsTheBuildCanceled() {
    start();
    long plain = enqueue("{}");
    long retried = enqueue("{\"c\": \"yes\"}");
    for (long id : List.of(plain, retried)) {
      Attempt a = awaitLaunch(id, 1);
      acquire(a);
      assertThat(t.api.post("/api/v1/builds/" + id + "/cancel", "{}").status()).isEqualTo(202);
      launcher.vanish(a.name());
      quietFor(id, FENCED_AFTER_SECONDS + 1);
    }
    for (long id : List.of(plain, retried)) {
      await().atMost(10, TimeUnit.SECONDS).until(() -> !status(id).equals("running"));
      assertThat(status(id)).as("build " + id).isEqualTo("canceled");
      assertThat(error(id))
          .isEqualTo("canceled; provisionerd ended without reporting an outcome: vanished");
    }
    assertThat(launcher.launched).hasSize(2);
  }

  /**
   * A build claimed by a dispatcher that stopped before launching it, whose route the next
   * configuration no longer has, fails like an unroutable build instead of holding a slot.
   */
  @Test
  void aClaimedBuildWhoseRouteWasRemovedFailsAfterTheRestart() {
    long id;
    try (StoreFixture f = new StoreFixture(ROUTES + "  - {name: gone, tags: {gone: \"yes\"}}\n")) {
      id = Database.await(f.store.queue().enqueue("{\"gone\": \"yes\"}", SCRIPT, 0, null)).id();
      assertThat(Database.await(f.store.queue().claim(10, "recording", StoreFixture.tokens(1))))
          .hasSize(1);
    }
    startKeepingQueue();
    await().atMost(10, TimeUnit.SECONDS).until(() -> status(id).equals("failed"));
    assertThat(error(id)).isEqualTo("route gone is not in this dispatcher's configuration");
    assertThat(systemLog(id)).containsExactly(error(id));
    assertThat(launcher.launched).isEmpty();
  }

  private long claimedBeforeTheServerStarts() {
    return claimedBeforeTheServerStarts(BuildToken.generate());
  }

  /** A build claimed by a dispatcher that stopped before it recorded the launch. */
  private long claimedBeforeTheServerStarts(BuildToken token) {
    try (StoreFixture f = new StoreFixture(ROUTES)) {
      long id = Database.await(f.store.queue().enqueue("{}", SCRIPT, 0, null)).id();
      List<QueueStore.Claimed> c =
          Database.await(f.store.queue().claim(10, "recording", List.of(token)));
      assertThat(c).hasSize(1);
      return id;
    }
  }

  private void startKeepingQueue() {
    t = TestServer.with().routes(ROUTES).launcher(launcher).keepQueue().start();
  }
}
