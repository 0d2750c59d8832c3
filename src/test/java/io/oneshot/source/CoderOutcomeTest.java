package io.oneshot.source;

import static org.assertj.core.api.Assertions.assertThat;

import io.oneshot.build.BuildState;
import java.time.OffsetDateTime;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * A Coder build's outcome from its job's row, as Coder's generated job_status and its timestamps
 * say (coderd/database/dump.sql; provisionerdserver.go FailJob and CompleteJob; workspacebuilds.go,
 * the cancel handler).
 */
class CoderOutcomeTest {
  private static final OffsetDateTime T = OffsetDateTime.parse("2026-12-02T10:00:00Z");

  private static CoderOutcome.Job job(
      String status, String error, Integer started, Integer canceled) {
    return new CoderOutcome.Job(
        "j1",
        status,
        error,
        started == null ? null : T.plusSeconds(started),
        canceled == null ? null : T.plusSeconds(canceled));
  }

  private static CoderOutcome of(CoderOutcome.Job... jobs) {
    return CoderOutcome.of("oneshot-7-1", List.of(jobs)).orElseThrow();
  }

  @Test
  void eachWayAJobEndsInCoderIsTheBuildsOutcome() {
    assertThat(CoderOutcome.of("oneshot-7-1", List.of())).as("no job taken").isEmpty();
    assertThat(of(job("succeeded", null, 1, null)))
        .isEqualTo(new CoderOutcome("j1", BuildState.SUCCEEDED, "Coder's job j1 succeeded", false));
    assertThat(of(job("failed", "exit status 1", 1, null)))
        .isEqualTo(
            new CoderOutcome(
                "j1", BuildState.FAILED, "Coder's job j1 failed: exit status 1", false));
    // Canceled while it ran: the daemon's FailJob leaves job_status failed.
    assertThat(of(job("failed", "context canceled", 1, 3)))
        .isEqualTo(
            new CoderOutcome(
                "j1",
                BuildState.CANCELED,
                "Coder's job j1 was canceled in Coder: context canceled",
                false));
    // Canceled while queued (completed_at set by the cancel), then taken by an acquire.
    CoderOutcome spent = of(job("canceled", null, 9, 2));
    assertThat(spent.outcome()).isEqualTo(BuildState.CANCELED);
    assertThat(spent.spentOnCanceled()).isTrue();
    assertThat(spent.reason())
        .startsWith("Coder's job j1 was canceled in Coder before any daemon took it")
        .contains("daemon oneshot-7-1 spent itself on it");
    // The daemon exited and Coder still thinks the job runs.
    assertThat(of(job("running", null, 1, null)))
        .isEqualTo(
            new CoderOutcome(
                "j1",
                BuildState.FAILED,
                "daemon oneshot-7-1 exited while Coder's job j1 is still running: Coder fails it"
                    + " once it finds the job hung",
                false));
    assertThat(
            of(
                    job("succeeded", null, 1, null),
                    new CoderOutcome.Job("j2", "succeeded", null, T.plusSeconds(6), null))
                .reason())
        .isEqualTo("Coder's job j1 succeeded (daemon oneshot-7-1 took 2 jobs: j1, j2)");
    // A canceled-while-queued job first, then a live one before the stop signal came: the live
    // job is the outcome.
    CoderOutcome live =
        of(
            job("canceled", null, 3, 2),
            new CoderOutcome.Job("j2", "succeeded", null, T.plusSeconds(4), null));
    assertThat(live.job()).isEqualTo("j2");
    assertThat(live.outcome()).isEqualTo(BuildState.SUCCEEDED);
    assertThat(live.spentOnCanceled()).isFalse();
  }
}
