package io.oneshot.dispatch;

/**
 * A coalescing wake signal. Any number of {@link #wake()} calls before the next {@link #await}
 * count as one: a NOTIFY burst, the poll tick and a reconnect that arrive during a cycle schedule
 * exactly one more cycle, never a queue of them.
 */
final class Wakeup {
  private boolean pending;

  synchronized void wake() {
    pending = true;
    notifyAll();
  }

  /**
   * Waits until woken or until {@code timeoutMs} pass, and consumes the wake. Returns whether it
   * was woken (false: the timeout, which is the poll).
   */
  synchronized boolean await(long timeoutMs) throws InterruptedException {
    long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
    while (!pending) {
      long left = (deadline - System.nanoTime()) / 1_000_000L;
      if (left <= 0) {
        return false;
      }
      wait(left);
    }
    pending = false;
    return true;
  }
}
