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

/**
 * A real launcher with every call passed on, default methods included, for tests that watch one or
 * two of them: a wrapper that forgot one would change what the dispatcher does.
 */
public abstract class DelegatingLauncher implements Launcher {
  private final Launcher real;

  protected DelegatingLauncher(Launcher real) {
    this.real = real;
  }

  public Launcher real() {
    return real;
  }

  @Override
  public String kind() {
    return real.kind();
  }

  @Override
  public LaunchOutcome launch(Attempt attempt) {
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
  public int launchesAtOnce() {
    return real.launchesAtOnce();
  }

  @Override
  public boolean keepsEndedAttempts() {
    return real.keepsEndedAttempts();
  }

  @Override
  public void removeRunner(AttemptRef ref, Runner intruder, Runner holder) {
    real.removeRunner(ref, intruder, holder);
  }

  @Override
  public List<String> warnings() {
    return real.warnings();
  }

  @Override
  public void close() {
    real.close();
  }

  private volatile TcpProxy proxy;
  private volatile boolean stated;

  /**
   * Runner calls come through {@code proxy}: each is proven as the connection the proxy forwards,
   * from its client, as if it had come straight (the real launcher proves that client).
   */
  public void proveThrough(TcpProxy proxy) {
    this.proxy = proxy;
  }

  /**
   * Runner calls come through something that cannot say whose connection it forwards (an HTTP proxy
   * with a pool of its own): the runner is taken at its word ({@link StatedRunner}). For tests of
   * something else than who may run a build.
   */
  public void takeRunnersAtTheirWord() {
    this.stated = true;
  }

  @Override
  public io.oneshot.launch.RunnerProof prove(io.oneshot.launch.RunnerCall call) {
    if (stated) {
      return StatedRunner.prove(call);
    }
    TcpProxy p = proxy;
    if (p != null) {
      java.util.OptionalInt client = p.clientPortFor(call.remotePort());
      if (client.isPresent()) {
        return real.prove(
            new io.oneshot.launch.RunnerCall(
                call.remoteHost(), client.getAsInt(), p.port(), call.proof(), call.stated()));
      }
    }
    return real.prove(call);
  }
}
