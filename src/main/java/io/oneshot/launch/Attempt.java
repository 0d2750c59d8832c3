package io.oneshot.launch;

import io.oneshot.build.BuildToken;
import io.oneshot.config.OneshotConfig;

/**
 * One attempt to launch: which build, which try, under which deterministic name, on which route,
 * with which runner token, reporting to which API URL, and the build's own pod settings ({@code
 * pod}: input.pod as its enqueue let it through, JSON; null when it asked for none).
 */
public record Attempt(
    long buildId,
    int attempt,
    String name,
    OneshotConfig.Route route,
    BuildToken token,
    String apiUrl,
    String pod) {

  /** An attempt of a build that asked for no pod settings of its own. */
  public Attempt(
      long buildId,
      int attempt,
      String name,
      OneshotConfig.Route route,
      BuildToken token,
      String apiUrl) {
    this(buildId, attempt, name, route, token, apiUrl, null);
  }

  public AttemptRef ref() {
    return new AttemptRef(buildId, attempt, name, null);
  }

  /** The deterministic name of an attempt: {@code oneshot-<build>-<attempt>}. */
  public static String nameOf(long buildId, int attempt) {
    return "oneshot-" + buildId + "-" + attempt;
  }
}
