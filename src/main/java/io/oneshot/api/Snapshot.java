package io.oneshot.api;

import io.vertx.core.Future;
import java.time.Duration;
import java.util.function.Supplier;

/**
 * A read shared by everyone who asks within {@code maxAge} of its start: callers meanwhile get the
 * same answer, or wait for the same query, instead of each running it. A failed read is not kept.
 * For status views polled by dashboards and operators, where a second-old answer is as good as a
 * new one and a query per poll competes with the builds for the database.
 */
final class Snapshot<T> {
  private final Supplier<Future<T>> load;
  private final long maxAgeNanos;
  private Future<T> current;
  private long startedAt;

  Snapshot(Supplier<Future<T>> load, Duration maxAge) {
    this.load = load;
    this.maxAgeNanos = maxAge.toNanos();
  }

  synchronized Future<T> get() {
    long now = System.nanoTime();
    if (current != null
        && (!current.isComplete() || current.succeeded() && now - startedAt < maxAgeNanos)) {
      return current;
    }
    startedAt = now;
    current = load.get();
    return current;
  }

  /**
   * Forgets what was read: the next {@link #get} reads again (after a change this replica made).
   */
  synchronized void invalidate() {
    current = null;
  }
}
