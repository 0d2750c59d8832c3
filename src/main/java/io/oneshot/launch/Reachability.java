package io.oneshot.launch;

import java.time.Instant;

/**
 * Whether a launcher's platform API answered its latest call: {@code detail} says what failed when
 * it did not ("cannot reach the Kubernetes API at https://…: connection refused"), {@code since}
 * when the current state began. Shown by {@code /readyz} and exported as a gauge.
 */
public record Reachability(boolean reachable, String detail, Instant since) {}
