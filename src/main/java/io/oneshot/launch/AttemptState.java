package io.oneshot.launch;

/** What became of an attempt, as its launcher sees it. */
public sealed interface AttemptState {

  /** Started and not ended (for Kubernetes: the Job exists and has not finished). */
  record Running(String detail) implements AttemptState {}

  /** Ended; {@code exitCode} is null when unknown. {@code detail} says what is known of why. */
  record Exited(Integer exitCode, String detail) implements AttemptState {}

  /** No such attempt, or it is gone without a trace of how it ended. */
  record Missing(String detail) implements AttemptState {}
}
