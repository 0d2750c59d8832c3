package io.oneshot.launch;

import io.oneshot.build.Runner;

/** What a launcher found of who sent a runner call ({@link Launcher#prove}). */
public sealed interface RunnerProof {
  /**
   * The call comes from the runner this launcher started for {@code attempt}; {@code runner}'s id
   * is what proved it (a pod's UID, a process's pid and start), never what the caller stated.
   */
  record Proven(Runner runner, AttemptRef attempt) implements RunnerProof {}

  /** Nothing proves where the call comes from; {@code why} says what was found instead. */
  record Unproven(String why) implements RunnerProof {}

  /**
   * The call's connection closed before it could be proven (its caller gave up waiting): nothing to
   * answer, and nothing to hold against anyone.
   */
  record Vanished(String why) implements RunnerProof {}
}
