package io.oneshot.launch;

import java.time.Duration;

/** What {@link Launcher#launch} did. The dispatcher switches on it. */
public sealed interface LaunchOutcome {

  /** The attempt was started. {@code detail} says where, for the build's timeline. */
  record Launched(String namespace, String detail) implements LaunchOutcome {}

  /** An attempt of that name already existed (a resent request, a restart): nothing to do. */
  record AlreadyLaunched(String namespace, String detail) implements LaunchOutcome {}

  /** The attempt can never start as asked (invalid template, missing program): fail the build. */
  record Rejected(String reason) implements LaunchOutcome {}

  /** A passing failure (quota, throttling, an unreachable API): try again after {@code delay}. */
  record RetryLater(Duration delay, String reason) implements LaunchOutcome {}
}
