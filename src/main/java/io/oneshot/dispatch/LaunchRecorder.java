package io.oneshot.dispatch;

import io.oneshot.build.AttemptStore;
import io.oneshot.build.AttemptStore.Launch;
import io.oneshot.build.BuildStore;
import io.vertx.core.Future;
import io.vertx.core.Promise;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * Records confirmed launches by group commit: the first launch to arrive is written at once; those
 * that arrive while a write is under way wait for it and go together in the next one (one
 * statement, one commit). At low load each launch is written alone, as soon as it is known; in a
 * burst, thousands of launches cost a few commits instead of thousands. A write holds its builds'
 * rows only FOR KEY SHARE, which a runner's calls neither wait for nor hold up, and never waits for
 * a build's row that another transaction holds FOR UPDATE (a cancel or a requeue under way): such a
 * launch goes into the next write, at once when the write recorded others, after {@link
 * #HELD_PAUSE} when every launch it had was held.
 */
final class LaunchRecorder {
  /** Most launches written by one statement. */
  static final int MAX_BATCH = 1_000;

  private record Waiting(Launch launch, Promise<Optional<Double>> result) {}

  /** The wait before writing again launches whose rows were all held: about one commit. */
  static final Duration HELD_PAUSE = Duration.ofMillis(2);

  private final BuildStore store;
  private final ScheduledExecutorService later;
  private final ArrayDeque<Waiting> queue = new ArrayDeque<>();
  private boolean writing;

  LaunchRecorder(BuildStore store, ScheduledExecutorService later) {
    this.store = store;
    this.later = later;
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
              boolean progress = true;
              if (ar.succeeded()) {
                AttemptStore.Marked done = ar.result();
                List<Waiting> again = new ArrayList<>();
                for (Waiting w : batch) {
                  long id = w.launch().id();
                  if (done.held().contains(id)) {
                    again.add(w);
                  } else {
                    w.result().complete(Optional.ofNullable(done.recorded().get(id)));
                  }
                }
                progress = again.size() < batch.size();
                synchronized (this) {
                  for (int i = again.size() - 1; i >= 0; i--) {
                    queue.addFirst(again.get(i));
                  }
                }
              } else {
                batch.forEach(w -> w.result().fail(ar.cause()));
              }
              if (progress) {
                writeNext();
              } else {
                later.schedule(this::writeNext, HELD_PAUSE.toNanos(), TimeUnit.NANOSECONDS);
              }
            });
  }
}
