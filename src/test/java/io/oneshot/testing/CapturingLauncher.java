package io.oneshot.testing;

import io.oneshot.launch.Attempt;
import io.oneshot.launch.LaunchOutcome;
import io.oneshot.launch.Launcher;
import io.oneshot.launch.local.LocalCommand;
import io.oneshot.launch.local.LocalLauncher;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A real launcher that also keeps every attempt it was asked to launch, token included: what a
 * person with access to a pod's Secret (or a copied manifest) holds.
 */
public final class CapturingLauncher extends DelegatingLauncher {
  public final List<Attempt> launched = new CopyOnWriteArrayList<>();

  public CapturingLauncher(Launcher real) {
    super(real);
  }

  /**
   * A local launcher running attempts under {@code dir}/runs, their environment the reduced one
   * plus {@code extraEnv}, capturing every attempt.
   */
  public static CapturingLauncher local(Path dir, Map<String, String> extraEnv) {
    Map<String, String> env = new HashMap<>(LocalCommand.baseEnvironment(List.of()));
    env.putAll(extraEnv);
    return new CapturingLauncher(
        new LocalLauncher(
            dir.resolve("runs"),
            LocalCommand.defaultCommand(
                List.of(), ChildJvm.archive("provisionerd"), ChildJvm.classPath()),
            env));
  }

  /** The attempt launched for a build, once there is one. */
  public Attempt of(long buildId) {
    return launched.stream().filter(a -> a.buildId() == buildId).findFirst().orElseThrow();
  }

  @Override
  public LaunchOutcome launch(Attempt attempt) {
    launched.add(attempt);
    return super.launch(attempt);
  }
}
