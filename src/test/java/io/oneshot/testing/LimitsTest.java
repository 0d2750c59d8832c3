package io.oneshot.testing;

import static org.assertj.core.api.Assertions.assertThat;

import java.sql.Connection;
import org.junit.jupiter.api.Test;

/** The concurrency audit replays transitions as they committed, so it cannot under-count. */
class LimitsTest {
  private static final String INPUT = "{\"provisioner\": \"script\", \"command\": [\"true\"]}";

  private static long enqueue() {
    return ((Number) Sql.value("SELECT id FROM oneshot.enqueue('{}', ?::jsonb)", INPUT))
        .longValue();
  }

  private static void event(Connection c, long build, String from, String to) throws Exception {
    Sql.rows(
        c,
        "INSERT INTO oneshot.build_events (build_id, attempt, from_status, to_status, reason)"
            + " VALUES (?, 1, ?, ?, 'test')",
        build,
        from,
        to);
  }

  /**
   * Build x's end is written first but commits last; build y is claimed in between. Both were live
   * at once from y's commit to x's: ordered by when each statement ran, the replay would see x end
   * before y starts and count one.
   */
  @Test
  void aTransitionIsCountedWhenItCommitsNotWhenItWasWritten() throws Exception {
    new StoreFixture("routes: [{name: r}]").close();
    long x = enqueue();
    long y = enqueue();
    Limits.track();
    assertThat(Limits.tracking()).isTrue();
    try (Connection c = Sql.connect()) {
      event(c, x, "pending", "launching");
    }
    try (Connection ending = Sql.connect();
        Connection claiming = Sql.connect()) {
      ending.setAutoCommit(false);
      event(ending, x, "launching", "failed");
      event(claiming, y, "pending", "launching");
      ending.commit();
    }
    assertThat(Limits.maxConcurrency().get("global")).isEqualTo(2);

    // Untracked, an event's transaction takes no lock and writes nothing of the audit's.
    Limits.untrack();
    try (Connection c = Sql.connect()) {
      event(c, y, "launching", "failed");
    }
    assertThat(Limits.tracking()).isFalse();
    assertThat(Sql.count("SELECT count(*) FROM pg_namespace WHERE nspname = 'oneshot_audit'"))
        .isZero();
  }
}
