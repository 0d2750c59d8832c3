package io.oneshot.build;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.oneshot.testing.Sql;
import io.oneshot.testing.StoreFixture;
import io.vertx.core.Future;
import java.sql.Connection;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A build's log lines, timeline events and launch records have no foreign key to the build (db/012,
 * db/014): a deleted build still takes them with it, and nothing writes them for a build that is
 * gone.
 */
class BuildHistoryTest {
  private StoreFixture f;

  @AfterEach
  void tearDown() {
    if (f != null) {
      f.close();
    }
  }

  private long build(String status) {
    long id = unlaunched(status);
    Sql.exec(
        "INSERT INTO oneshot.build_launches (build_id, attempt, kind, name)"
            + " VALUES (?, 1, 'test', 'oneshot-' || ? || '-1')",
        id,
        id);
    return id;
  }

  private long unlaunched(String status) {
    long id =
        ((Number)
                Sql.value(
                    "INSERT INTO oneshot.builds (route, tags, input, status, attempt)"
                        + " VALUES ('a', '{}', '{}', ?, 1) RETURNING id",
                    status))
            .longValue();
    Sql.exec(
        "INSERT INTO oneshot.build_logs (build_id, seq, ts, attempt, stream, text)"
            + " SELECT ?, g, now(), 1, 'stdout', 'line ' || g FROM generate_series(1, 3) g",
        id);
    Sql.exec(
        "INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason)"
            + " VALUES (?, 1, ?, ?, 'a step')",
        id,
        status,
        status);
    return id;
  }

  private static long history(long id) {
    return Sql.count("SELECT count(*) FROM oneshot.build_logs WHERE build_id = ?", id)
        + Sql.count("SELECT count(*) FROM oneshot.build_events WHERE build_id = ?", id)
        + Sql.count("SELECT count(*) FROM oneshot.build_launches WHERE build_id = ?", id);
  }

  @Test
  void buildsDeletedTogetherTakeTheirLinesAndEventsAndNoOneElses() {
    f = new StoreFixture("routes:\n  - {name: a}\n");
    long gone1 = build("pending");
    long stays = build("pending");
    long gone2 = build("pending");
    long before = history(stays);

    Sql.exec("DELETE FROM oneshot.builds WHERE id IN (?, ?)", gone1, gone2);

    assertThat(history(gone1)).isZero();
    assertThat(history(gone2)).isZero();
    // Three lines, the enqueue's event, the step and the launch record.
    assertThat(history(stays)).isEqualTo(before).isEqualTo(6);
  }

  /**
   * A pod event heard while its build is being deleted: the step waits for the delete and then
   * finds no build, as a foreign key's check made it do. Written from a snapshot taken before the
   * delete committed, it would outlive the build, since the delete's trigger ran before it existed.
   */
  @Test
  void aStepHeardWhileItsBuildIsDeletedIsNotLeftBehind() throws Exception {
    f = new StoreFixture("routes:\n  - {name: a}\n");
    long id = unlaunched("launching");
    Future<Void> step;
    try (Connection deleting = Sql.connect()) {
      deleting.setAutoCommit(false);
      try (var st = deleting.prepareStatement("DELETE FROM oneshot.builds WHERE id = ?")) {
        st.setLong(1, id);
        assertThat(st.executeUpdate()).isOne();
      }
      step = f.store.attempts().milestone(id, 1, "pod scheduled");
      // Either the step waits for the delete's lock, or (without that lock) it is already written.
      await()
          .atMost(10, TimeUnit.SECONDS)
          .until(
              () ->
                  step.isComplete()
                      || Sql.count(
                              "SELECT count(*) FROM pg_stat_activity"
                                  + " WHERE wait_event_type = 'Lock'"
                                  + " AND query LIKE '%Marks a step within the current attempt%'")
                          > 0);
      deleting.commit();
    }
    await().atMost(10, TimeUnit.SECONDS).until(step::isComplete);
    assertThat(step.succeeded()).as(String.valueOf(step.cause())).isTrue();
    assertThat(history(id)).isZero();
  }

  /**
   * A launch confirmed while its build is being deleted: the record is not written from a snapshot
   * that still shows the build (it holds the build's row, FOR KEY SHARE, while it writes), so it
   * never outlives the build.
   */
  @Test
  void aLaunchRecordedWhileItsBuildIsDeletedIsNotLeftBehind() throws Exception {
    f = new StoreFixture("routes:\n  - {name: a}\n");
    long id = unlaunched("launching");
    Future<Optional<Double>> record;
    try (Connection deleting = Sql.connect()) {
      deleting.setAutoCommit(false);
      try (var st = deleting.prepareStatement("DELETE FROM oneshot.builds WHERE id = ?")) {
        st.setLong(1, id);
        assertThat(st.executeUpdate()).isOne();
      }
      record =
          f.store.attempts().markLaunched(id, 1, "test", "oneshot-" + id + "-1", null, "launched");
      // Either the record is tried again while the delete holds the row, or (without the lock) it
      // is already written.
      await()
          .atMost(10, TimeUnit.SECONDS)
          .until(() -> record.isComplete() || Sql.ranElsewhere("Launch bookkeeping"));
      deleting.commit();
    }
    await().atMost(10, TimeUnit.SECONDS).until(record::isComplete);
    assertThat(record.succeeded()).as(String.valueOf(record.cause())).isTrue();
    assertThat(record.result()).as("no build, no attempt to record").isEmpty();
    assertThat(history(id)).isZero();
  }
}
