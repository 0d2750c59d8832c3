package io.oneshot.server;

import io.oneshot.api.Metrics;
import io.oneshot.build.BuildStore;
import io.oneshot.dispatch.Rescuer;
import io.oneshot.launch.AttemptEvents;
import io.oneshot.launch.AttemptRef;
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

  @Override
  public void note(AttemptRef ref, Note note) {
    store
        .systemLog(ref.buildId(), ref.attempt(), note.level(), note.text())
        .onSuccess(
            route ->
                log.info(
                    "Build {} (route {}, attempt {}): {} ({}).",
                    ref.buildId(),
                    route.orElse("-"),
                    ref.attempt(),
                    note.text(),
                    ref))
        .onFailure(
            e ->
                log.info(
                    "Build {} (attempt {}): {} ({}); not in its log: {}",
                    ref.buildId(),
                    ref.attempt(),
                    note.text(),
                    ref,
                    e.toString()));
    if (note.milestone()) {
      store
          .milestone(ref.buildId(), ref.attempt(), note.text())
          .onFailure(
              e -> log.debug("Build {}: cannot mark a step: {}", ref.buildId(), e.toString()));
    }
  }

  @Override
  public void runsIn(AttemptRef ref, String where) {
    store
        .runsIn(ref.buildId(), ref.attempt(), where)
        .onFailure(
            e -> log.debug("Build {}: cannot record its pod: {}", ref.buildId(), e.toString()));
  }
}
