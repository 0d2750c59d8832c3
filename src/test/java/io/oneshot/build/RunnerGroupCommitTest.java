package io.oneshot.build;

import static org.assertj.core.api.Assertions.assertThat;

import io.oneshot.testing.Sql;
import io.oneshot.testing.StoreFixture;
import io.vertx.core.Future;
import java.sql.Connection;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Runners' acquires, heartbeats and completions by group commit, on the database: calls written
 * together get what each would get alone, and two runners with one token never share a statement
 * (in one, both would be granted the build).
 */
class RunnerGroupCommitTest {
  private final StoreFixture f = new StoreFixture("routes: [{name: a, maxConcurrent: 20}]");

  @AfterEach
  void tearDown() {
    f.close();
  }

  private static Runner runner(String id) {
    return new Runner(id, null, null, "host", 1L);
  }

  private RunnerStore.AcquireCall acquire(QueueStore.Claimed c, Runner r) {
    return new RunnerStore.AcquireCall(c.token().hash(), r);
  }

  private static Map<String, Object> row(long id) {
    return Sql.rows(
            "SELECT status, runner_id, exit_code, reason FROM oneshot.builds WHERE id = ?", id)
        .get(0);
  }

  @Test
  void acquiresTogetherGetWhatEachWouldGetAlone() {
    List<QueueStore.Claimed> c = f.claimedNoops(3);
    Runner a = runner("runner-a");
    Runner b = runner("runner-b");
    Runner d = runner("runner-d");
    // The second build is already its runner's.
    assertThat(Database.await(f.store.runner().acquire(c.get(1).token().hash(), a)))
        .isInstanceOf(RunnerStore.Acquire.Granted.class);

    List<RunnerStore.Acquire> got =
        Database.await(
            f.store
                .runner()
                .acquireTogether(
                    List.of(
                        acquire(c.get(0), a),
                        acquire(c.get(1), b),
                        new RunnerStore.AcquireCall(BuildToken.generate().hash(), d),
                        acquire(c.get(2), d))));

    assertThat(got.get(0)).isInstanceOf(RunnerStore.Acquire.Granted.class);
    RunnerStore.Acquired first = ((RunnerStore.Acquire.Granted) got.get(0)).build();
    assertThat(first.id()).isEqualTo(c.get(0).id());
    assertThat(first.first()).isTrue();
    assertThat(got.get(1)).isInstanceOf(RunnerStore.Acquire.HeldByOther.class);
    RunnerStore.Holder holder = ((RunnerStore.Acquire.HeldByOther) got.get(1)).holder();
    assertThat(holder.buildId()).isEqualTo(c.get(1).id());
    assertThat(holder.runner().id()).isEqualTo("runner-a");
    assertThat(got.get(2)).isInstanceOf(RunnerStore.Acquire.NoAttempt.class);
    assertThat(((RunnerStore.Acquire.Granted) got.get(3)).build().id()).isEqualTo(c.get(2).id());

    assertThat(row(c.get(0).id())).containsEntry("status", "running");
    assertThat(row(c.get(0).id())).containsEntry("runner_id", "runner-a");
    assertThat(row(c.get(1).id())).containsEntry("runner_id", "runner-a");
    assertThat(row(c.get(2).id())).containsEntry("runner_id", "runner-d");
    assertThat(Sql.transitions(c.get(0).id()))
        .containsExactly("pending>launching", "launching>running");

    // A repeat by the holder, together with another: the same build, not a first acquire.
    List<RunnerStore.Acquire> again =
        Database.await(
            f.store.runner().acquireTogether(List.of(acquire(c.get(2), b), acquire(c.get(0), a))));
    assertThat(again.get(0)).isInstanceOf(RunnerStore.Acquire.HeldByOther.class);
    assertThat(((RunnerStore.Acquire.Granted) again.get(1)).build().first()).isFalse();
  }

  /**
   * Terraform builds acquired together each start from their own route's workspace: the same name
   * on two routes is two workspaces, with versions of their own.
   */
  @Test
  void acquiresTogetherReadEachBuildsOwnRoutesWorkspace() {
    StoreFixture two =
        new StoreFixture(
            "routes: [{name: a, tags: {team: a}, maxConcurrent: 20},"
                + " {name: b, tags: {team: b}, maxConcurrent: 20}]",
            false);
    try {
      Database.await(two.store.routeMirror().write(two.config.routes(), two.config.limits()));
      String tf = "{\"provisioner\": \"terraform\", \"files\": {\"main.tf\": \"\"}}";
      // Route a's "shared" has version 1; route b's has versions 1 and 2.
      for (String[] v : new String[][] {{"a", "1"}, {"b", "1"}, {"b", "2"}}) {
        long writer =
            Database.await(
                    two.store.queue().enqueue("{\"team\": \"" + v[0] + "\"}", tf, 0, "shared"))
                .id();
        Sql.exec(
            "UPDATE oneshot.builds SET status = 'failed', finished_at = now(), reason = 'test'"
                + " WHERE id = ?",
            writer);
        Sql.exec(
            "INSERT INTO oneshot.workspace_states (route, workspace, version, build_id, attempt,"
                + " state, bytes, final) VALUES (?, 'shared', ?::int, ?, 1, ?, 2, true)",
            v[0],
            v[1],
            writer,
            "{\"of\": \"" + v[0] + v[1] + "\"}");
      }
      long onA =
          Database.await(two.store.queue().enqueue("{\"team\": \"a\"}", tf, 0, "shared")).id();
      long onB =
          Database.await(two.store.queue().enqueue("{\"team\": \"b\"}", tf, 0, "shared")).id();
      List<QueueStore.Claimed> c = two.claim(100, 10, "test");
      assertThat(c).extracting(QueueStore.Claimed::id).containsExactlyInAnyOrder(onA, onB);

      List<RunnerStore.Acquire> got =
          Database.await(
              two.store
                  .runner()
                  .acquireTogether(
                      List.of(acquire(c.get(0), runner("r0")), acquire(c.get(1), runner("r1")))));
      Map<Long, RunnerStore.Acquired> byId = new java.util.HashMap<>();
      for (RunnerStore.Acquire g : got) {
        RunnerStore.Acquired x = ((RunnerStore.Acquire.Granted) g).build();
        byId.put(x.id(), x);
      }
      assertThat(byId.get(onA).stateVersion()).isEqualTo(1);
      assertThat(byId.get(onA).state()).isEqualTo("{\"of\": \"a1\"}");
      assertThat(byId.get(onB).stateVersion()).isEqualTo(2);
      assertThat(byId.get(onB).state()).isEqualTo("{\"of\": \"b2\"}");
    } finally {
      two.close();
    }
  }

  @Test
  void completionsTogetherGetWhatEachWouldGetAlone() {
    List<QueueStore.Claimed> c = f.claimedNoops(3);
    List<Runner> runners = List.of(runner("r0"), runner("r1"), runner("r2"));
    for (int i = 0; i < 3; i++) {
      Database.await(f.store.runner().acquire(c.get(i).token().hash(), runners.get(i)));
    }

    List<Optional<RunnerStore.Completed>> got =
        Database.await(
            f.store
                .runner()
                .completeTogether(
                    List.of(
                        complete(c.get(0), "r0", BuildState.SUCCEEDED, 0),
                        complete(c.get(1), "r2", BuildState.SUCCEEDED, 0),
                        new RunnerStore.CompleteCall(
                            BuildToken.generate().hash(),
                            "r9",
                            completion(BuildState.SUCCEEDED, 0)),
                        complete(c.get(2), "r2", BuildState.FAILED, 3))));

    assertThat(got.get(0)).get().extracting(RunnerStore.Completed::id).isEqualTo(c.get(0).id());
    assertThat(got.get(0).get().status()).isEqualTo(BuildState.SUCCEEDED);
    assertThat(got.get(1)).as("not its runner").isEmpty();
    assertThat(got.get(2)).as("no such attempt").isEmpty();
    assertThat(got.get(3).get().status()).isEqualTo(BuildState.FAILED);
    assertThat(got.get(3).get().id()).isEqualTo(c.get(2).id());

    assertThat(row(c.get(0).id())).containsEntry("status", "succeeded");
    assertThat(row(c.get(1).id())).containsEntry("status", "running");
    assertThat(row(c.get(2).id()))
        .containsEntry("status", "failed")
        .containsEntry("exit_code", 3)
        .containsEntry("reason", "provisionerd reported failure");
    assertThat(Sql.transitions(c.get(2).id()))
        .containsExactly("pending>launching", "launching>running", "running>failed");
  }

  @Test
  void heartbeatsTogetherGetWhatEachWouldGetAlone() {
    List<QueueStore.Claimed> c = f.claimedNoops(4);
    for (int i = 0; i < 4; i++) {
      Database.await(f.store.runner().acquire(c.get(i).token().hash(), runner("r" + i)));
    }
    Sql.rows(
        "UPDATE oneshot.builds SET cancel_requested_at = now() WHERE id = ? RETURNING id",
        c.get(1).id());
    Database.await(
        f.store
            .runner()
            .complete(c.get(3).token().hash(), "r3", completion(BuildState.SUCCEEDED, 0)));
    Sql.rows("UPDATE oneshot.builds SET heartbeat_at = NULL RETURNING id");

    List<Optional<Boolean>> got =
        Database.await(
            f.store
                .runner()
                .heartbeatTogether(
                    List.of(
                        new RunnerStore.HeartbeatCall(c.get(0).token().hash(), "r0"),
                        new RunnerStore.HeartbeatCall(c.get(1).token().hash(), "r1"),
                        new RunnerStore.HeartbeatCall(c.get(2).token().hash(), "r9"),
                        new RunnerStore.HeartbeatCall(BuildToken.generate().hash(), "r2"),
                        new RunnerStore.HeartbeatCall(c.get(3).token().hash(), "r3"))));

    assertThat(got.get(0)).as("running, no cancel").contains(false);
    assertThat(got.get(1)).as("running, cancel requested").contains(true);
    assertThat(got.get(2)).as("not its runner").isEmpty();
    assertThat(got.get(3)).as("no such attempt").isEmpty();
    assertThat(got.get(4)).as("finished").isEmpty();
    for (int i = 0; i < 4; i++) {
      assertThat(
              Sql.value(
                  "SELECT heartbeat_at IS NOT NULL FROM oneshot.builds WHERE id = ?",
                  c.get(i).id()))
          .as("build %d's heartbeat recorded", i)
          .isEqualTo(i < 2);
    }
  }

  private RunnerStore.CompleteCall complete(
      QueueStore.Claimed c, String runnerId, BuildState outcome, int exitCode) {
    return new RunnerStore.CompleteCall(c.token().hash(), runnerId, completion(outcome, exitCode));
  }

  private static RunnerStore.Completion completion(BuildState outcome, int exitCode) {
    return new RunnerStore.Completion(
        outcome,
        exitCode,
        null,
        null,
        outcome == BuildState.SUCCEEDED
            ? "provisionerd reported success"
            : "provisionerd reported failure",
        null);
  }

  /**
   * Two runners acquire with one token while every slot is busy, beside a third call: the first of
   * the two goes with the third in one statement, the second in the next, and finds the first the
   * holder. In one statement both would be granted the build.
   */
  @Test
  void twoRunnersWithOneTokenQueuedTogetherAreNeverBothGranted() throws Exception {
    List<QueueStore.Claimed> c = f.claimedNoops(4);
    RunnerStore runners = f.store.runner();
    GroupCommit<RunnerStore.AcquireCall, RunnerStore.Acquire> commit = runners.acquires();
    List<Future<RunnerStore.Acquire>> blockers = new ArrayList<>();
    List<Future<RunnerStore.Acquire>> contested = new ArrayList<>();
    Future<RunnerStore.Acquire> beside;
    long before;
    try (Connection lock = Sql.connect()) {
      lock.setAutoCommit(false);
      Sql.rows(
          lock,
          "SELECT id FROM oneshot.builds WHERE id IN (?, ?) FOR UPDATE",
          c.get(0).id(),
          c.get(1).id());
      before = commit.statements();
      // Each slot's statement waits for a row this connection holds.
      for (int i = 0; i < RunnerStore.STATEMENTS_AT_ONCE; i++) {
        blockers.add(runners.acquire(c.get(i).token().hash(), runner("blocker-" + i)));
      }
      contested.add(runners.acquire(c.get(2).token().hash(), runner("runner-x")));
      contested.add(runners.acquire(c.get(2).token().hash(), runner("runner-y")));
      beside = runners.acquire(c.get(3).token().hash(), runner("runner-z"));
      assertThat(commit.waiting()).isEqualTo(3);
      lock.commit();
    }

    List<RunnerStore.Acquire> answers = new ArrayList<>();
    for (Future<RunnerStore.Acquire> a : contested) {
      answers.add(Database.await(a));
    }
    assertThat(answers)
        .filteredOn(a -> a instanceof RunnerStore.Acquire.Granted)
        .as("granted the contested build")
        .hasSize(1);
    assertThat(answers).filteredOn(a -> a instanceof RunnerStore.Acquire.HeldByOther).hasSize(1);
    assertThat(Database.await(beside)).isInstanceOf(RunnerStore.Acquire.Granted.class);
    for (Future<RunnerStore.Acquire> b : blockers) {
      assertThat(Database.await(b)).isInstanceOf(RunnerStore.Acquire.Granted.class);
    }
    // The blockers, the first of the two with the third call, then the second alone.
    assertThat(commit.statements() - before).isEqualTo(RunnerStore.STATEMENTS_AT_ONCE + 2);
    String holder = (String) row(c.get(2).id()).get("runner_id");
    RunnerStore.Acquire granted =
        answers.get(0) instanceof RunnerStore.Acquire.Granted ? answers.get(0) : answers.get(1);
    assertThat(holder).isEqualTo(granted == answers.get(0) ? "runner-x" : "runner-y");
  }

  /**
   * A build's row held by another transaction holds up the call for that build, not the calls
   * written in the same statement: the statement gives up on the row after {@link
   * RunnerStore#HELD_ROW_WAIT} and each call is written again alone.
   */
  @Test
  void aHeldRowHoldsUpOnlyItsOwnCallNotTheOthersWrittenWithIt() throws Exception {
    List<QueueStore.Claimed> c = f.claimedNoops(4);
    RunnerStore runners = f.store.runner();
    List<Future<RunnerStore.Acquire>> blockers = new ArrayList<>();
    Future<RunnerStore.Acquire> held;
    Future<RunnerStore.Acquire> free;
    try (Connection slots = Sql.connect();
        Connection row = Sql.connect()) {
      slots.setAutoCommit(false);
      row.setAutoCommit(false);
      Sql.rows(
          slots,
          "SELECT id FROM oneshot.builds WHERE id IN (?, ?) FOR UPDATE",
          c.get(0).id(),
          c.get(1).id());
      Sql.rows(row, "SELECT id FROM oneshot.builds WHERE id = ? FOR UPDATE", c.get(2).id());
      for (int i = 0; i < RunnerStore.STATEMENTS_AT_ONCE; i++) {
        blockers.add(runners.acquire(c.get(i).token().hash(), runner("blocker-" + i)));
      }
      held = runners.acquire(c.get(2).token().hash(), runner("runner-held"));
      free = runners.acquire(c.get(3).token().hash(), runner("runner-free"));
      assertThat(runners.acquires().waiting()).isEqualTo(2);
      slots.commit();

      // The two go together; the row of the first is still held.
      assertThat(free.toCompletionStage().toCompletableFuture().get(10, TimeUnit.SECONDS))
          .isInstanceOf(RunnerStore.Acquire.Granted.class);
      assertThat(held.isComplete()).as("the held build's acquire waits for its row").isFalse();
      row.commit();
    }
    assertThat(Database.await(held)).isInstanceOf(RunnerStore.Acquire.Granted.class);
    for (Future<RunnerStore.Acquire> b : blockers) {
      assertThat(Database.await(b)).isInstanceOf(RunnerStore.Acquire.Granted.class);
    }
    assertThat(row(c.get(2).id())).containsEntry("runner_id", "runner-held");
    assertThat(row(c.get(3).id())).containsEntry("runner_id", "runner-free");
  }

  /**
   * What a build met of its pod's limits is stored with its outcome, by a completion alone and by
   * completions written together, and read back with the build.
   */
  @Test
  void whatABuildMetOfItsLimitsIsStoredWithItsOutcomeAloneOrTogether() {
    List<QueueStore.Claimed> c = f.claimedNoops(3);
    List<Runner> runners = List.of(runner("r0"), runner("r1"), runner("r2"));
    for (int i = 0; i < 3; i++) {
      Database.await(f.store.runner().acquire(c.get(i).token().hash(), runners.get(i)));
    }
    java.util.function.IntFunction<RunnerStore.Completion> withUsage =
        i ->
            new RunnerStore.Completion(
                BuildState.FAILED,
                1,
                "hit its limit",
                null,
                "hit its limit",
                null,
                io.oneshot.api.Json.tree(
                    "{\"oomKills\": "
                        + i
                        + ", \"memoryLimitBytes\": 536870912,"
                        + " \"cpuThrottledSeconds\": 1.5}"));
    // One alone (runner/complete), two together (runner/complete-many).
    Database.await(
        f.store
            .runner()
            .completeTogether(
                List.of(
                    new RunnerStore.CompleteCall(
                        c.get(0).token().hash(), "r0", withUsage.apply(1)))));
    Database.await(
        f.store
            .runner()
            .completeTogether(
                List.of(
                    new RunnerStore.CompleteCall(c.get(1).token().hash(), "r1", withUsage.apply(2)),
                    new RunnerStore.CompleteCall(
                        c.get(2).token().hash(), "r2", completion(BuildState.SUCCEEDED, 0)))));
    for (int i = 0; i < 2; i++) {
      Build b = Database.await(f.store.reads().get(c.get(i).id())).orElseThrow();
      assertThat(b.usage().path("oomKills").asInt()).isEqualTo(i + 1);
      assertThat(b.usage().path("memoryLimitBytes").asLong()).isEqualTo(536870912L);
      assertThat(b.usage().path("cpuThrottledSeconds").asDouble()).isEqualTo(1.5);
    }
    assertThat(Database.await(f.store.reads().get(c.get(2).id())).orElseThrow().usage())
        .as("nothing sent, nothing stored")
        .isNull();
  }
}
