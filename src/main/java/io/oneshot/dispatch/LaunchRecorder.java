package io.oneshot.dispatch;

import io.oneshot.build.AttemptStore.Launch;
import io.oneshot.build.BuildStore;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Records confirmed launches by group commit: the first launch to arrive is written at once; those
 * that arrive while a write is under way wait for it and go together in the next one (one
 * statement, one commit). At low load each launch is written alone, as soon as it is known; in a
 * burst, thousands of launches cost a few commits instead of thousands.
 */
final class LaunchRecorder {
  /** Most launches written by one statement. */
  static final int MAX_BATCH = 1_000;

  private record Waiting(Launch launch, Promise<Optional<Double>> result) {}

  private final BuildStore store;
  private final ArrayDeque<Waiting> queue = new ArrayDeque<>();
  private boolean writing;

  LaunchRecorder(BuildStore store) {
    this.store = store;
  }

  /**
   * Records the launch; completes with the seconds from enqueue to launch, or empty when the
   * attempt is no longer current, or fails when the write failed.
   */
  Future<Optional<Double>> record(Launch launch) {
    Promise<Optional<Double>> f = Promise.promise();
    synchronized (this) {
      queue.add(new Waiting(launch, f));
    }
    writeNext();
    return f.future();
  }

  private void writeNext() {
    List<Waiting> batch;
    synchronized (this) {
      if (writing || queue.isEmpty()) {
        return;
      }
      writing = true;
      batch = new ArrayList<>(Math.min(queue.size(), MAX_BATCH));
      while (batch.size() < MAX_BATCH && !queue.isEmpty()) {
        batch.add(queue.poll());
      }
    }
    List<Launch> launches = new ArrayList<>(batch.size());
    batch.forEach(w -> launches.add(w.launch()));
    // compose: a write that throws instead of failing its future ends the same way.
    Future.succeededFuture()
        .compose(v -> store.attempts().markLaunched(launches))
        .onComplete(
            ar -> {
              synchronized (this) {
                writing = false;
              }
              if (ar.succeeded()) {
                Map<Long, Double> done = ar.result();
                for (Waiting w : batch) {
                  w.result().complete(Optional.ofNullable(done.get(w.launch().id())));
                }
              } else {
                batch.forEach(w -> w.result().fail(ar.cause()));
              }
              writeNext();
            });
  }
}
