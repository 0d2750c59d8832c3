package io.oneshot.build;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.oneshot.testing.Sql;
import io.oneshot.testing.StoreFixture;
import io.vertx.core.Future;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The compare-and-set clauses of the build store's transitions, each in the race it is there for:
 * without the clause, the losing side of the race would win.
 */
class TransitionGuardsTest {
  private static final String SCRIPT = "{\"provisioner\": \"script\", \"command\": [\"true\"]}";
  private static final Runner RUNNER = new Runner("runner-guards-1", null, null, "host", 1L);

  private StoreFixture f;

  @AfterEach
  void tearDown() {
    if (f != null) {
      f.close();
    }
  }

  private QueueStore.Claimed enqueueAndClaim() {
    f = f != null ? f : new StoreFixture("routes: [{name: a, maxAttempts: 3}]");
    Database.await(f.store.queue().enqueue("{}", SCRIPT, 0, null));
    return claim();
  }

  /** A build enqueued and claimed, its attempt 1's launch recorded. */
  private QueueStore.Claimed launchedFirstAttempt() {
    QueueStore.Claimed first = enqueueAndClaim();
    assertThat(
            Database.await(
                f.store
                    .attempts()
                    .markLaunched(first.id(), 1, "test", first.launchName(), null, "ok")))
        .isPresent();
    return first;
  }

  private QueueStore.Claimed claim() {
    List<QueueStore.Claimed> c = f.claim(10, 1, "test");
    assertThat(c).hasSize(1);
    return c.get(0);
  }

  private static Map<String, Object> row(long id) {
    return Sql.rows(
            "SELECT b.status, b.attempt, l.launched_at, b.started_at, b.runner_id"
                + " FROM oneshot.builds b LEFT JOIN oneshot.build_launches l"
                + " ON l.build_id = b.id AND l.attempt = b.attempt WHERE b.id = ?",
            id)
        .get(0);
  }

  /**
   * The rescuer's launch-timeout requeue reads the build as launching; provisionerd acquires before
   * the requeue runs. The requeue must lose: the build is running and its script or apply has
   * started.
   */
  @Test
  void aLaunchTimeoutRequeueLosesToAnAcquireThatCameFirst() {
    QueueStore.Claimed c = enqueueAndClaim();
    assertThat(Database.await(f.store.runner().acquire(c.token().hash(), RUNNER)))
        .isInstanceOf(RunnerStore.Acquire.Granted.class);

    assertThat(
            Database.await(
                f.store
                    .attempts()
                    .requeue(c.id(), c.attempt(), BuildState.LAUNCHING, "launch timed out")))
        .isEmpty();
    Map<String, Object> b = row(c.id());
    assertThat(b.get("status")).isEqualTo("running");
    assertThat(b.get("attempt")).isEqualTo(1);
    assertThat(b.get("runner_id")).isEqualTo(RUNNER.id());
  }

  /**
   * A launch confirmed late for attempt 1, after that attempt was requeued and attempt 2 claimed,
   * must not mark attempt 2 launched: attempt 2's launch timeout would then count from the wrong
   * launch, and its Job would be taken for created.
   */
  @Test
  void aLateLaunchRecordOfAnOldAttemptDoesNotMarkTheNewOneLaunched() {
    QueueStore.Claimed first = enqueueAndClaim();
    assertThat(
            Database.await(
                f.store
                    .attempts()
                    .requeue(first.id(), 1, BuildState.LAUNCHING, "launch failed: 503")))
        .contains(BuildState.PENDING);
    QueueStore.Claimed second = claim();
    assertThat(second.attempt()).isEqualTo(2);

    assertThat(
            Database.await(
                f.store
                    .attempts()
                    .markLaunched(first.id(), 1, "test", first.launchName(), null, "late")))
        .isEmpty();
    assertThat(row(first.id()).get("launched_at")).isNull();

    assertThat(
            Database.await(
                f.store
                    .attempts()
                    .markLaunched(second.id(), 2, "test", second.launchName(), null, "ok")))
        .isPresent();
    assertThat(row(first.id()).get("launched_at")).isNotNull();
  }

  /**
   * A requeue decided for attempt 1 (its pod failed) that lands after attempt 2 was claimed must
   * not requeue attempt 2, whose Job is being created.
   */
  @Test
  void aLateRequeueOfAnOldAttemptLeavesTheNewOneAlone() {
    QueueStore.Claimed first = enqueueAndClaim();
    assertThat(
            Database.await(
                f.store.attempts().requeue(first.id(), 1, BuildState.LAUNCHING, "pod failed")))
        .contains(BuildState.PENDING);
    QueueStore.Claimed second = claim();
    assertThat(
            Database.await(
                f.store
                    .attempts()
                    .requeue(first.id(), 1, BuildState.LAUNCHING, "pod failed, told twice")))
        .isEmpty();
    Map<String, Object> b = row(first.id());
    assertThat(b.get("status")).isEqualTo("launching");
    assertThat(b.get("attempt")).isEqualTo(second.attempt());
  }

  /**
   * A claim whose launch was never recorded gets a new token before it is launched again; one whose
   * launch was recorded keeps its token, which its pod may be about to acquire with.
   */
  @Test
  void aLaunchedAttemptKeepsItsToken() {
    QueueStore.Claimed c = enqueueAndClaim();
    assertThat(
            Database.await(
                f.store.attempts().markLaunched(c.id(), 1, "test", c.launchName(), null, "ok")))
        .isPresent();
    assertThat(Database.await(f.store.attempts().retoken(c.id(), 1, BuildToken.generate())))
        .isFalse();
    assertThat(Database.await(f.store.runner().acquire(c.token().hash(), RUNNER)))
        .isInstanceOf(RunnerStore.Acquire.Granted.class);
  }

  /**
   * "Launched yet?" is asked of the attempt, not of the build: once attempt 1's launch is recorded,
   * a launch of it is neither tried again nor said to wait, and its token stays; attempt 2, claimed
   * after attempt 1 was launched and requeued, is launched as if nothing had been (its launch
   * tried, its waits told, a new token given when the first is lost), and so is another build's
   * attempt 1.
   */
  @Test
  void onlyTheLaunchedAttemptCountsAsLaunched() {
    long id = launchedFirstAttempt().id();
    assertThat(Database.await(f.store.attempts().launchTry(id, 1, "launch tried again", null)))
        .isFalse();
    assertThat(Database.await(f.store.attempts().launchWaits(id, 1, "launch waits"))).isFalse();
    assertThat(Sql.value("SELECT reason FROM oneshot.builds WHERE id = ?", id))
        .isEqualTo("claimed by the dispatcher");
    // Another build's attempt 1, not launched: the first build's record is not its own.
    Database.await(f.store.queue().enqueue("{}", SCRIPT, 0, null));
    QueueStore.Claimed other = claim();
    assertThat(other.attempt()).isEqualTo(1);
    assertThat(Database.await(f.store.attempts().launchWaits(other.id(), 1, "launch waits")))
        .isTrue();
    assertThat(
            Database.await(f.store.attempts().launchTry(other.id(), 1, "launch tried again", null)))
        .isTrue();
    assertThat(Database.await(f.store.attempts().retoken(other.id(), 1, BuildToken.generate())))
        .isTrue();

    assertThat(
            Database.await(f.store.attempts().requeue(id, 1, BuildState.LAUNCHING, "pod vanished")))
        .contains(BuildState.PENDING);
    QueueStore.Claimed second = claim();
    assertThat(second.attempt()).isEqualTo(2);
    assertThat(row(id).get("launched_at")).isNull();
    assertThat(Database.await(f.store.attempts().launchWaits(id, 2, "launch waits"))).isTrue();
    assertThat(Database.await(f.store.attempts().launchTry(id, 2, "launch tried again", null)))
        .isTrue();
    assertThat(Database.await(f.store.attempts().retoken(id, 2, BuildToken.generate()))).isTrue();
  }

  /**
   * A launch whose build's row another transaction holds FOR UPDATE (a cancel, a requeue) is tried
   * again until the row is free, then recorded, even when an earlier attempt of the build was
   * recorded; a launch of a build that has ended is told at once that its attempt is over.
   */
  @Test
  void aHeldLaunchIsRecordedOnceFreeAndOneOfAnEndedBuildIsToldItIsOver() throws Exception {
    long id = launchedFirstAttempt().id();
    assertThat(
            Database.await(f.store.attempts().requeue(id, 1, BuildState.LAUNCHING, "pod vanished")))
        .contains(BuildState.PENDING);
    QueueStore.Claimed second = claim();
    Future<Optional<Double>> record;
    try (Connection holder = Sql.connect()) {
      holder.setAutoCommit(false);
      try (PreparedStatement st =
          holder.prepareStatement("SELECT 1 FROM oneshot.builds WHERE id = ? FOR UPDATE")) {
        st.setLong(1, id);
        st.executeQuery().close();
      }
      record =
          f.store.attempts().markLaunched(id, 2, "test", second.launchName(), null, "launched");
      // Tried while the row is held: the statement ran at least once and found it held.
      await()
          .atMost(10, TimeUnit.SECONDS)
          .until(() -> record.isComplete() || Sql.ranElsewhere("Launch bookkeeping"));
      assertThat(record.isComplete()).as("answered while its row is held").isFalse();
      holder.commit();
    }
    assertThat(Database.await(record)).as("recorded once free").isPresent();
    assertThat(Sql.launchRecorded(id)).isTrue();

    Database.await(f.store.queue().enqueue("{}", SCRIPT, 0, null));
    QueueStore.Claimed ended = claim();
    Sql.exec(
        "UPDATE oneshot.builds SET status = 'failed', finished_at = now(), error = 'gone'"
            + " WHERE id = ?",
        ended.id());
    AttemptStore.Marked late =
        Database.await(
            f.store
                .attempts()
                .markLaunched(
                    List.of(
                        new AttemptStore.Launch(
                            ended.id(), 1, "test", ended.launchName(), null, "late"))));
    assertThat(late.recorded()).isEmpty();
    assertThat(late.held()).as("not to be tried again").isEmpty();
  }

  /** Builds queued for a route the configuration no longer has fail at once, saying why. */
  @Test
  void queuedBuildsOfARemovedRouteFailInsteadOfWaitingForever() {
    f = new StoreFixture("routes: [{name: a}, {name: gone, tags: {old: \"yes\"}}]");
    long orphan =
        Database.await(f.store.queue().enqueue("{\"old\": \"yes\"}", SCRIPT, 0, null)).id();
    long kept = Database.await(f.store.queue().enqueue("{}", SCRIPT, 0, null)).id();

    StoreFixture narrower = new StoreFixture("routes: [{name: a}]", false);
    try {
      List<String> failed =
          Database.await(
              narrower
                  .store
                  .routeMirror()
                  .write(narrower.config.routes(), narrower.config.limits()));
      assertThat(failed).containsExactly("gone");
    } finally {
      narrower.close();
    }
    assertThat(row(orphan).get("status")).isEqualTo("failed");
    assertThat(Sql.value("SELECT error FROM oneshot.builds WHERE id = ?", orphan))
        .isEqualTo("route gone no longer exists in the dispatcher's configuration");
    assertThat(row(kept).get("status")).isEqualTo("pending");
  }

  /**
   * A route gone from the configuration whose workspaces hold state is named, with how many
   * workspaces, so that the dispatcher can say at start that their state stays under the old name.
   */
  @Test
  void aRemovedRouteWhoseWorkspacesHoldStateIsNamed() {
    f = new StoreFixture("routes: [{name: a}, {name: gone, tags: {old: \"yes\"}}]");
    for (String ws : List.of("w1", "w2", "w2")) {
      long id = Database.await(f.store.queue().enqueue("{\"old\": \"yes\"}", SCRIPT, 0, ws)).id();
      Sql.exec(
          "INSERT INTO oneshot.workspace_states (route, workspace, version, build_id, attempt,"
              + " state, bytes) VALUES ('gone', ?, (SELECT count(*) + 1 FROM"
              + " oneshot.workspace_states WHERE workspace = ?), ?, 1, '{}', 2)",
          ws,
          ws,
          id);
    }
    assertThat(Database.await(f.store.routeMirror().strandedWorkspaces(f.config.routes())))
        .isEmpty();
    StoreFixture narrower = new StoreFixture("routes: [{name: a}]", false);
    try {
      assertThat(
              Database.await(
                  narrower.store.routeMirror().strandedWorkspaces(narrower.config.routes())))
          .containsExactly(java.util.Map.entry("gone", 2L));
    } finally {
      narrower.close();
    }
  }
}
