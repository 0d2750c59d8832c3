package io.oneshot.launch.local;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.oneshot.build.BuildToken;
import io.oneshot.config.ConfigLoader;
import io.oneshot.launch.Attempt;
import io.oneshot.launch.AttemptState;
import io.oneshot.launch.LaunchOutcome;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class LocalLauncherTest {
  @TempDir Path runDir;

  /**
   * A dispatcher that died between starting an attempt's process and recording it leaves a
   * directory without its attempt file. The next dispatcher still finds the process (by the marker
   * on its command line), records it, and can stop it: it is neither reported missing, which would
   * fail a build that is running, nor left running unseen.
   */
  @Test
  void anAttemptStartedButNeverRecordedIsFoundByTheNextDispatcher() throws Exception {
    var route = ConfigLoader.parse("routes: [{name: a}]", "test", Map.of()).routes().get(0);
    List<String> command =
        LocalLauncher.defaultCommand(List.of("-XX:TieredStopAtLevel=1"), runDir.resolve("x.jsa"));
    // The API is unreachable: provisionerd keeps trying to acquire, so the process stays alive.
    Attempt a =
        new Attempt(7, 1, Attempt.nameOf(7, 1), route, BuildToken.generate(), "http://127.0.0.1:1");
    LocalLauncher first =
        new LocalLauncher(runDir, command, LocalLauncher.baseEnvironment(List.of()));
    assertThat(first.launch(a)).isInstanceOf(LaunchOutcome.Launched.class);
    long pid = first.pid(a.name()).orElseThrow();
    // As if it died before writing the attempt file.
    Path attemptFile = runDir.resolve(a.name()).resolve("attempt.json");
    Files.delete(attemptFile);

    LocalLauncher next =
        new LocalLauncher(runDir, command, LocalLauncher.baseEnvironment(List.of()));
    AttemptState state = next.inspect(a.ref());
    assertThat(state).isInstanceOf(AttemptState.Running.class);
    assertThat(((AttemptState.Running) state).detail()).contains(Long.toString(pid));
    assertThat(attemptFile).exists();

    next.kill(a.ref(), Duration.ZERO, "test");
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(() -> ProcessHandle.of(pid).isEmpty() || !ProcessHandle.of(pid).get().isAlive());
    assertThat(next.inspect(a.ref())).isInstanceOf(AttemptState.Missing.class);
    first.close();
    next.close();
  }
}
