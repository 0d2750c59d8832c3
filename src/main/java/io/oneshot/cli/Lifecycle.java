package io.oneshot.cli;

import java.util.concurrent.CountDownLatch;

/** Keeps a long-running command alive until SIGTERM or Ctrl-C, then stops it once, cleanly. */
final class Lifecycle {
  private Lifecycle() {}

  static void runUntilSignal(Runnable stop) throws InterruptedException {
    CountDownLatch stopped = new CountDownLatch(1);
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  try {
                    stop.run();
                  } finally {
                    stopped.countDown();
                  }
                },
                "oneshot-shutdown"));
    stopped.await();
  }
}
