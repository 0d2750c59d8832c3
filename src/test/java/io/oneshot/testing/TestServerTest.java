package io.oneshot.testing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.oneshot.launch.local.LocalLauncher;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** A test server cleans up after itself: a test run leaves no process and no directory behind. */
class TestServerTest {
  /** The provisionerd processes whose attempt directories are in {@code runDir}. */
  private static List<ProcessHandle> attemptsIn(Path runDir) {
    Path dir = runDir.toAbsolutePath();
    return ProcessHandle.allProcesses()
        .filter(
            p -> LocalLauncher.attemptDirOf(p).map(d -> dir.equals(d.getParent())).orElse(false))
        .toList();
  }

  @Test
  void closingStopsTheAttemptsStillRunningAndRemovesTheRunDirectory() {
    TestServer t = TestServer.with().start();
    Path runDir = t.runDir;
    List<ProcessHandle> running;
    try {
      long id = t.api.submitScript("{}", "sleep 600");
      await()
          .atMost(60, TimeUnit.SECONDS)
          .until(() -> "running".equals(TestServer.status(id)) && !attemptsIn(runDir).isEmpty());
      running = attemptsIn(runDir);
      assertThat(runDir).isDirectoryContaining(Files::isDirectory);
    } finally {
      t.close();
    }
    assertThat(running).noneMatch(ProcessHandle::isAlive);
    assertThat(attemptsIn(runDir)).isEmpty();
    assertThat(runDir).doesNotExist();
  }
}
