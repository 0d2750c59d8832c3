package io.oneshot.launch;

/** What became of an attempt, as its launcher sees it. */
public sealed interface AttemptState {

  /**
   * Started and not ended (for Kubernetes: the Job exists and has not finished). {@code stuck},
   * when set, says why it cannot start in a way another attempt would not change either (a pod no
   * node can take, an image the node cannot have): at the launch timeout the build fails with it
   * instead of being launched again.
   */
  record Running(String detail, String stuck) implements AttemptState {
    public Running(String detail) {
      this(detail, null);
    }
  }

  /**
   * Ended; {@code exitCode} is null when unknown. {@code detail} says what is known of why. {@code
   * nothingRuns}: the platform vouches that no process of the attempt runs any more (the kubelet
   * reported every container of its pods terminated), so the build can be settled at once instead
   * of after its runner's lease.
   */
  record Exited(Integer exitCode, String detail, boolean nothingRuns) implements AttemptState {
    public Exited(Integer exitCode, String detail) {
      this(exitCode, detail, false);
    }
  }

  /** No such attempt, or it is gone without a trace of how it ended. */
  record Missing(String detail) implements AttemptState {}
}
