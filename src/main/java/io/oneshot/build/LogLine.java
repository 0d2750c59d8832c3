package io.oneshot.build;

import java.time.Instant;

/** One line of a build's log. {@code seq} orders the lines of one build and is never reused. */
public record LogLine(
    long seq, Instant ts, int attempt, String stream, String level, String stage, String text) {

  public static final String STDOUT = "stdout";
  public static final String STDERR = "stderr";
  public static final String SYSTEM = "system";
}
