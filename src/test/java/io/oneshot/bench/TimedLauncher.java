package io.oneshot.bench;

import io.oneshot.launch.Attempt;
import io.oneshot.launch.LaunchOutcome;
import io.oneshot.launch.Launcher;
import io.oneshot.testing.DelegatingLauncher;
import java.time.Instant;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/** Any launcher, noting when the dispatcher first called it for each build (wall clock). */
final class TimedLauncher extends DelegatingLauncher {
  final Map<Long, Instant> called = new ConcurrentHashMap<>();
  final Map<Long, Long> calledNanos = new ConcurrentHashMap<>();

  TimedLauncher(Launcher inner) {
    super(inner);
  }

  @Override
  public LaunchOutcome launch(Attempt a) {
    calledNanos.putIfAbsent(a.buildId(), System.nanoTime());
    called.putIfAbsent(a.buildId(), Instant.now());
    return super.launch(a);
  }
}
