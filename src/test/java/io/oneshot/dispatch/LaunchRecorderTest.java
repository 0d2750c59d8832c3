package io.oneshot.dispatch;

import static org.assertj.core.api.Assertions.assertThat;

import io.oneshot.build.AttemptStore;
import io.oneshot.build.Database;
import io.oneshot.build.QueueStore;
import io.oneshot.testing.Sql;
import io.oneshot.testing.StoreFixture;
import io.vertx.core.Future;
import java.sql.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Launches are recorded by group commit: all of them, each once, in far fewer transactions. */
class LaunchRecorderTest {
  private StoreFixture f;
  private final ScheduledExecutorService later = Executors.newSingleThreadScheduledExecutor();

  @AfterEach
  void tearDown() {
    later.shutdownNow();
    if (f != null) {
      f.close();
    }
  }

  @Test
  void launchesArrivingTogetherShareCommitsAndStaleOnesAreToldApart() {
    f = new StoreFixture("routes:\n  - {name: a, maxConcurrent: 1000}\n");
    f.enqueueNoops(300);
    List<QueueStore.Claimed> claimed = f.claim(1000, 300, "test");
    assertThat(claimed).hasSize(300);

    LaunchRecorder recorder = new LaunchRecorder(f.store, later);
    List<Future<Optional<Double>>> results = new ArrayList<>();
    for (QueueStore.Claimed c : claimed) {
      results.add(
          recorder.record(
              new AttemptStore.Launch(c.id(), c.attempt(), "test", c.launchName(), null, "ok")));
    }
    // An attempt that is no longer current: recorded as such, not as launched.
    QueueStore.Claimed first = claimed.get(0);
    Future<Optional<Double>> stale =
        recorder.record(
            new AttemptStore.Launch(first.id(), first.attempt() + 1, "test", "x", null, "late"));

    for (Future<Optional<Double>> r : results) {
      assertThat(Database.await(r)).isPresent();
    }
    assertThat(Database.await(stale)).isEmpty();
    assertThat(Sql.count("SELECT count(*) FROM oneshot.build_launches")).isEqualTo(300);
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.build_events WHERE from_status = to_status"
                    + " AND reason = 'ok'"))
        .isEqualTo(300);
    long commits =
        Sql.count(
            "SELECT count(DISTINCT xmin::text) FROM oneshot.build_events"
                + " WHERE from_status = to_status AND reason = 'ok'");
    assertThat(commits).as("transactions that recorded 300 launches").isLessThan(10);
  }

  /**
   * A write does not wait for a row another transaction holds (a runner's acquire under way): the
   * other launches of the write are recorded at once, and the held one as soon as its row is free.
   */
  @Test
  void aLaunchWhoseRowIsHeldDoesNotHoldUpTheOthersAndIsRecordedOnceFree() throws Exception {
    f = new StoreFixture("routes:\n  - {name: a, maxConcurrent: 10}\n");
    f.enqueueNoops(2);
    List<QueueStore.Claimed> claimed = f.claim(10, 2, "test");
    QueueStore.Claimed held = claimed.get(0);
    QueueStore.Claimed free = claimed.get(1);
    LaunchRecorder recorder = new LaunchRecorder(f.store, later);

    try (Connection holder = Sql.connect()) {
      holder.setAutoCommit(false);
      try (var st =
          holder.prepareStatement("SELECT 1 FROM oneshot.builds WHERE id = ? FOR UPDATE")) {
        st.setLong(1, held.id());
        st.executeQuery().close();
      }
      Future<Optional<Double>> first =
          recorder.record(
              new AttemptStore.Launch(held.id(), 1, "test", held.launchName(), null, "ok"));
      Future<Optional<Double>> second =
          recorder.record(
              new AttemptStore.Launch(free.id(), 1, "test", free.launchName(), null, "ok"));

      assertThat(Database.await(second, Duration.ofSeconds(10))).isPresent();
      assertThat(Sql.launchRecorded(free.id())).isTrue();
      assertThat(first.isComplete()).as("recorded while its row is held").isFalse();
      assertThat(Sql.launchRecorded(held.id())).isFalse();
      holder.commit();
      assertThat(Database.await(first, Duration.ofSeconds(10))).isPresent();
    }
    assertThat(Sql.launchRecorded(held.id())).isTrue();
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.build_events WHERE build_id = ?"
                    + " AND from_status = to_status AND reason = 'ok'",
                held.id()))
        .isEqualTo(1);
    assertThat(
            Database.await(
                recorder.record(
                    new AttemptStore.Launch(held.id(), 1, "test", held.launchName(), null, "x"))))
        .as("a launch recorded once is not recorded again")
        .isEmpty();
  }
}
