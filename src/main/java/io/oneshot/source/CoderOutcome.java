package io.oneshot.source;

import io.oneshot.build.BuildState;
import java.time.OffsetDateTime;
import java.util.List;
import java.util.Optional;

/**
 * What became of the Coder job a daemon took, as Coder's own tables say: a Coder build's outcome is
 * its job's, never the daemon's exit code ({@code coder provisioner start} exits 0 after SIGTERM or
 * SIGINT whatever became of its job: enterprise/cli/provisionerdaemonstart.go, the end of the
 * command's handler).
 *
 * <p>Which job: {@code provisioner_jobs.worker_id} is the id of the daemon's {@code
 * provisioner_daemons} row (coderd/database/queries/provisionerjobs.sql, AcquireProvisionerJob sets
 * it; provisionerdaemons.sql, UpsertProvisionerDaemon makes the row as the daemon connects), and
 * oneshot names each daemon after its attempt. How it ended: {@code job_status}, generated from
 * completed_at, error, canceled_at and started_at (coderd/database/dump.sql).
 *
 * @param job Coder's job id
 * @param outcome the build's outcome: succeeded, failed or canceled
 * @param reason what the build says of it, with Coder's error text
 * @param spentOnCanceled the job was canceled while queued, then taken: Coder's acquire hands out
 *     such jobs ({@code started_at IS NULL} is all it checks), and the daemon spent itself on it
 */
public record CoderOutcome(String job, BuildState outcome, String reason, boolean spentOnCanceled) {

  /** Canceled before any daemon took it: the cancel came before (or with) the acquire. */
  private static boolean spent(Job j) {
    return j.canceledAt() != null
        && (j.startedAt() == null || !j.canceledAt().isAfter(j.startedAt()));
  }

  /**
   * Coder's rule for a daemon's name (enterprise/cli/provisionerdaemonstart.go,
   * validateProvisionerDaemonName).
   */
  private static final java.util.regex.Pattern DAEMON_NAME =
      java.util.regex.Pattern.compile("^[a-zA-Z0-9][a-zA-Z0-9-]{0,61}[a-zA-Z0-9]$");

  /**
   * The name of the daemon an attempt starts ({@code --name}): the attempt's, so that Coder's list
   * of daemons names the build, and Coder's {@code provisioner_daemons} row says which job it took.
   */
  public static String daemonName(long buildId, int attempt) {
    String name = "oneshot-" + buildId + "-" + attempt;
    return DAEMON_NAME.matcher(name).matches() ? name : "oneshot-" + buildId;
  }

  /** One row of Coder's jobs, as {@link QueueSource#CODER_JOBS_OF} reads them. */
  public record Job(
      String id,
      String status,
      String error,
      OffsetDateTime startedAt,
      OffsetDateTime canceledAt) {}

  /**
   * The outcome of the job {@code daemon} ran, from Coder's rows for it (oldest first); empty when
   * it took none (the build then ends as its provisionerd says: no job within the idle timeout,
   * say). A daemon that first took jobs canceled while queued (each ends at once) may take a live
   * one before its stop signal reaches it: the live job is its outcome, and the canceled ones are
   * said; only jobs canceled while queued make a canceled build.
   */
  public static Optional<CoderOutcome> of(String daemon, List<Job> jobs) {
    if (jobs.isEmpty()) {
      return Optional.empty();
    }
    Job j = jobs.stream().filter(x -> !spent(x)).findFirst().orElse(jobs.get(0));
    String more =
        jobs.size() == 1
            ? ""
            : " (daemon "
                + daemon
                + " took "
                + jobs.size()
                + " jobs: "
                + String.join(", ", jobs.stream().map(Job::id).toList())
                + ")";
    String error = j.error() == null || j.error().isEmpty() ? null : j.error();
    if (spent(j)) {
      return Optional.of(
          new CoderOutcome(
              j.id(),
              BuildState.CANCELED,
              "Coder's job "
                  + j.id()
                  + " was canceled in Coder before any daemon took it; Coder's acquire still hands"
                  + " such a job out, and daemon "
                  + daemon
                  + " spent itself on it"
                  + more,
              true));
    }
    if (j.canceledAt() != null) {
      // Canceled while it ran: the daemon cancels the provision and reports its error, so that
      // Coder says failed (job_status); the user asked for a cancel.
      return Optional.of(
          new CoderOutcome(
              j.id(),
              BuildState.CANCELED,
              "Coder's job "
                  + j.id()
                  + " was canceled in Coder"
                  + (error == null ? "" : ": " + error)
                  + more,
              false));
    }
    return Optional.of(
        switch (j.status()) {
          case "succeeded" ->
              new CoderOutcome(
                  j.id(),
                  BuildState.SUCCEEDED,
                  "Coder's job " + j.id() + " succeeded" + more,
                  false);
          case "failed" ->
              new CoderOutcome(
                  j.id(),
                  BuildState.FAILED,
                  "Coder's job "
                      + j.id()
                      + " failed: "
                      + (error == null ? "(no error text)" : error)
                      + more,
                  false);
          default ->
              new CoderOutcome(
                  j.id(),
                  BuildState.FAILED,
                  "daemon "
                      + daemon
                      + " exited while Coder's job "
                      + j.id()
                      + " is still "
                      + j.status()
                      + ": Coder fails it once it finds the job hung"
                      + more,
                  false);
        });
  }
}
