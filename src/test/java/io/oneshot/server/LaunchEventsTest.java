package io.oneshot.server;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.oneshot.build.QueueStore;
import io.oneshot.launch.AttemptEvents.Note;
import io.oneshot.launch.AttemptRef;
import io.oneshot.testing.Sql;
import io.oneshot.testing.StoreFixture;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * What a launcher says of an attempt reaches the build's log and timeline in the order it said it.
 */
class LaunchEventsTest {
  private StoreFixture f;

  @AfterEach
  void tearDown() {
    if (f != null) {
      f.close();
    }
  }

  @Test
  void notesHeardInARowAreLoggedAndTimedInThatOrder() {
    f = new StoreFixture("routes: [{name: a}]");
    f.enqueueNoops(1);
    QueueStore.Claimed c = f.claim(1, 1, "test").get(0);
    AttemptRef ref = new AttemptRef(c.id(), c.attempt(), c.launchName(), null);
    LaunchEvents events = new LaunchEvents(f.store, null, null);

    int n = 60;
    // As an informer delivers them: one thread, back to back, each a log line and a milestone.
    IntStream.range(0, n).forEach(i -> events.note(ref, Note.milestone("step " + i)));

    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(
            () ->
                Sql.count(
                        "SELECT count(*) FROM oneshot.build_events WHERE build_id = ?"
                            + " AND reason LIKE 'step %'",
                        c.id())
                    == n);
    List<String> expected = IntStream.range(0, n).mapToObj(i -> "step " + i).toList();
    assertThat(
            Sql.rows("SELECT text FROM oneshot.build_logs WHERE build_id = ? ORDER BY seq", c.id())
                .stream()
                .map(r -> (String) r.get("text"))
                .toList())
        .isEqualTo(expected);
    assertThat(
            Sql.rows(
                    "SELECT reason FROM oneshot.build_events WHERE build_id = ?"
                        + " AND reason LIKE 'step %' ORDER BY id",
                    c.id())
                .stream()
                .map(r -> (String) r.get("reason"))
                .toList())
        .isEqualTo(expected);
  }

  /**
   * A note on what an attempt waits for (a pod no node can take) is the build's reason while it is
   * launching, for builds show, the console and the API; once the build runs, such a note is a line
   * in its log only, and the reason stays what the runner's acquire made it.
   */
  @Test
  void aWaitNoteIsTheReasonOfALaunchingBuildOnly() {
    f = new StoreFixture("routes: [{name: a}]");
    f.enqueueNoops(2);
    List<QueueStore.Claimed> c = f.claim(2, 2, "test");
    LaunchEvents events = new LaunchEvents(f.store, null, null);
    AttemptRef launching =
        new AttemptRef(c.get(0).id(), c.get(0).attempt(), c.get(0).launchName(), null);
    AttemptRef running =
        new AttemptRef(c.get(1).id(), c.get(1).attempt(), c.get(1).launchName(), null);
    Sql.exec(
        "UPDATE oneshot.builds SET status = 'running', started_at = now(), runner_id = 'r',"
            + " reason = 'acquired'"
            + " WHERE id = ?",
        running.buildId());
    String why = "pod x cannot be scheduled yet: Unschedulable: 0/1 nodes are available";
    events.note(launching, Note.warn(why).asWaitReason());
    events.note(running, Note.warn(why).asWaitReason());
    events.note(launching, Note.warn("said, but not a reason"));
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(
            () ->
                Sql.count(
                        "SELECT count(*) FROM oneshot.build_logs WHERE build_id IN (?, ?)",
                        launching.buildId(),
                        running.buildId())
                    == 3);
    assertThat(Sql.value("SELECT reason FROM oneshot.builds WHERE id = ?", launching.buildId()))
        .isEqualTo(why);
    assertThat(Sql.value("SELECT reason FROM oneshot.builds WHERE id = ?", running.buildId()))
        .isEqualTo("acquired");
  }
}
