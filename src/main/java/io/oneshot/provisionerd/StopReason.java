package io.oneshot.provisionerd;

import io.oneshot.build.BuildState;

/** Why provisionerd stops a provisioner before it finished by itself. */
enum StopReason {
  /** Someone canceled the build; it ends {@code canceled}. */
  CANCELED(BuildState.CANCELED),
  /** The route's timeout passed; the build ends {@code failed}. */
  TIMED_OUT(BuildState.FAILED),
  /**
   * provisionerd's JVM is shutting down (SIGINT, SIGHUP; SIGTERM only where it cannot be handled as
   * a drain); the build ends canceled.
   */
  TERMINATED(BuildState.CANCELED),
  /**
   * No heartbeat was accepted for the lease: the dispatcher may soon take this attempt for lost, so
   * the provisioner stops before it could; the build ends {@code failed}.
   */
  LEASE_EXPIRED(BuildState.FAILED),
  /** The build ended elsewhere (failed as hung, canceled while launching): stop, report nothing. */
  LOST(null);

  final BuildState outcome;

  StopReason(BuildState outcome) {
    this.outcome = outcome;
  }
}
