package io.oneshot.launch.kubernetes;

import io.fabric8.kubernetes.client.informers.SharedIndexInformer;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/** What the launcher's informers share. */
final class Informers {
  private Informers() {}

  /** How long a close waits for its informers to stop, at most. */
  static final Duration STOP_WAIT = Duration.ofSeconds(5);

  /**
   * Waits until the informers stopped (or {@link #STOP_WAIT} passed): the client they list and
   * watch with is closed next, and an informer still relisting then fails in a thread of its own
   * with the client closed under it.
   */
  static void awaitStopped(List<? extends SharedIndexInformer<?>> informers) {
    long deadline = System.nanoTime() + STOP_WAIT.toNanos();
    for (SharedIndexInformer<?> inf : informers) {
      try {
        inf.stopped()
            .toCompletableFuture()
            .get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return;
      } catch (ExecutionException | TimeoutException e) {
        // stopped by an error of its own, or still stopping: nothing more to wait for
      }
    }
  }
}
