package io.oneshot.testing;

import io.oneshot.build.Runner;
import io.oneshot.launch.Attempt;
import io.oneshot.launch.AttemptEvents;
import io.oneshot.launch.AttemptRef;
import io.oneshot.launch.AttemptState;
import io.oneshot.launch.LaunchOutcome;
import io.oneshot.launch.Launcher;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A real launcher that also keeps every attempt it was asked to launch, token included: what a
 * person with access to a pod's Secret (or a copied manifest) holds.
 */
public final class CapturingLauncher implements Launcher {
  private final Launcher real;
  public final List<Attempt> launched = new CopyOnWriteArrayList<>();

  public CapturingLauncher(Launcher real) {
    this.real = real;
  }

  public Launcher real() {
    return real;
  }

  /** The attempt launched for a build, once there is one. */
  public Attempt of(long buildId) {
    return launched.stream().filter(a -> a.buildId() == buildId).findFirst().orElseThrow();
  }

  @Override
  public String kind() {
    return real.kind();
  }

  @Override
  public LaunchOutcome launch(Attempt attempt) {
    launched.add(attempt);
    return real.launch(attempt);
  }

  @Override
  public AttemptState inspect(AttemptRef ref) {
    return real.inspect(ref);
  }

  @Override
  public void kill(AttemptRef ref, Duration grace, String reason) {
    real.kill(ref, grace, reason);
  }

  @Override
  public List<AttemptRef> attempts() {
    return real.attempts();
  }

  @Override
  public void events(AttemptEvents events) {
    real.events(events);
  }

  @Override
  public void start() {
    real.start();
  }

  @Override
  public void removeRunner(AttemptRef ref, Runner intruder, Runner holder) {
    real.removeRunner(ref, intruder, holder);
  }

  @Override
  public void close() {
    real.close();
  }
}
