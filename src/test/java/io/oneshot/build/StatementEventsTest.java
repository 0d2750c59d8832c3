package io.oneshot.build;

import static org.assertj.core.api.Assertions.assertThat;

import io.oneshot.testing.Sql;
import io.oneshot.testing.StoreFixture;
import java.sql.Connection;
import java.sql.Statement;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The claim and the runners' acquires and completions written together write their own timeline
 * rows instead of the transition's trigger (db/013_statement_events.sql): one row a transition, as
 * the trigger writes it, and the trigger's exemption ends with their transaction.
 */
class StatementEventsTest {
  private final StoreFixture f = new StoreFixture("routes: [{name: a, maxConcurrent: 20}]");

  @AfterEach
  void tearDown() {
    f.close();
  }

  private static RunnerStore.CompleteCall complete(
      QueueStore.Claimed c,
      String runnerId,
      BuildState outcome,
      int exitCode,
      String error,
      String reason) {
    return new RunnerStore.CompleteCall(
        c.token().hash(),
        runnerId,
        new RunnerStore.Completion(outcome, exitCode, error, null, reason, null));
  }

  /** The build's timeline: from, to and reason of each status change, in order. */
  private static List<List<String>> timeline(long id) {
    return Sql.rows(
            "SELECT coalesce(from_status, '-') AS f, to_status AS t, reason AS r"
                + " FROM oneshot.build_events WHERE build_id = ?"
                + " AND from_status IS DISTINCT FROM to_status ORDER BY id",
            id)
        .stream()
        .map(r -> List.of((String) r.get("f"), (String) r.get("t"), (String) r.get("r")))
        .toList();
  }

  @Test
  void eachTransitionOfABatchIsOnTheTimelineOnceWithTheReasonTheBuildGot() {
    List<QueueStore.Claimed> c = f.claimedNoops(3);
    Runner r0 = new Runner("r0", null, null, "host", 1L);
    Runner r1 = new Runner("r1", null, null, "host", 1L);
    Database.await(
        f.store
            .runner()
            .acquireTogether(
                List.of(
                    new RunnerStore.AcquireCall(c.get(0).token().hash(), r0),
                    new RunnerStore.AcquireCall(c.get(1).token().hash(), r1))));
    List<Optional<RunnerStore.Completed>> done =
        Database.await(
            f.store
                .runner()
                .completeTogether(
                    List.of(
                        complete(c.get(0), "r0", BuildState.SUCCEEDED, 0, null, "it went well"),
                        complete(c.get(1), "r1", BuildState.FAILED, 2, "boom", "it went badly"))));
    assertThat(done).allMatch(Optional::isPresent);

    String enqueued =
        (String)
            Sql.value(
                "SELECT reason FROM oneshot.build_events WHERE build_id = ? AND from_status IS NULL",
                c.get(0).id());
    assertThat(timeline(c.get(0).id()))
        .containsExactly(
            List.of("-", "pending", enqueued),
            List.of("pending", "launching", "claimed by the dispatcher"),
            List.of("launching", "running", "acquired by provisionerd"),
            List.of("running", "succeeded", "it went well"));
    assertThat(timeline(c.get(1).id()))
        .containsExactly(
            List.of("-", "pending", enqueued),
            List.of("pending", "launching", "claimed by the dispatcher"),
            List.of("launching", "running", "acquired by provisionerd"),
            List.of("running", "failed", "it went badly"));
    // Each timeline's last reason is the one the build's row has.
    for (int i = 0; i < 3; i++) {
      List<List<String>> t = timeline(c.get(i).id());
      assertThat(t.getLast().get(2))
          .isEqualTo(Sql.value("SELECT reason FROM oneshot.builds WHERE id = ?", c.get(i).id()));
    }
  }

  /**
   * Each statement's exemption from the trigger lasts to the end of its transaction: a status
   * change made next on the same connection, as a pooled connection makes it, is recorded by the
   * trigger.
   */
  @Test
  void aChangeMadeOnTheSameConnectionAfterwardsIsStillRecorded() throws Exception {
    List<QueueStore.Claimed> c = f.claimedNoops(3);
    f.enqueueNoops(1);
    String hex = Sql.bytea(c.get(0).token().hash());
    String other = Sql.bytea(c.get(1).token().hash());
    try (Connection conn = Sql.connect();
        Statement s = conn.createStatement()) {
      s.execute(
          "PREPARE claim AS " + io.oneshot.build.Sql.load("queue/claim").with(Map.of("batch", 1)));
      s.execute("PREPARE acquire AS " + io.oneshot.build.Sql.load("runner/acquire-many").text());
      s.execute("PREPARE complete AS " + io.oneshot.build.Sql.load("runner/complete-many").text());

      // The claim, in a transaction of its own as the dispatcher runs it; then a change by hand.
      s.execute(QueueStore.CLAIM_BEGIN);
      s.execute(
          "EXECUTE claim(100, ARRAY[" + Sql.bytea(BuildToken.generate().hash()) + "], 'test')");
      s.execute("COMMIT");
      long fourth =
          ((Number) Sql.value("SELECT max(id) FROM oneshot.builds WHERE status = 'launching'"))
              .longValue();
      s.execute(
          "UPDATE oneshot.builds SET status = 'failed', finished_at = now() WHERE id = " + fourth);
      assertThat(Sql.transitions(fourth)).endsWith("launching>failed");

      // An acquire written together (a transaction of its own); then a change by hand.
      s.execute(
          "EXECUTE acquire(ARRAY["
              + hex
              + "], ARRAY['r0'], ARRAY['{}'], '1s', ARRAY[NULL::bigint],"
              + " ARRAY[NULL::int])");
      s.execute(
          "UPDATE oneshot.builds SET status = 'failed', finished_at = now() WHERE id = "
              + c.get(2).id());
      assertThat(Sql.transitions(c.get(2).id())).endsWith("launching>failed");

      // A completion written together; then a change by hand.
      s.execute(
          "EXECUTE acquire(ARRAY["
              + other
              + "], ARRAY['r1'], ARRAY['{}'], '1s', ARRAY[NULL::bigint], ARRAY[NULL::int])");
      s.execute(
          "EXECUTE complete(ARRAY["
              + hex
              + "], ARRAY['succeeded'], ARRAY[0], ARRAY[NULL], ARRAY['{}'], ARRAY['done'],"
              + " ARRAY['r0'], '1s', ARRAY[NULL])");
      assertThat(Sql.transitions(c.get(0).id())).endsWith("running>succeeded");
      s.execute(
          "UPDATE oneshot.builds SET status = 'failed', finished_at = now() WHERE id = "
              + c.get(1).id());
      assertThat(Sql.transitions(c.get(1).id())).endsWith("running>failed");
    }
  }
}
