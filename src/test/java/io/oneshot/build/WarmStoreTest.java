package io.oneshot.build;

import static org.assertj.core.api.Assertions.assertThat;

import io.oneshot.testing.Sql;
import io.oneshot.testing.StoreFixture;
import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** Warm capacity's reads and records: the forecast's history, live builds, what was counted. */
class WarmStoreTest {
  /** Monday 7 December 2026, 8:00 UTC: the forecast's "now". */
  private static final Instant NOW = Instant.parse("2026-12-07T08:00:00Z");

  private static final Duration AHEAD = Duration.ofMinutes(30);
  private static final Duration LONGEST = Duration.ofHours(2);

  private StoreFixture f;

  @AfterEach
  void tearDown() {
    if (f != null) {
      f.close();
    }
  }

  /**
   * A finished build of {@code route} that held a slot from {@code claimed} to {@code finished}.
   */
  private static void ran(String route, Instant claimed, Instant finished) {
    Sql.exec(
        "INSERT INTO oneshot.builds (status, route, tags, input, attempt, created_at, claimed_at,"
            + " started_at, finished_at, reason)"
            + " VALUES ('succeeded', ?, '{}', '{\"provisioner\": \"script\", \"command\": [\"true\"]}',"
            + " 1, ?, ?, ?, ?, 'history')",
        route,
        Timestamp.from(claimed.minusSeconds(1)),
        Timestamp.from(claimed),
        Timestamp.from(claimed),
        Timestamp.from(finished));
  }

  /** The start of week {@code k}'s window, plus {@code minutes}. */
  private static Instant week(int k, int minutes) {
    return NOW.minus(Duration.ofDays(7L * k)).plus(Duration.ofMinutes(minutes));
  }

  private List<Integer> peaks(String route, int weeks) {
    return Database.await(f.store.warm().weeklyPeaks(route, NOW, weeks, AHEAD, LONGEST));
  }

  @Test
  void eachWeeksPeakIsTheMostBuildsHoldingASlotAtOnceInItsWindow() {
    f =
        new StoreFixture(
            "routes:\n  - {name: a, tags: {t: a}, untagged: true}\n  - {name: b, tags: {t: b}}\n");
    // Week 1: three at once at +6m (one claimed before the window, one still holding past it).
    ran("a", week(1, -10), week(1, 5));
    ran("a", week(1, 2), week(1, 20));
    ran("a", week(1, 5), week(1, 7));
    ran("a", week(1, 6), week(1, 45));
    // Week 2: a slot freed and taken at the same instant is one slot; builds outside the window
    // (ended at its start, claimed at its end) are not in it.
    ran("a", week(2, 10), week(2, 15));
    ran("a", week(2, 15), week(2, 20));
    ran("a", week(2, -40), week(2, 0));
    ran("a", week(2, 30), week(2, 50));
    // Week 3: one build across the whole window.
    ran("a", week(3, -20), week(3, 60));
    // Week 4: nothing of a, three of b at once.
    ran("b", week(4, 1), week(4, 10));
    ran("b", week(4, 2), week(4, 10));
    ran("b", week(4, 3), week(4, 10));
    // Week 5: a's first build in the history, hours before the window; week 6 is before it.
    ran("a", week(5, -300), week(5, -290));
    assertThat(peaks("a", 3)).containsExactly(3, 1, 1);
    assertThat(peaks("a", 5)).as("a quiet week counts as 0").containsExactly(3, 1, 1, 0, 0);
    assertThat(peaks("a", 8))
        .as("weeks before the route's first build are left out")
        .containsExactly(3, 1, 1, 0, 0);
    assertThat(peaks("b", 6)).containsExactly(0, 0, 0, 3);
    assertThat(peaks("c", 4)).as("a route with no history").isEmpty();
  }

  @Test
  void aBuildClaimedLongerAgoThanAnyBuildMayRunIsNotRead() {
    f = new StoreFixture("routes:\n  - {name: a, tags: {t: a}, untagged: true}\n");
    // Claimed three hours before the window and finished in it: longer than LONGEST, so the read
    // (bounded by the index on claimed_at) does not reach it.
    ran("a", week(1, -180), week(1, 10));
    ran("a", week(1, -60), week(1, 10));
    assertThat(peaks("a", 1)).containsExactly(1);
  }

  @Test
  void liveCountsTheBuildsLaunchingOrRunningByRoute() {
    f =
        new StoreFixture(
            "routes:\n  - {name: a, tags: {t: a}, untagged: true}\n  - {name: b, tags: {t: b}}\n");
    f.enqueueNoops(5);
    assertThat(Database.await(f.store.warm().live())).isEmpty();
    f.claim(100, 3, "test");
    assertThat(Database.await(f.store.warm().live())).isEqualTo(Map.of("a", 3));
  }

  @Test
  void theLeadersRecordIsWhatEveryReplicaShowsWithTheLastDaysCost() {
    f =
        new StoreFixture(
            "routes:\n  - {name: a, tags: {t: a}, untagged: true}\n  - {name: b, tags: {t: b}}\n");
    WarmStore w = f.store.warm();
    Database.await(
        w.record(
            List.of(
                new WarmStore.Seen("a", 3, "idle 3 -> 3", 2, 1, null),
                new WarmStore.Seen("b", 1, "idle 1 -> 1", 0, 0, "no class"))));
    Database.await(w.addUsage(List.of(new WarmStore.Cost("a", 5400, 2))));
    Database.await(w.addUsage(List.of(new WarmStore.Cost("a", 1800, 1))));
    // Eight days ago: gone at the next addition; two days ago: kept, but not in the last day.
    Sql.exec(
        "INSERT INTO oneshot.balloon_usage VALUES ('a', date_trunc('hour', now()) - interval '9"
            + " days', 100000, 50), ('a', date_trunc('hour', now()) - interval '2 days', 7200, 9)");
    Database.await(w.addUsage(List.of(new WarmStore.Cost("b", 0, 1))));
    List<BuildReads.RouteStatus> routes = Database.await(f.store.reads().routes());
    BuildReads.Warm a = routes.get(0).warm();
    assertThat(a.wanted()).isEqualTo(3);
    assertThat(a.running()).isEqualTo(2);
    assertThat(a.pending()).isEqualTo(1);
    assertThat(a.why()).isEqualTo("idle 3 -> 3");
    assertThat(a.trouble()).isNull();
    assertThat(a.balloonHours()).isEqualTo(2.0);
    assertThat(a.preemptions()).isEqualTo(3);
    assertThat(routes.get(1).warm().trouble()).isEqualTo("no class");
    assertThat(Sql.count("SELECT count(*) FROM oneshot.balloon_usage WHERE route = 'a'"))
        .as("the hour nine days old is gone")
        .isEqualTo(2);
    // A route no longer warm loses its row.
    Database.await(w.record(List.of(new WarmStore.Seen("a", 0, "nothing -> 0", 0, 0, null))));
    routes = Database.await(f.store.reads().routes());
    assertThat(routes.get(1).warm()).isNull();
  }
}
