package io.oneshot.build;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Instant;
import java.util.List;
import java.util.Map;

/**
 * A build as the API and the CLI show it. {@code events} is the timeline, empty in listings.
 *
 * @param reason why the build is in its status: the reason of its last transition
 * @param stateRead the workspace state version a terraform build started from (0: none)
 * @param stateWritten the workspace state version it wrote, if any
 */
public record Build(
    long id,
    BuildState status,
    String route,
    Map<String, String> tags,
    String workspace,
    int priority,
    int attempt,
    String provisioner,
    String reason,
    Instant createdAt,
    Instant claimedAt,
    Instant launchedAt,
    Instant startedAt,
    Instant heartbeatAt,
    Instant cancelRequestedAt,
    Instant finishedAt,
    Integer exitCode,
    String error,
    JsonNode outputs,
    Launch launch,
    Integer stateRead,
    Integer stateWritten,
    List<BuildEvent> events) {

  /**
   * Where the current (or last) attempt runs; null before the first claim. For Kubernetes, {@code
   * name} is the Job and {@code pod} its pod once scheduled.
   */
  public record Launch(String kind, String name, String namespace, String pod) {}

  public Build withEvents(List<BuildEvent> timeline) {
    return new Build(
        id,
        status,
        route,
        tags,
        workspace,
        priority,
        attempt,
        provisioner,
        reason,
        createdAt,
        claimedAt,
        launchedAt,
        startedAt,
        heartbeatAt,
        cancelRequestedAt,
        finishedAt,
        exitCode,
        error,
        outputs,
        launch,
        stateRead,
        stateWritten,
        timeline);
  }
}
