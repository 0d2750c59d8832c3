package io.oneshot.server;

import io.oneshot.api.Metrics;
import io.oneshot.build.BuildStore;
import io.oneshot.dispatch.Rescuer;
import io.oneshot.launch.AttemptEvents;
import io.oneshot.launch.AttemptRef;
import io.vertx.core.Future;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Where a launcher's news goes: a changed attempt wakes the rescuer; a note becomes a system line
 * in the build's log (and a step in its timeline when it is a milestone); the pod an attempt runs
 * in is recorded on the build. Called from the launcher's own threads; never blocks.
 */
final class LaunchEvents implements AttemptEvents {
  private static final Logger log = LoggerFactory.getLogger(LaunchEvents.class);

  private final BuildStore store;
  private final Rescuer rescuer;
  private final Metrics metrics;

  /** Per build, the last note still being written; the next one waits for it. */
  private final Map<Long, Future<Void>> pending = new ConcurrentHashMap<>();

  LaunchEvents(BuildStore store, Rescuer rescuer, Metrics metrics) {
    this.store = store;
    this.rescuer = rescuer;
    this.metrics = metrics;
  }

  @Override
  public void apiCall(String verb, int code) {
    metrics.kubernetes(verb, code);
  }

  @Override
  public void changed(AttemptRef ref) {
    rescuer.wake();
  }

  /**
   * Writes a build's notes one after the other, in the order the launcher gave them: two pod events
   * heard in a row ("scheduled", then "started") must not reach the log and the timeline swapped
   * because their statements ran on two connections.
   */
  @Override
  public void note(AttemptRef ref, Note note) {
    Future<Void> written =
        pending.compute(
            ref.buildId(),
            (id, before) -> (before == null ? done() : before).compose(x -> write(ref, note)));
    written.onComplete(x -> pending.remove(ref.buildId(), written));
  }

  private static Future<Void> done() {
    return Future.succeededFuture();
  }

  private Future<Void> write(AttemptRef ref, Note note) {
    Future<Void> line =
        store
            .attempts()
            .systemLog(ref.buildId(), ref.attempt(), note.level(), note.text(), note.waitReason())
            .onSuccess(
                route -> {
                  log.info(
                      "Build {} (route {}, attempt {}): {} ({}).",
                      ref.buildId(),
                      route.orElse("-"),
                      ref.attempt(),
                      note.text(),
                      ref);
                  if (note.trouble() != null && route.isPresent()) {
                    metrics.trouble(route.get(), note.trouble());
                  }
                })
            .transform(
                r -> {
                  if (r.failed()) {
                    log.info(
                        "Build {} (attempt {}): {} ({}); not in its log: {}",
                        ref.buildId(),
                        ref.attempt(),
                        note.text(),
                        ref,
                        r.cause().toString());
                  }
                  return done();
                });
    if (!note.milestone()) {
      return line;
    }
    return line.compose(
        x ->
            store
                .attempts()
                .milestone(ref.buildId(), ref.attempt(), note.text())
                .transform(
                    r -> {
                      if (r.failed()) {
                        log.debug(
                            "Build {}: cannot mark a step: {}",
                            ref.buildId(),
                            r.cause().toString());
                      }
                      return done();
                    }));
  }

  @Override
  public void runsIn(AttemptRef ref, String where) {
    store
        .attempts()
        .runsIn(ref.buildId(), ref.attempt(), where)
        .onFailure(
            e -> log.debug("Build {}: cannot record its pod: {}", ref.buildId(), e.toString()));
  }
}
