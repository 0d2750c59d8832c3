package io.oneshot.dispatch;

import static org.assertj.core.api.Assertions.assertThat;

import io.oneshot.api.Metrics;
import io.oneshot.build.Database;
import io.oneshot.testing.PromText;
import io.oneshot.testing.Sql;
import io.oneshot.testing.StoreFixture;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class PrunerTest {
  private StoreFixture f;
  private final Metrics metrics = new Metrics();
  private final AtomicBoolean leader = new AtomicBoolean(true);

  @AfterEach
  void tearDown() {
    if (f != null) {
      f.close();
    }
  }

  private Pruner pruner(String yaml) {
    f = new StoreFixture(yaml);
    return new Pruner(f.store, f.config, leader::get, metrics);
  }

  /** A build of {@code route} canceled {@code hoursAgo} hours ago, with a log line. */
  private long finished(String route, int hoursAgo) {
    long id =
        ((Number)
                Sql.value(
                    "SELECT id FROM oneshot.enqueue(jsonb_build_object('r', ?::text),"
                        + " '{\"provisioner\": \"script\", \"command\": [\"true\"]}')",
                    route))
            .longValue();
    Database.await(f.store.queue().cancel(id));
    Sql.exec(
        "UPDATE oneshot.builds SET finished_at = now() - make_interval(hours => ?) WHERE id = ?",
        hoursAgo,
        id);
    Sql.exec(
        "INSERT INTO oneshot.build_logs (build_id, attempt, seq, ts, stream, text)"
            + " VALUES (?, 0, 1, now(), 'stdout', 'x')",
        id);
    return id;
  }

  private long pending(String route) {
    return ((Number)
            Sql.value(
                "SELECT id FROM oneshot.enqueue(jsonb_build_object('r', ?::text),"
                    + " '{\"provisioner\": \"script\", \"command\": [\"true\"]}')",
                route))
        .longValue();
  }

  private static List<Long> ids() {
    return Sql.rows("SELECT id FROM oneshot.builds ORDER BY id").stream()
        .map(r -> ((Number) r.get("id")).longValue())
        .toList();
  }

  private double deletedMetric(String route) {
    Double v =
        PromText.parse(metrics.scrape()).value("oneshot_builds_deleted_total", "route", route);
    return v == null ? 0 : v;
  }

  @Test
  void finishedBuildsOlderThanTheAgeAreDeletedWithTheirLogsAndTimelines() {
    Pruner p =
        pruner(
            """
            retention: {age: 1d, batch: 2}
            routes:
              - {name: a, tags: {r: a}}
              - {name: keep, tags: {r: keep}, retention: {age: forever}}
            """);
    long old1 = finished("a", 50);
    long old2 = finished("a", 30);
    long old3 = finished("a", 25);
    long recent = finished("a", 1);
    long waiting = pending("a");
    long kept = finished("keep", 100);
    long keptEvents =
        Sql.count(
            "SELECT count(*) FROM oneshot.build_events WHERE build_id IN (?, ?, ?)",
            recent,
            waiting,
            kept);

    assertThat(p.pass()).isEqualTo(3);

    assertThat(ids()).containsExactly(recent, waiting, kept);
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.build_logs WHERE build_id IN (?, ?, ?)",
                old1,
                old2,
                old3))
        .isZero();
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.build_events WHERE build_id IN (?, ?, ?)",
                old1,
                old2,
                old3))
        .isZero();
    // What stays keeps its own.
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.build_logs WHERE build_id IN (?, ?)", recent, kept))
        .isEqualTo(2);
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.build_events WHERE build_id IN (?, ?, ?)",
                recent,
                waiting,
                kept))
        .isEqualTo(keptEvents)
        .isPositive();
    assertThat(deletedMetric("a")).isEqualTo(3);
    assertThat(p.pass()).isZero();
  }

  @Test
  void eachRouteKeepsItsNewestCountOfFinishedBuilds() {
    Pruner p =
        pruner(
            """
            retention: {count: 2}
            routes:
              - {name: a, tags: {r: a}}
              - {name: b, tags: {r: b}, retention: {count: 1}}
            """);
    long a1 = finished("a", 5);
    long a2 = finished("a", 1);
    long a3 = finished("a", 3);
    long a4 = finished("a", 4);
    long aRunning = pending("a");
    long b1 = finished("b", 9);
    long b2 = finished("b", 8);

    assertThat(p.pass()).isEqualTo(3);
    // Newest by when they finished, not by id: a2 (1 h ago) and a3 (3 h ago) stay.
    assertThat(ids()).containsExactly(a2, a3, aRunning, b2);
    assertThat(deletedMetric("a")).isEqualTo(2);
    assertThat(deletedMetric("b")).isEqualTo(1);
    assertThat(List.of(a1, a4, b1)).doesNotContainAnyElementsOf(ids());
  }

  @Test
  void aBuildWhoseStateAWorkspaceKeepsIsKeptAndAFollowerDeletesNothing() {
    Pruner p =
        pruner(
            """
            retention: {age: 1h}
            routes:
              - {name: a, tags: {r: a}}
            """);
    long withState = finished("a", 10);
    long without = finished("a", 10);
    Sql.exec(
        "INSERT INTO oneshot.workspace_states (workspace, version, build_id, attempt, state, bytes)"
            + " VALUES ('ws', 1, ?, 1, '{}', 2)",
        withState);

    leader.set(false);
    assertThat(p.pass()).isZero();
    assertThat(ids()).containsExactly(withState, without);

    leader.set(true);
    assertThat(p.pass()).isEqualTo(1);
    assertThat(ids()).containsExactly(withState);
  }
}
