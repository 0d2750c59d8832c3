package io.oneshot.build;

import static org.assertj.core.api.Assertions.assertThat;

import io.oneshot.testing.Sql;
import io.oneshot.testing.StoreFixture;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.postgresql.PGConnection;
import org.postgresql.PGNotification;

/**
 * Who is woken, and when (db/009_wakes.sql). NOTIFY holds a lock on the database through the commit
 * of every transaction that sends one, so the runner's hot path sends as few as it can: an acquire
 * frees no capacity and wakes nobody; a completion wakes the dispatcher and its build's log
 * followers once, after it committed, from a transaction of its own. Every other transition still
 * notifies inside its own transaction.
 */
class WakesTest {
  private static final String SCRIPT = "{\"provisioner\": \"script\", \"command\": [\"true\"]}";
  private static final Runner RUNNER = new Runner("runner-wakes-1", null, null, "host", 1L);

  private StoreFixture f;
  private Connection listener;

  @AfterEach
  void tearDown() throws SQLException {
    if (listener != null) {
      listener.close();
    }
    if (f != null) {
      f.close();
    }
  }

  private void listen() throws SQLException {
    listener = Sql.connect();
    try (Statement s = listener.createStatement()) {
      s.execute("LISTEN oneshot_builds; LISTEN oneshot_logs; LISTEN wakes_test_sentinel");
    }
  }

  /**
   * Every notification up to a sentinel sent now: one connection delivers in commit order, so once
   * the sentinel is in, whatever committed before it is in too.
   */
  private List<String> notificationsSoFar() throws SQLException {
    Sql.exec("SELECT pg_notify('wakes_test_sentinel', '')");
    List<String> got = new ArrayList<>();
    PGConnection pg = listener.unwrap(PGConnection.class);
    while (true) {
      PGNotification[] ns = pg.getNotifications(10_000);
      assertThat(ns).as("the sentinel arrives").isNotNull();
      for (PGNotification n : ns) {
        if (n.getName().equals("wakes_test_sentinel")) {
          return got;
        }
        got.add(n.getName() + ":" + n.getParameter());
      }
    }
  }

  /** Waits for the next notifications to arrive (the completion's, sent after it committed). */
  private List<String> next() throws SQLException {
    PGConnection pg = listener.unwrap(PGConnection.class);
    PGNotification[] ns = pg.getNotifications(10_000);
    assertThat(ns).as("a notification arrives").isNotEmpty();
    List<String> got = new ArrayList<>();
    for (PGNotification n : ns) {
      got.add(n.getName() + ":" + n.getParameter());
    }
    return got;
  }

  @Test
  void anAcquireWakesNobodyAndACompletionWakesTheDispatcherAndItsFollowersOnceAfterItCommitted()
      throws Exception {
    f = new StoreFixture("routes: [{name: a}]");
    Database.await(f.store.queue().enqueue("{}", SCRIPT, 0, null));
    QueueStore.Claimed c = f.claim(10, 1, "test").get(0);
    listen();

    assertThat(Database.await(f.store.runner().acquire(c.token().hash(), RUNNER)))
        .isInstanceOf(RunnerStore.Acquire.Granted.class);
    assertThat(notificationsSoFar()).as("an acquire frees nothing").isEmpty();

    assertThat(
            Database.await(
                f.store
                    .runner()
                    .complete(
                        c.token().hash(),
                        RUNNER.id(),
                        new RunnerStore.Completion(
                            BuildState.SUCCEEDED, 0, null, null, "done", null))))
        .isPresent();
    // The completion's notifications come from a transaction after it: wait for the first.
    List<String> got = next();
    got.addAll(notificationsSoFar());
    assertThat(got)
        .as("once each: none from inside the completion's own transaction")
        .containsExactlyInAnyOrder("oneshot_builds:", "oneshot_logs:" + c.id());
  }

  /**
   * Completions written together (one runner/complete statement) leave their notifications out of
   * their own transaction too: {@link RunnerStore#complete} sends them once it committed.
   */
  @Test
  void completionsWrittenTogetherSendNothingFromTheirOwnTransaction() throws Exception {
    f = new StoreFixture("routes: [{name: a, maxConcurrent: 5}]");
    for (int i = 0; i < 2; i++) {
      Database.await(f.store.queue().enqueue("{}", SCRIPT, 0, null));
    }
    List<QueueStore.Claimed> c = f.claim(10, 2, "test");
    List<RunnerStore.CompleteCall> calls = new ArrayList<>();
    for (QueueStore.Claimed one : c) {
      Database.await(f.store.runner().acquire(one.token().hash(), RUNNER));
      calls.add(
          new RunnerStore.CompleteCall(
              one.token().hash(),
              RUNNER.id(),
              new RunnerStore.Completion(BuildState.SUCCEEDED, 0, null, null, "done", null)));
    }
    listen();

    assertThat(Database.await(f.store.runner().completeTogether(calls)))
        .allSatisfy(done -> assertThat(done).isPresent());
    assertThat(notificationsSoFar()).as("nothing from inside their transaction").isEmpty();
  }

  /** Writers other than the runner (here a cancel by SQL, as an operator would) wake as before. */
  @Test
  void anyOtherWriterThatEndsABuildStillWakesTheDispatcherAndItsFollowers() throws Exception {
    f = new StoreFixture("routes: [{name: a}]");
    Database.await(f.store.queue().enqueue("{}", SCRIPT, 0, null));
    QueueStore.Claimed c = f.claim(10, 1, "test").get(0);
    listen();
    Sql.exec(
        "UPDATE oneshot.builds SET status = 'failed', finished_at = now(), reason = 'by hand'"
            + " WHERE id = ?",
        c.id());
    assertThat(notificationsSoFar())
        .containsExactlyInAnyOrder("oneshot_builds:", "oneshot_logs:" + c.id());
  }
}
