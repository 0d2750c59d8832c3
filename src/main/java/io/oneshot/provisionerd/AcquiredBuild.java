package io.oneshot.provisionerd;

import com.fasterxml.jackson.databind.JsonNode;
import java.time.Duration;

/**
 * The build provisionerd acquired, as the API handed it over: its input, its route's limits, and,
 * for a terraform build with a workspace, the state it starts from ({@code stateVersion} 0 and no
 * state when the workspace has none yet).
 */
record AcquiredBuild(
    long buildId,
    int attempt,
    String route,
    String workspace,
    JsonNode input,
    Duration timeout,
    Duration cancelGrace,
    long heartbeatMs,
    Duration lease,
    int maxLineBytes,
    boolean cancelRequested,
    Integer stateVersion,
    String state) {

  static AcquiredBuild of(JsonNode a) {
    return new AcquiredBuild(
        a.path("buildId").asLong(),
        a.path("attempt").asInt(),
        a.path("route").asText(),
        a.hasNonNull("workspace") ? a.get("workspace").asText() : null,
        a.path("input"),
        Duration.ofMillis(a.path("timeoutMs").asLong(3_600_000)),
        Duration.ofMillis(a.path("cancelGraceMs").asLong(60_000)),
        a.path("heartbeatIntervalMs").asLong(1000),
        Duration.ofMillis(a.path("leaseMs").asLong(30_000)),
        a.path("maxLogLineBytes").asInt(16 * 1024),
        a.path("cancelRequested").asBoolean(false),
        a.hasNonNull("stateVersion") ? a.get("stateVersion").asInt() : null,
        a.hasNonNull("state") ? a.get("state").asText() : null);
  }
}
