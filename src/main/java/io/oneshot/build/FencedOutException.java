package io.oneshot.build;

/** A claim was refused: the claiming replica's leadership session no longer holds the lock. */
public final class FencedOutException extends RuntimeException {
  public FencedOutException(LeaderFence fence) {
    super(
        "the leadership lock is no longer held by session "
            + fence.pid()
            + " (started "
            + fence.sessionStart()
            + "); this replica does not lead");
  }
}
