package io.oneshot.e2e;

import static io.oneshot.testing.TestServer.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.oneshot.launch.Attempt;
import io.oneshot.launch.local.LocalCommand;
import io.oneshot.launch.local.LocalLauncher;
import io.oneshot.provisionerd.Provisionerd;
import io.oneshot.testing.Audit;
import io.oneshot.testing.CapturingLauncher;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TcpProxy;
import io.oneshot.testing.TerraformOnPath;
import io.oneshot.testing.TestServer;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A build runs once even when a second provisionerd holds its token, and a runner cut off from the
 * API stops its provisioner before the dispatcher lets anything else touch the workspace. Real
 * provisionerd processes, real scripts, real terraform.
 */
class SecondRunnerTest {
  @TempDir Path tmp;
  private TestServer t;
  private CapturingLauncher launcher;

  @AfterEach
  void tearDown() {
    if (t != null) {
      t.close();
    }
  }

  private void start(String routes, Map<String, String> extraEnv, String api) {
    start(null, routes, extraEnv, api);
  }

  /**
   * With the runners' calls through {@code proxy}: each is proven by the connection it forwards.
   */
  private void start(TcpProxy proxy, String routes, Map<String, String> extraEnv, String api) {
    launcher = CapturingLauncher.local(tmp, extraEnv);
    if (proxy != null) {
      launcher.proveThrough(proxy);
    }
    TestServer.Builder b = TestServer.with().routes(routes).launcher(launcher);
    if (api != null) {
      b.api(api);
    }
    t = b.start();
  }

  private Attempt attemptOf(long id) {
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(() -> launcher.launched.stream().anyMatch(a -> a.buildId() == id));
    return launcher.of(id);
  }

  /** A second provisionerd started by hand with the attempt's token, build id and attempt. */
  private Process secondProvisionerd(Attempt a) throws IOException {
    Path work = Files.createDirectories(tmp.resolve("second-" + a.name()));
    ProcessBuilder pb =
        new ProcessBuilder(LocalCommand.defaultCommand(List.of("-Xmx128m"), tmp.resolve("x")))
            .directory(work.toFile())
            .redirectErrorStream(true)
            .redirectOutput(work.resolve("output.log").toFile());
    Map<String, String> env = pb.environment();
    env.put("ONESHOT_API_URL", a.apiUrl());
    env.put("ONESHOT_TOKEN", a.token().value());
    env.put("ONESHOT_BUILD_ID", Long.toString(a.buildId()));
    env.put("ONESHOT_ATTEMPT", Integer.toString(a.attempt()));
    env.put("ONESHOT_WORK_DIR", work.toString());
    return pb.start();
  }

  private static long count(long id, String text) {
    return Sql.count(
        "SELECT count(*) FROM oneshot.build_logs WHERE build_id = ? AND text = ?", id, text);
  }

  @Test
  void aSecondProvisionerdWithTheSameTokenRunsNothingAndTheScriptRunsOnce() throws Exception {
    start("routes: [{name: a}]", Map.of(), null);
    Path marker = tmp.resolve("runs.txt");
    Path gate = tmp.resolve("gate");
    long id =
        t.api.submitScript(
            "{}",
            "echo run >> "
                + marker
                + "; echo started; while [ ! -f "
                + gate
                + " ]; do sleep 0.1; done; echo finished");
    await().atMost(60, TimeUnit.SECONDS).until(() -> count(id, "started") == 1);

    Process second = secondProvisionerd(attemptOf(id));
    assertThat(second.waitFor(60, TimeUnit.SECONDS)).isTrue();
    // Started by hand, not by the launcher: nothing proves it is the attempt's runner.
    assertThat(second.exitValue()).isEqualTo(Provisionerd.REFUSED);
    assertThat(Audit.unproven(id)).isEqualTo(1);
    assertThat(Audit.conflicts(id)).isZero();
    assertThat(Audit.lines(marker)).containsExactly("run");

    Files.createFile(gate);
    await().atMost(60, TimeUnit.SECONDS).until(() -> status(id).equals("succeeded"));
    assertThat(Audit.lines(marker)).as("the script ran once").containsExactly("run");
    assertThat(count(id, "started")).isEqualTo(1);
    assertThat(count(id, "finished")).isEqualTo(1);
    assertThat(Sql.value("SELECT exit_code FROM oneshot.builds WHERE id = ?", id)).isEqualTo(0);
  }

  @Test
  void aSecondProvisionerdMidApplyNeitherAppliesNorTouchesTheWorkspaceState() throws Exception {
    TerraformOnPath.assume();
    start("routes: [{name: tf}]", Map.of(), null);
    Path marker = tmp.resolve("applies.txt");
    Path gate = tmp.resolve("gate");
    String mainTf =
        """
        resource "terraform_data" "first" { input = "one" }
        resource "terraform_data" "gated" {
          depends_on = [terraform_data.first]
          provisioner "local-exec" {
            command = "echo apply >> %s; while [ ! -f %s ]; do sleep 0.1; done"
          }
        }
        """
            .formatted(marker, gate);
    long id = t.api.submitTerraform("ws-second", mainTf);
    await().atMost(2, TimeUnit.MINUTES).until(() -> Audit.lines(marker).size() == 1);

    Process second = secondProvisionerd(attemptOf(id));
    assertThat(second.waitFor(60, TimeUnit.SECONDS)).isTrue();
    // Started by hand, not by the launcher: nothing proves it is the attempt's runner.
    assertThat(second.exitValue()).isEqualTo(Provisionerd.REFUSED);
    assertThat(Audit.unproven(id)).isEqualTo(1);
    assertThat(Audit.conflicts(id)).isZero();

    Files.createFile(gate);
    await().atMost(2, TimeUnit.MINUTES).until(() -> !status(id).equals("running"));
    assertThat(status(id)).isEqualTo("succeeded");
    assertThat(Audit.lines(marker)).as("one terraform apply").containsExactly("apply");
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.workspace_states WHERE workspace = 'ws-second'"))
        .isEqualTo(1);
    Audit.workspace("ws-second");
  }

  @Test
  void aRunnerCutOffFromTheApiStopsTerraformAndTheWorkspaceWaitsForItsLeaseAndGrace()
      throws Exception {
    TerraformOnPath.assume();
    try (TcpProxy proxy = new TcpProxy("127.0.0.1", 9)) {
      // lease 2s (half the hang timeout), cancel grace 2s, the rescuer's margin 15s
      start(
          proxy,
          "routes: [{name: tf, hangTimeout: 4s, cancelGrace: 2s}]",
          Map.of("ONESHOT_RETRY_FOR", "2s"),
          "{listen: \"127.0.0.1:0\", publicUrl: \"http://127.0.0.1:"
              + proxy.port()
              + "\", adminToken: \""
              + TestServer.ADMIN_TOKEN
              + "\"}");
      proxy.target("127.0.0.1", t.server.port());
      Path marker = tmp.resolve("applies.txt");
      Path ticks = tmp.resolve("ticks.txt");
      String endless =
          """
          resource "terraform_data" "endless" {
            provisioner "local-exec" {
              command = "echo apply >> %s; while true; do echo tick >> %s; sleep 0.2; done"
            }
          }
          """
              .formatted(marker, ticks);
      long first = t.api.submitTerraform("ws-lease", endless);
      long next = t.api.submitTerraform("ws-lease", "resource \"terraform_data\" \"next\" {}");
      await().atMost(2, TimeUnit.MINUTES).until(() -> Audit.lines(marker).size() == 1);
      long provisionerd =
          ((LocalLauncher) launcher.real()).pid(launcher.of(first).name()).orElseThrow();

      proxy.cut();
      await()
          .atMost(60, TimeUnit.SECONDS)
          .until(() -> ProcessHandle.of(provisionerd).map(h -> !h.isAlive()).orElse(true));
      // The runner stopped by itself, long before the dispatcher would have given up on it:
      // terraform and its local-exec are gone, the build still runs, the workspace still waits.
      assertThat(processesWriting(ticks)).isEmpty();
      assertThat(status(first)).isEqualTo("running");
      assertThat(status(next)).isEqualTo("pending");
      double quiet =
          ((Number)
                  Sql.value(
                      "SELECT extract(epoch FROM clock_timestamp() - heartbeat_at)::float8"
                          + " FROM oneshot.builds WHERE id = ?",
                      first))
              .doubleValue();
      assertThat(quiet).isLessThan(2 + 2 + 15);
      proxy.restore();

      await().atMost(60, TimeUnit.SECONDS).until(() -> status(first).equals("failed"));
      double fencedFor =
          ((Number)
                  Sql.value(
                      "SELECT extract(epoch FROM finished_at - heartbeat_at)::float8"
                          + " FROM oneshot.builds WHERE id = ?",
                      first))
              .doubleValue();
      assertThat(fencedFor).as("lease + cancel grace + margin").isGreaterThan(2 + 2 + 15);
      await().atMost(2, TimeUnit.MINUTES).until(() -> status(next).equals("succeeded"));
      assertThat(
              Sql.count(
                  "SELECT count(*) FROM oneshot.builds a, oneshot.builds b"
                      + " WHERE a.id = ? AND b.id = ? AND b.claimed_at >= a.finished_at",
                  first,
                  next))
          .as("the workspace's next build was claimed only after the first ended")
          .isEqualTo(1);
      assertThat(Audit.lines(marker)).containsExactly("apply");
      Audit.workspace("ws-lease");
    }
  }

  @Test
  void cancelReachesTerraformWithNoKillCommandOnThePath() throws Exception {
    TerraformOnPath.assume();
    Path bin = Files.createDirectories(tmp.resolve("bin"));
    for (String tool : List.of("terraform", "sh", "sleep", "cat")) {
      Path found = onPath(tool);
      Files.createSymbolicLink(bin.resolve(tool), found);
    }
    assertThat(Files.exists(bin.resolve("kill"))).isFalse();
    start("routes: [{name: tf, cancelGrace: 20s}]", Map.of("PATH", bin.toString()), null);
    Path marker = tmp.resolve("slow.pid");
    long id =
        t.api.submitTerraform(
            "ws-nokill",
            """
            resource "terraform_data" "a" { input = "before the slow one" }
            resource "terraform_data" "slow" {
              depends_on = [terraform_data.a]
              provisioner "local-exec" { command = "echo $$ > %s; exec sleep 120" }
            }
            """
                .formatted(marker));
    await().atMost(2, TimeUnit.MINUTES).until(() -> !Audit.lines(marker).isEmpty());
    assertThat(t.api.post("/api/v1/builds/" + id + "/cancel", "{}").status()).isEqualTo(202);
    await().atMost(60, TimeUnit.SECONDS).until(() -> status(id).equals("canceled"));
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.build_logs WHERE build_id = ?"
                    + " AND text LIKE '%Interrupt received%'",
                id))
        .as("terraform saw the SIGINT")
        .isPositive();
  }

  private static Path onPath(String tool) {
    for (String dir : System.getenv().getOrDefault("PATH", "/usr/bin:/bin").split(":")) {
      Path p = Path.of(dir, tool);
      if (Files.isExecutable(p)) {
        return p.toAbsolutePath();
      }
    }
    throw new IllegalStateException(tool + " is not on PATH");
  }

  /** Live processes whose command line names {@code file}. */
  private static List<Long> processesWriting(Path file) {
    return ProcessHandle.allProcesses()
        .filter(ProcessHandle::isAlive)
        .filter(
            h -> {
              try {
                return Files.readString(Path.of("/proc", Long.toString(h.pid()), "cmdline"))
                    .contains(file.toString());
              } catch (IOException | RuntimeException e) {
                return false;
              }
            })
        .map(ProcessHandle::pid)
        .toList();
  }
}
