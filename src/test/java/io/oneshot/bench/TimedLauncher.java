package io.oneshot.bench;

import io.oneshot.launch.Attempt;
import io.oneshot.launch.AttemptEvents;
import io.oneshot.launch.AttemptRef;
import io.oneshot.launch.AttemptState;
import io.oneshot.launch.LaunchOutcome;
import io.oneshot.launch.Launcher;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/** Any launcher, noting when the dispatcher first called it for each build (wall clock). */
final class TimedLauncher implements Launcher {
  final Map<Long, Instant> called = new ConcurrentHashMap<>();
  private final Launcher inner;

  TimedLauncher(Launcher inner) {
    this.inner = inner;
  }

  @Override
  public String kind() {
    return inner.kind();
  }

  @Override
  public LaunchOutcome launch(Attempt a) {
    called.putIfAbsent(a.buildId(), Instant.now());
    return inner.launch(a);
  }

  @Override
  public AttemptState inspect(AttemptRef ref) {
    return inner.inspect(ref);
  }

  @Override
  public void kill(AttemptRef ref, Duration grace, String reason) {
    inner.kill(ref, grace, reason);
  }

  @Override
  public List<AttemptRef> attempts() {
    return inner.attempts();
  }

  @Override
  public void events(AttemptEvents events) {
    inner.events(events);
  }

  @Override
  public void start() {
    inner.start();
  }

  @Override
  public boolean keepsEndedAttempts() {
    return inner.keepsEndedAttempts();
  }

  @Override
  public void close() {
    inner.close();
  }
}
