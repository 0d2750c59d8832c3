package io.oneshot.testing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** A test server cleans up after itself: a test run leaves no process and no directory behind. */
class TestServerTest {
  @Test
  void closingStopsTheAttemptsStillRunningAndRemovesTheRunDirectory() {
    TestServer t = TestServer.with().start();
    Path runDir = t.runDir;
    List<ProcessHandle> running;
    try {
      long id = t.api.submitScript("{}", "sleep 600");
      await()
          .atMost(60, TimeUnit.SECONDS)
          .until(
              () ->
                  "running".equals(TestServer.status(id))
                      && !TestServer.attemptsIn(runDir).isEmpty());
      running = TestServer.attemptsIn(runDir);
      assertThat(runDir).isDirectoryContaining(Files::isDirectory);
    } finally {
      t.close();
    }
    assertThat(running).noneMatch(ProcessHandle::isAlive);
    assertThat(TestServer.attemptsIn(runDir)).isEmpty();
    assertThat(runDir).doesNotExist();
  }
}
