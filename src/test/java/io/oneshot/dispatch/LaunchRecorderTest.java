package io.oneshot.dispatch;

import static org.assertj.core.api.Assertions.assertThat;

import io.oneshot.build.AttemptStore;
import io.oneshot.build.Database;
import io.oneshot.build.QueueStore;
import io.oneshot.testing.Sql;
import io.oneshot.testing.StoreFixture;
import io.vertx.core.Future;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Launches are recorded by group commit: all of them, each once, in far fewer transactions. */
class LaunchRecorderTest {
  private StoreFixture f;

  @AfterEach
  void tearDown() {
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

    LaunchRecorder recorder = new LaunchRecorder(f.store);
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
    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds WHERE launched_at IS NOT NULL"))
        .isEqualTo(300);
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
}
