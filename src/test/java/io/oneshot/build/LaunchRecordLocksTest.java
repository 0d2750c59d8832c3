package io.oneshot.build;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.oneshot.testing.Sql;
import io.oneshot.testing.StoreFixture;
import io.vertx.core.Future;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A build's launch record and its runner's calls reach its row at the same moment when a runner
 * acquires within a millisecond of its launch: neither waits for the other's commit
 * (db/014_launch_records.sql). The record holds the row FOR KEY SHARE, the runner's calls FOR NO
 * KEY UPDATE, and those two do not conflict; any other pair would queue one behind the other.
 */
class LaunchRecordLocksTest {
  private final StoreFixture f = new StoreFixture("routes: [{name: a, maxConcurrent: 20}]");

  @AfterEach
  void tearDown() {
    f.close();
  }

  private static Runner runner(String id) {
    return new Runner(id, null, null, "host", 1L);
  }

  /** Waits for a call that must not wait for the lock held meanwhile, and gives its answer. */
  private static <T> T answered(Future<T> call, String what) {
    await(what).atMost(10, TimeUnit.SECONDS).until(call::isComplete);
    assertThat(call.succeeded()).as(what + ": " + call.cause()).isTrue();
    return call.result();
  }

  /**
   * A runner's call under way (its update of the build's row, uncommitted) does not hold the record
   * back: the record is written in the same write, not handed back as held.
   */
  @Test
  void aLaunchIsRecordedWhileARunnersCallHoldsItsBuild() throws Exception {
    QueueStore.Claimed c = f.claimedNoops(1).get(0);
    try (Connection runnerCall = Sql.connect()) {
      runnerCall.setAutoCommit(false);
      try (PreparedStatement st =
          runnerCall.prepareStatement(
              "UPDATE oneshot.builds SET heartbeat_at = clock_timestamp() WHERE id = ?")) {
        st.setLong(1, c.id());
        assertThat(st.executeUpdate()).isOne();
      }
      AttemptStore.Marked marked =
          answered(
              f.store
                  .attempts()
                  .markLaunched(
                      List.of(
                          new AttemptStore.Launch(
                              c.id(), c.attempt(), "test", c.launchName(), null, "launched"))),
              "the launch record");
      assertThat(marked.held()).isEmpty();
      assertThat(marked.recorded()).containsKey(c.id());
      runnerCall.rollback();
    }
    assertThat(Sql.launchRecorded(c.id())).isTrue();
  }

  /**
   * A launch record under way (its lock on the build's row, uncommitted) holds up none of the
   * runner's calls: an acquire alone, acquires written together, a log batch.
   */
  @Test
  void aRunnersCallsDoNotWaitForTheLaunchRecordOfTheirBuild() throws Exception {
    List<QueueStore.Claimed> c = f.claimedNoops(3);
    try (Connection recording = Sql.connect()) {
      recording.setAutoCommit(false);
      try (PreparedStatement st =
          recording.prepareStatement(
              "SELECT id FROM oneshot.builds WHERE id = ANY (?) FOR KEY SHARE")) {
        st.setArray(
            1,
            recording.createArrayOf(
                "bigint", c.stream().map(QueueStore.Claimed::id).toArray(Long[]::new)));
        st.executeQuery().close();
      }
      List<RunnerStore.Acquire> alone =
          answered(
              f.store
                  .runner()
                  .acquireTogether(
                      List.of(new RunnerStore.AcquireCall(c.get(0).token().hash(), runner("a")))),
              "an acquire alone");
      assertThat(alone.get(0)).isInstanceOf(RunnerStore.Acquire.Granted.class);

      List<RunnerStore.Acquire> together =
          answered(
              f.store
                  .runner()
                  .acquireTogether(
                      List.of(
                          new RunnerStore.AcquireCall(c.get(1).token().hash(), runner("b")),
                          new RunnerStore.AcquireCall(c.get(2).token().hash(), runner("c")))),
              "acquires written together");
      assertThat(together).allMatch(a -> a instanceof RunnerStore.Acquire.Granted);

      Optional<RunnerStore.LogAck> logged =
          answered(
              f.store
                  .runner()
                  .appendLogs(
                      c.get(0).token().hash(),
                      "a",
                      1,
                      List.of(
                          new RunnerStore.NewLine(
                              Instant.now(), "stdout", "info", null, "hello", false)),
                      1 << 20),
              "a log batch");
      assertThat(logged).isPresent();
      recording.commit();
    }
    for (QueueStore.Claimed each : c) {
      assertThat(Sql.value("SELECT status FROM oneshot.builds WHERE id = ?", each.id()))
          .isEqualTo("running");
    }
  }
}
