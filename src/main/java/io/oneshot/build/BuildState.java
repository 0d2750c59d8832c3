package io.oneshot.build;

import java.util.EnumSet;
import java.util.Locale;
import java.util.Set;

/**
 * The states of a build and the transitions between them. The same machine is written down in
 * {@code db/001_queue.sql} (the {@code status} CHECK and {@code oneshot.build_transitions}, which a
 * trigger enforces) and in {@code docs/state-machine.md}; a test keeps the three in agreement.
 *
 * <pre>
 * pending ──claim──▶ launching ──provisionerd acquires──▶ running ──▶ succeeded | failed | canceled
 *    ▲                   │                                    │
 *    └──requeue (infrastructure failure, attempts left) ◀─────┘
 * pending ──cancel──▶ canceled     pending ──route removed──▶ failed
 * launching ──cancel, launch rejected, attempts exhausted──▶ canceled | failed
 * </pre>
 */
public enum BuildState {
  /** Queued; waits for capacity on its route (and for earlier builds of its workspace). */
  PENDING,
  /** Claimed by the dispatcher; the launcher is starting an attempt that has not acquired yet. */
  LAUNCHING,
  /** provisionerd acquired the build and runs it. */
  RUNNING,
  /** The provisioner finished with exit code 0. Final. */
  SUCCEEDED,
  /** The build failed, or could not be run. Final. */
  FAILED,
  /** Canceled before or while it ran. Final. */
  CANCELED;

  /** The states this one may move to; none for the final states. */
  public Set<BuildState> next() {
    return switch (this) {
      case PENDING -> EnumSet.of(LAUNCHING, CANCELED, FAILED);
      case LAUNCHING -> EnumSet.of(RUNNING, PENDING, FAILED, CANCELED);
      case RUNNING -> EnumSet.of(SUCCEEDED, FAILED, CANCELED, PENDING);
      case SUCCEEDED, FAILED, CANCELED -> EnumSet.noneOf(BuildState.class);
    };
  }

  public boolean canMoveTo(BuildState to) {
    return next().contains(to);
  }

  public boolean terminal() {
    return next().isEmpty();
  }

  /** Launching or running: an attempt exists and counts against the limits. */
  public boolean live() {
    return this == LAUNCHING || this == RUNNING;
  }

  /** The name used in SQL, the API and the CLI. */
  public String wire() {
    return name().toLowerCase(Locale.ROOT);
  }

  public static BuildState ofWire(String value) {
    for (BuildState s : values()) {
      if (s.wire().equals(value)) {
        return s;
      }
    }
    throw new IllegalArgumentException("unknown build status '" + value + "'");
  }
}
