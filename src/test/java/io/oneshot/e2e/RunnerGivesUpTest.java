package io.oneshot.e2e;

import static io.oneshot.testing.TestServer.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.oneshot.launch.local.LocalLauncher;
import io.oneshot.testing.Audit;
import io.oneshot.testing.CapturingLauncher;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TcpProxy;
import io.oneshot.testing.TestServer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * provisionerd retries its calls for its retry budget ({@code ONESHOT_RETRY_FOR}, 2 s here), then
 * gives up and exits; the dispatcher, which still reaches the database, ends the build. A runner
 * cut off from the API never leaves a build waiting forever, and never runs it twice.
 */
class RunnerGivesUpTest {
  @TempDir Path tmp;
  private TestServer t;
  private TcpProxy api;
  private CapturingLauncher launcher;

  @BeforeEach
  void proxy() {
    api = new TcpProxy("127.0.0.1", 9);
  }

  @AfterEach
  void tearDown() {
    if (t != null) {
      t.close();
    }
    api.close();
  }

  /** Runners reach the API through {@link #api} only. */
  private void start(String routes) {
    launcher = CapturingLauncher.local(tmp, Map.of("ONESHOT_RETRY_FOR", "2s"));
    launcher.proveThrough(api);
    t =
        TestServer.with()
            .routes(routes)
            .launcher(launcher)
            .api(
                "{listen: \"127.0.0.1:0\", publicUrl: \"http://127.0.0.1:"
                    + api.port()
                    + "\", adminToken: \""
                    + TestServer.ADMIN_TOKEN
                    + "\"}")
            .start();
    api.target("127.0.0.1", t.server.port());
  }

  /**
   * The build's provisionerd process, once started: the capturing launcher notes an attempt before
   * the real one starts its process, so the attempt alone does not mean a pid yet.
   */
  private long pidOf(long id) {
    return await()
        .atMost(30, TimeUnit.SECONDS)
        .until(
            () ->
                launcher.launched.stream()
                    .filter(a -> a.buildId() == id)
                    .findFirst()
                    .flatMap(a -> ((LocalLauncher) launcher.real()).pid(a.name())),
            Optional::isPresent)
        .orElseThrow();
  }

  private static String error(long id) {
    return (String) Sql.value("SELECT error FROM oneshot.builds WHERE id = ?", id);
  }

  @Test
  void aRunnerThatCannotAcquireGivesUpAndItsLastAttemptFailsTheBuild() {
    start("routes: [{name: a, maxAttempts: 1}]");
    api.cut();
    Path marker = tmp.resolve("ran.txt");
    long id = t.api.submitScript("{}", "echo ran >> " + marker);
    long pid = pidOf(id);
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(() -> ProcessHandle.of(pid).map(h -> !h.isAlive()).orElse(true));
    await().atMost(30, TimeUnit.SECONDS).until(() -> status(id).equals("failed"));
    assertThat(error(id))
        .startsWith("attempt oneshot-" + id + "-1 ended before provisionerd acquired the build")
        .endsWith("(attempt 1 of 1)");
    assertThat(Audit.lines(marker)).as("it ran nothing").isEmpty();
  }

  @Test
  void anOutcomeThatCannotBeDeliveredFailsTheBuildOnceItsRunnerIsSurelyGone() throws Exception {
    // lease 2s (half the hang timeout), cancel grace 2s, the rescuer's margin 15s
    start("routes: [{name: a, hangTimeout: 4s, cancelGrace: 2s}]");
    Path gate = tmp.resolve("gate");
    Path marker = tmp.resolve("ran.txt");
    long id =
        t.api.submitScript(
            "{}", "echo ran >> " + marker + "; while [ ! -e " + gate + " ]; do sleep 0.1; done");
    long pid = pidOf(id);
    await().atMost(60, TimeUnit.SECONDS).until(() -> Audit.lines(marker).size() == 1);
    assertThat(status(id)).isEqualTo("running");

    api.cut();
    Files.createFile(gate);
    await()
        .atMost(60, TimeUnit.SECONDS)
        .until(() -> ProcessHandle.of(pid).map(h -> !h.isAlive()).orElse(true));
    assertThat(status(id)).as("no outcome arrived: not ended on a guess").isEqualTo("running");
    await().atMost(60, TimeUnit.SECONDS).until(() -> status(id).equals("failed"));
    assertThat(error(id)).startsWith("provisionerd ended without reporting an outcome");
    assertThat(Audit.lines(marker)).as("it ran once").containsExactly("ran");
    assertThat(launcher.launched).hasSize(1);
  }
}
