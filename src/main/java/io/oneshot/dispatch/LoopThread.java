package io.oneshot.dispatch;

/**
 * A loop on a daemon thread of its own, woken on demand ({@link Wakeup}): the dispatcher's claim
 * cycles and the rescuer's ticks. Started once; {@link #close} ends the loop after the pass in hand
 * and waits up to ten seconds for it.
 */
public final class LoopThread implements AutoCloseable {
  private final String name;
  private final Wakeup wakeup = new Wakeup();
  private volatile boolean running;
  private Thread thread;

  public LoopThread(String name) {
    this.name = name;
  }

  /**
   * Runs {@code loop} on the thread, unless it runs already; {@code loop} checks {@link #running}.
   */
  public synchronized void start(Runnable loop) {
    if (running) {
      return;
    }
    running = true;
    thread = Thread.ofPlatform().name(name).daemon().start(loop);
  }

  public boolean running() {
    return running;
  }

  /** Asks for one more pass; wakes that arrive during a pass fold into one. */
  public void wake() {
    wakeup.wake();
  }

  /** Waits for a wake or {@code timeoutMs}; true when woken. */
  public boolean await(long timeoutMs) throws InterruptedException {
    return wakeup.await(timeoutMs);
  }

  @Override
  public void close() {
    Thread t;
    synchronized (this) {
      running = false;
      t = thread;
    }
    wake();
    if (t != null) {
      try {
        t.join(10_000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }
}
