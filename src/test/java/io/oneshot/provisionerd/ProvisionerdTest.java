package io.oneshot.provisionerd;

import static io.oneshot.testing.TestServer.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.oneshot.launch.Attempt;
import io.oneshot.testing.RecordingLauncher;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TerraformOnPath;
import io.oneshot.testing.TestServer;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * provisionerd run in this JVM against a real API: what it reports, logs and stores, and when it
 * refuses to run. (The end-to-end tests run it as its own process; here a mutation of its code is
 * seen by the tests.)
 */
class ProvisionerdTest {
  @TempDir Path tmp;
  private TestServer t;
  private final RecordingLauncher launcher = new RecordingLauncher();
  private final ByteArrayOutputStream out = new ByteArrayOutputStream();

  @BeforeEach
  void start() {
    t =
        TestServer.with()
            .routes(
                "routes: [{name: a, cancelGrace: 5s, maxAttempts: 1},"
                    + " {name: quick, tags: {quick: \"yes\"}, timeout: 2s, cancelGrace: 10s,"
                    + " maxAttempts: 1}]")
            .launcher(launcher)
            .start();
  }

  @AfterEach
  void stop() {
    t.close();
  }

  /** Runs provisionerd as {@code oneshot provisionerd} would, in a work directory of its own. */
  private int run(Attempt a, String apiUrl, Duration retryBudget) {
    Path work = tmp.resolve("work-" + a.name() + "-" + System.nanoTime());
    try {
      Files.createDirectories(work);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return Provisionerd.run(
        new Provisionerd.Options(URI.create(apiUrl), a.token().value(), work, retryBudget),
        new PrintStream(out, true, StandardCharsets.UTF_8));
  }

  private int run(long id) {
    return run(launcher.awaitLaunched(id, 1), t.api.base(), Duration.ofSeconds(10));
  }

  private static List<String> log(long id, String stream) {
    return Sql.logLines(id, stream);
  }

  private static Object column(long id, String column) {
    return Sql.value("SELECT " + column + " FROM oneshot.builds WHERE id = ?", id);
  }

  @Test
  void aScriptThatSucceedsIsReportedWithItsOutputInTheLog() {
    long id = t.api.submitScript("{}", "echo hello; echo oops >&2; echo done");
    assertThat(run(id)).isZero();
    assertThat(status(id)).as("%s", log(id, "system")).isEqualTo("succeeded");
    assertThat(column(id, "exit_code")).isEqualTo(0);
    assertThat(log(id, "stdout")).containsExactly("hello", "done");
    assertThat(log(id, "stderr")).containsExactly("oops");
    assertThat(log(id, "system")).anyMatch(l -> l.startsWith("provisionerd acquired build " + id));
    assertThat(out.toString(StandardCharsets.UTF_8)).contains("hello");
  }

  @Test
  void sensitiveValuesAreMaskedOnStdoutAndInTheLogEvenForABuildEnqueuedFromSql() {
    // From SQL the values are stored as given (the producer holds database credentials); the log
    // and provisionerd's stdout (kubectl logs) mask them all the same.
    long id =
        ((Number)
                Sql.value(
                    "SELECT id FROM oneshot.enqueue('{}', '{\"provisioner\": \"script\","
                        + " \"command\": [\"sh\", \"-c\", \"echo key=$KEY; echo $KEY-$KEY"
                        + " >&2\"], \"env\": {\"KEY\": \"sw0rdf1sh\"}, \"sensitive\":"
                        + " [\"KEY\"]}')"))
            .longValue();
    assertThat(run(id)).isZero();
    assertThat(log(id, "stdout")).containsExactly("key=***");
    assertThat(log(id, "stderr")).containsExactly("***-***");
    assertThat(out.toString(StandardCharsets.UTF_8))
        .contains("key=***")
        .doesNotContain("sw0rdf1sh");
    assertThat(t.api.get("/api/v1/builds/" + id + "/input").json().path("env").path("KEY").asText())
        .isEqualTo("***");
  }

  /**
   * SIGTERM (a deleted pod, a drain) is no cancel: the build runs to its end, its log says so, and
   * provisionerd exits with the build's outcome.
   */
  @Test
  void sigtermLetsTheBuildRunToItsEnd() throws Exception {
    long id = t.api.submitScript("{}", "echo started; sleep 2; echo finished");
    java.util.concurrent.CompletableFuture<Integer> code =
        java.util.concurrent.CompletableFuture.supplyAsync(() -> run(id));
    await().atMost(30, TimeUnit.SECONDS).until(() -> log(id, "stdout").contains("started"));
    // To this JVM, where provisionerd runs and handles it while the build runs.
    assertThat(
            io.oneshot.process.Signals.send(
                ProcessHandle.current().pid(), io.oneshot.process.Signals.Signal.SIGTERM))
        .isTrue();
    assertThat(code.get(1, TimeUnit.MINUTES)).isZero();
    assertThat(status(id)).isEqualTo("succeeded");
    assertThat(log(id, "stdout")).containsExactly("started", "finished");
    assertThat(log(id, "system")).anyMatch(l -> l.startsWith("provisionerd got SIGTERM"));
  }

  @Test
  void aScriptThatFailsIsReportedWithItsExitCode() {
    long id = t.api.submitScript("{}", "echo before; exit 7");
    assertThat(run(id)).as("provisionerd's own exit code").isEqualTo(Provisionerd.BUILD_FAILED);
    assertThat(status(id)).isEqualTo("failed");
    assertThat(column(id, "exit_code")).isEqualTo(7);
    assertThat(log(id, "stdout")).containsExactly("before");
  }

  @Test
  void aCancelStopsTheScriptAndIsReportedAsCanceled() throws Exception {
    Path pidFile = tmp.resolve("pid");
    long id = t.api.submitScript("{}", "echo $$ > " + pidFile + "; echo started; sleep 600");
    Attempt a = launcher.awaitLaunched(id, 1);
    CompletableFuture<Integer> code =
        CompletableFuture.supplyAsync(() -> run(a, t.api.base(), Duration.ofSeconds(10)));
    await().atMost(30, TimeUnit.SECONDS).until(() -> log(id, "stdout").contains("started"));
    long script = Long.parseLong(Files.readString(pidFile).strip());

    assertThat(t.api.post("/api/v1/builds/" + id + "/cancel", "{}").status()).isEqualTo(202);
    assertThat(code.get(30, TimeUnit.SECONDS)).isEqualTo(Provisionerd.BUILD_CANCELED);
    assertThat(status(id)).isEqualTo("canceled");
    assertThat(ProcessHandle.of(script).map(ProcessHandle::isAlive).orElse(false)).isFalse();
  }

  /**
   * A script stopped by a cancel or by its route's timeout gets SIGTERM and its grace: what its
   * trap prints while it cleans up is in the log, and the exit code is the one it chose.
   */
  @ParameterizedTest(name = "{0}")
  @ValueSource(strings = {"canceled", "timed out"})
  void aStoppedScriptsCleanupIsLoggedAndItsExitCodeKept(String how) throws Exception {
    boolean cancel = how.equals("canceled");
    long id =
        t.api.submitScript(
            cancel ? "{}" : "{\"quick\": \"yes\"}",
            "trap 'echo cleanup-1; sleep 1; echo cleanup-2; exit 7' TERM; echo started;"
                + " while :; do sleep 0.1; done");
    Attempt a = launcher.awaitLaunched(id, 1);
    CompletableFuture<Integer> code =
        CompletableFuture.supplyAsync(() -> run(a, t.api.base(), Duration.ofSeconds(10)));
    await().atMost(30, TimeUnit.SECONDS).until(() -> log(id, "stdout").contains("started"));
    if (cancel) {
      assertThat(t.api.post("/api/v1/builds/" + id + "/cancel", "{}").status()).isEqualTo(202);
    }
    code.get(60, TimeUnit.SECONDS);
    assertThat(status(id)).isEqualTo(cancel ? "canceled" : "failed");
    assertThat(log(id, "stdout")).containsExactly("started", "cleanup-1", "cleanup-2");
    assertThat(column(id, "exit_code")).isEqualTo(7);
    assertThat(log(id, "system")).noneMatch(l -> l.contains("did not stop within the grace"));
  }

  @Test
  void aScriptThatIgnoresSigtermIsKilledWithWhatItStartedOnceTheGraceIsOver() throws Exception {
    Path childPid = tmp.resolve("child");
    long id =
        t.api.submitScript(
            "{}",
            "trap '' TERM; sh -c 'trap \"\" TERM; echo $$ > "
                + childPid
                + "; exec sleep 600' & echo started; wait");
    Attempt a = launcher.awaitLaunched(id, 1);
    CompletableFuture<Integer> code =
        CompletableFuture.supplyAsync(() -> run(a, t.api.base(), Duration.ofSeconds(10)));
    await()
        .atMost(30, TimeUnit.SECONDS)
        .until(
            () ->
                log(id, "stdout").contains("started")
                    && Files.exists(childPid)
                    && Files.size(childPid) > 0);
    long child = Long.parseLong(Files.readString(childPid).strip());

    assertThat(t.api.post("/api/v1/builds/" + id + "/cancel", "{}").status()).isEqualTo(202);
    code.get(60, TimeUnit.SECONDS);
    assertThat(status(id)).isEqualTo("canceled");
    assertThat(log(id, "system"))
        .anyMatch(l -> l.startsWith("cancel requested; sending SIGTERM to process"))
        .anyMatch(l -> l.endsWith("did not stop within the grace period; killing it"));
    await()
        .atMost(10, TimeUnit.SECONDS)
        .until(() -> !ProcessHandle.of(child).map(ProcessHandle::isAlive).orElse(false));
  }

  @Test
  void aTerraformApplyStoresItsStateAndOutputs() {
    TerraformOnPath.assume();
    long id =
        t.api.submitTerraform(
            "ws-1",
            """
            resource "terraform_data" "x" { input = "v1" }
            output "value" { value = terraform_data.x.output }
            """);
    assertThat(run(id)).isZero();
    assertThat(status(id)).isEqualTo("succeeded");
    assertThat(String.valueOf(column(id, "outputs"))).contains("v1");
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.workspace_states"
                    + " WHERE workspace = 'ws-1' AND build_id = ? AND final",
                id))
        .isEqualTo(1);
    assertThat(column(id, "state_written_version")).isEqualTo(1);
  }

  @Test
  void aSecondRunnerOfTheSameAttemptRunsNothingAndSaysWhoHoldsIt() {
    Path marker = tmp.resolve("ran.txt");
    long id = t.api.submitScript("{}", "echo ran >> " + marker);
    Attempt a = launcher.awaitLaunched(id, 1);
    assertThat(run(a, t.api.base(), Duration.ofSeconds(10))).isZero();

    assertThat(run(a, t.api.base(), Duration.ofSeconds(10))).isEqualTo(Provisionerd.HELD_ELSEWHERE);
    assertThat(out.toString(StandardCharsets.UTF_8)).contains("another runner holds this attempt");
    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds WHERE id = ?", id)).isEqualTo(1);
    assertThat(marker).content().isEqualTo("ran\n");
  }

  @Test
  void anApiThatCannotBeReachedIsGivenUpAfterTheRetryBudget() throws Exception {
    long id = t.api.submitScript("{}", "echo never");
    Attempt a = launcher.awaitLaunched(id, 1);
    int closed;
    try (ServerSocket s = new ServerSocket(0)) {
      closed = s.getLocalPort();
    }
    long started = System.nanoTime();
    assertThat(run(a, "http://127.0.0.1:" + closed, Duration.ofSeconds(1))).isEqualTo(1);
    assertThat(Duration.ofNanos(System.nanoTime() - started)).isLessThan(Duration.ofSeconds(30));
    assertThat(status(id)).isEqualTo("launching");
  }
}
