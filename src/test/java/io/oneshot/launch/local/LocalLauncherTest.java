package io.oneshot.launch.local;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.oneshot.build.BuildToken;
import io.oneshot.build.Runner;
import io.oneshot.config.ConfigLoader;
import io.oneshot.launch.Attempt;
import io.oneshot.launch.AttemptState;
import io.oneshot.launch.LaunchOutcome;
import io.oneshot.testing.ChildJvm;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class LocalLauncherTest {
  @TempDir Path runDir;

  /**
   * Attempt 1 of build {@code id}, whose API is unreachable: a provisionerd keeps trying to acquire
   * it, so its process stays alive.
   */
  private static Attempt attempt(long id) {
    var route = ConfigLoader.parse("routes: [{name: a}]", "test", Map.of()).routes().get(0);
    return new Attempt(
        id, 1, Attempt.nameOf(id, 1), route, BuildToken.generate(), "http://127.0.0.1:1");
  }

  /** {@code oneshot provisionerd} from the test class path. */
  private List<String> provisionerd() {
    return LocalCommand.defaultCommand(List.of("-XX:TieredStopAtLevel=1"), runDir.resolve("x.jsa"));
  }

  /**
   * Attempts started at once with the default command share one class data sharing archive: until
   * there is one, each writes its own copy to a file of its own instead of one file in place (a JVM
   * that mapped it while another wrote it crashed before main, exit code 134), and once a writer
   * has ended, a third maps the finished archive.
   */
  @Test
  void attemptsStartedAtOnceNeverMapAnArchiveBeingWritten() throws Exception {
    List<String> command =
        LocalCommand.defaultCommand(List.of(), runDir.resolve("x.jsa"), ChildJvm.classPath());
    LocalLauncher l = new LocalLauncher(runDir, command, LocalCommand.baseEnvironment(List.of()));
    Attempt writer = attempt(21);
    Attempt meanwhile = attempt(22);
    assertThat(l.launch(writer)).isInstanceOf(LaunchOutcome.Launched.class);
    assertThat(l.launch(meanwhile)).isInstanceOf(LaunchOutcome.Launched.class);
    List<String> files = new ArrayList<>();
    for (Attempt a : List.of(writer, meanwhile)) {
      List<String> line = commandLineOf(l, a);
      assertThat(line).contains(SharedArchive.AUTO_CREATE);
      files.addAll(line.stream().filter(x -> x.startsWith(SharedArchive.FILE)).toList());
    }
    assertThat(files).hasSize(2).doesNotHaveDuplicates().allMatch(f -> f.endsWith(".tmp"));

    // Once it runs (it has read its token file, and deleted it), stopped as a dispatcher stops an
    // attempt (SIGTERM): the JVM writes its archive at its exit.
    Path token = runDir.resolve(writer.name()).resolve("token");
    await().atMost(60, TimeUnit.SECONDS).until(() -> !Files.exists(token));
    l.kill(writer.ref(), Duration.ofSeconds(20), "test");
    Path archive =
        await()
            .atMost(60, TimeUnit.SECONDS)
            .until(() -> archiveIn(runDir), java.util.Optional::isPresent)
            .orElseThrow();
    Attempt after = attempt(23);
    assertThat(l.launch(after)).isInstanceOf(LaunchOutcome.Launched.class);
    assertThat(commandLineOf(l, after))
        .doesNotContain(SharedArchive.AUTO_CREATE)
        .contains(SharedArchive.FILE + archive);
    for (Attempt a : List.of(meanwhile, after)) {
      l.kill(a.ref(), Duration.ZERO, "test");
    }
    l.close();
  }

  private static List<String> commandLineOf(LocalLauncher l, Attempt a) {
    long pid = l.pid(a.name()).orElseThrow();
    return LocalLauncher.commandLine(ProcessHandle.of(pid).orElseThrow());
  }

  /** The finished archive in {@code dir}, once there is one. */
  private static java.util.Optional<Path> archiveIn(Path dir) throws java.io.IOException {
    try (var files = Files.list(dir)) {
      return files
          .filter(f -> f.getFileName().toString().matches("x-[0-9a-f]{12}\\.jsa"))
          .findFirst();
    }
  }

  /**
   * A dispatcher that died between starting an attempt's process and recording it leaves a
   * directory without its attempt file. The next dispatcher still finds the process (by the marker
   * on its command line), records it, and can stop it: it is neither reported missing, which would
   * fail a build that is running, nor left running unseen.
   */
  @Test
  void anAttemptStartedButNeverRecordedIsFoundByTheNextDispatcher() throws Exception {
    List<String> command = provisionerd();
    Attempt a = attempt(7);
    LocalLauncher first =
        new LocalLauncher(runDir, command, LocalCommand.baseEnvironment(List.of()));
    assertThat(first.launch(a)).isInstanceOf(LaunchOutcome.Launched.class);
    long pid = first.pid(a.name()).orElseThrow();
    // As if it died before writing the attempt file.
    Path attemptFile = runDir.resolve(a.name()).resolve("attempt.json");
    Files.delete(attemptFile);

    LocalLauncher next =
        new LocalLauncher(runDir, command, LocalCommand.baseEnvironment(List.of()));
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

  /**
   * An attempt sees its own token and nothing of the dispatcher's: the token file is the owner's
   * alone, the environment is the reduced one (no admin token, no database URL, whatever the
   * dispatcher had), and the process leads its own process group, so that ending the attempt ends
   * everything it started.
   */
  @Test
  void anAttemptIsIsolatedFromTheDispatcherAndFromOtherAttempts() throws Exception {
    List<String> command =
        List.of(
            "/bin/sh",
            "-c",
            "env > ../env.txt; cut -d' ' -f5 /proc/$$/stat > ../pgid.txt; exec sleep 120");
    Attempt a = attempt(9);
    LocalLauncher launcher =
        new LocalLauncher(runDir, command, LocalCommand.baseEnvironment(List.of("NOT_SET_X")));
    try {
      assertThat(launcher.launch(a)).isInstanceOf(LaunchOutcome.Launched.class);
      long pid = launcher.pid(a.name()).orElseThrow();
      Path dir = runDir.resolve(a.name());
      await().atMost(30, TimeUnit.SECONDS).until(() -> Files.size(dir.resolve("pgid.txt")) > 0);

      Path token = dir.resolve("token");
      assertThat(Files.readString(token)).isEqualTo(a.token().value());
      assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(token)))
          .isEqualTo("rw-------");
      assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(dir)))
          .isEqualTo("rwx------");

      Map<String, String> env = new java.util.TreeMap<>();
      for (String line : Files.readAllLines(dir.resolve("env.txt"))) {
        int eq = line.indexOf('=');
        if (eq > 0) {
          env.put(line.substring(0, eq), line.substring(eq + 1));
        }
      }
      // What sh adds of its own: PWD, SHLVL, and "_" for the last command.
      env.keySet().removeAll(List.of("PWD", "OLDPWD", "SHLVL", "_"));
      assertThat(env.keySet())
          .containsExactlyInAnyOrder(
              "PATH",
              "LANG",
              "HOME",
              "TMPDIR",
              "ONESHOT_API_URL",
              "ONESHOT_TOKEN_FILE",
              "ONESHOT_WORK_DIR",
              "ONESHOT_BUILD_ID",
              "ONESHOT_ATTEMPT");
      assertThat(env.get("HOME")).isEqualTo(dir.resolve("work").toString());
      assertThat(env.get("ONESHOT_TOKEN_FILE")).isEqualTo(token.toString());

      assertThat(Files.readString(dir.resolve("pgid.txt")).trim())
          .as("its own process group")
          .isEqualTo(Long.toString(pid));
    } finally {
      launcher.kill(a.ref(), Duration.ZERO, "test");
      launcher.close();
    }
  }

  /**
   * A second runner the API refused is killed when it is this launcher's own process of that
   * attempt, and only then: not a process someone started by hand, not the holder.
   */
  @Test
  void aRefusedSecondRunnerIsKilledOnlyWhenItIsThisLaunchersOwnProcess() throws Exception {
    List<String> command = provisionerd();
    Attempt a = attempt(8);
    LocalLauncher launcher =
        new LocalLauncher(runDir, command, LocalCommand.baseEnvironment(List.of()));
    Process byHand = new ProcessBuilder("sleep", "120").start();
    try {
      assertThat(launcher.launch(a)).isInstanceOf(LaunchOutcome.Launched.class);
      long own = launcher.pid(a.name()).orElseThrow();
      Runner holder =
          new Runner("holder-runner-1", null, null, "host-1", ProcessHandle.current().pid());

      // Started by hand: not the launcher's to kill, and no reason to kill its own either.
      launcher.removeRunner(
          a.ref(), new Runner("by-hand-runner", null, null, "host-1", byHand.pid()), holder);
      assertThat(byHand.isAlive()).isTrue();
      assertThat(ProcessHandle.of(own).map(ProcessHandle::isAlive)).contains(true);
      // Its own process, but named as the holder: never killed.
      Runner ownAsHolder = new Runner("own-runner-01", null, null, "host-1", own);
      launcher.removeRunner(a.ref(), ownAsHolder, ownAsHolder);
      assertThat(ProcessHandle.of(own).map(ProcessHandle::isAlive)).contains(true);
      // Its own process of another attempt: left alone.
      launcher.removeRunner(
          new io.oneshot.launch.AttemptRef(8, 2, Attempt.nameOf(8, 2), null),
          new Runner("own-runner-01", null, null, null, own),
          holder);
      assertThat(ProcessHandle.of(own).map(ProcessHandle::isAlive)).contains(true);
      // A kill is not seen at once: none of the calls above may have killed it, for a while.
      await()
          .during(1, TimeUnit.SECONDS)
          .atMost(3, TimeUnit.SECONDS)
          .until(() -> ProcessHandle.of(own).map(ProcessHandle::isAlive).orElse(false));

      launcher.removeRunner(a.ref(), new Runner("own-runner-01", null, null, null, own), holder);
      await()
          .atMost(30, TimeUnit.SECONDS)
          .until(() -> ProcessHandle.of(own).map(h -> !h.isAlive()).orElse(true));
      assertThat(byHand.isAlive()).isTrue();
    } finally {
      byHand.destroyForcibly();
      launcher.close();
    }
  }
}
