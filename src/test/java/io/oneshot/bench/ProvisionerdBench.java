package io.oneshot.bench;

import io.oneshot.api.Json;
import io.oneshot.launch.local.LocalCommand;
import io.oneshot.server.OneshotServer;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TempDirs;
import io.oneshot.testing.TestServer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

/**
 * What a one-shot provisionerd costs a build, with the local launcher: from the launcher's call
 * (process start) to its acquire and to the script's start, and from the script's exit to its
 * completion recorded. One build at a time, so nothing else competes.
 */
final class ProvisionerdBench implements Scenario {
  static final String SCRIPT =
      "{\"provisioner\": \"script\", \"command\": [\"sh\", \"-c\", \"echo bench-end\"]}";

  @Override
  public String name() {
    return "provisionerd";
  }

  @Override
  public String describe() {
    return "provisionerd's overhead per build (local launcher, p50 over 50 runs)";
  }

  @Override
  public void run(boolean smoke, Report report) throws Exception {
    Path runDir = TempDirs.make("oneshot-bench-runs");
    try {
      run(smoke, report, runDir);
    } finally {
      TempDirs.delete(runDir);
    }
  }

  /** The scenario, its attempts and its class data sharing archive in {@code runDir}. */
  private void run(boolean smoke, Report report, Path runDir) throws Exception {
    int runs = smoke ? 3 : 50;
    Path jar = Path.of("target", "oneshot.jar").toAbsolutePath();
    Path archive = runDir.resolve(".provisionerd.jsa");
    List<String> command;
    String variant;
    if (Files.isRegularFile(jar)) {
      command = LocalCommand.defaultCommand(List.of(), archive, List.of(jar.toString()));
      variant = "script build, oneshot.jar with its CDS archive";
    } else {
      command = LocalCommand.defaultCommand(List.of(), archive);
      variant = "script build, class directories (no CDS archive: no target/oneshot.jar)";
    }
    TimedLauncher[] made = new TimedLauncher[1];
    try (TestServer t =
            TestServer.with()
                .routes("routes: [{name: bench, maxConcurrent: 4}]")
                .dispatch("pollInterval: 2s, rescueInterval: 5s, heartbeatInterval: 1s")
                .launcherYaml(
                    "{kind: local, local: {runDir: %s, command: %s}}"
                        .formatted(Json.write(runDir.toString()), Json.write(command)))
                .launchers(
                    (vertx, cfg) -> {
                      made[0] = new TimedLauncher(OneshotServer.launcherFor(vertx, cfg));
                      return made[0];
                    })
                .start();
        Harness.Producer p = new Harness.Producer()) {
      Harness.awaitLeader(t);
      List<Double> toAcquire = new ArrayList<>();
      List<Double> toScript = new ArrayList<>();
      List<Double> toComplete = new ArrayList<>();
      List<Double> total = new ArrayList<>();
      for (int i = 0; i <= runs; i++) {
        long id = p.enqueue("{}", SCRIPT, null);
        Harness.await(
            "build " + id + " finishes",
            Duration.ofMinutes(2),
            () -> Sql.value("SELECT finished_at FROM oneshot.builds WHERE id = ?", id) != null);
        String status = (String) Sql.value("SELECT status FROM oneshot.builds WHERE id = ?", id);
        if (!status.equals("succeeded")) {
          throw new IllegalStateException("build " + id + " " + status);
        }
        if (i == 0) {
          continue; // the first run writes the class data sharing archive
        }
        Harness.Times times = Harness.times(id, id).get(id);
        Instant called = made[0].called.get(id);
        Instant scriptStarted = logTime(id, "system", "script started%");
        Instant lastLine = logTime(id, "stdout", "bench-end");
        toAcquire.add(Harness.ms(called, times.started()));
        toScript.add(Harness.ms(called, scriptStarted));
        toComplete.add(Harness.ms(lastLine, times.finished()));
        total.add(Harness.ms(called, scriptStarted) + Harness.ms(lastLine, times.finished()));
      }
      report.add("provisionerd", variant, "runs", runs, "");
      report.latency("provisionerd", variant, "process start -> acquired", toAcquire, null, null);
      report.latency(
          "provisionerd", variant, "process start -> script started", toScript, null, null);
      report.latency(
          "provisionerd", variant, "script exit -> complete recorded", toComplete, null, null);
      report.latency(
          "provisionerd", variant, "overhead in total", total, Report.Goal.under(1000), null);
      // Its ceiling: the same JVM start, class path and archive doing nothing but its help.
      List<String> help = new ArrayList<>(command);
      help.add("--help");
      String bare = "ceiling: the same java command, provisionerd --help";
      report.reference("provisionerd", bare);
      report.latency(
          "provisionerd", bare, "process start -> exit", jvmStarts(help, runs), null, null);
      report.note(
          "provisionerd: process start is the launcher's call (fork and exec included); the JVM"
              + " runs with "
              + String.join(" ", LocalCommand.DEFAULT_JAVA_OPTIONS)
              + " and, from the jar, an automatic CDS archive (the image ships one too).");
    }
  }

  /** Milliseconds from each start of {@code command} to its exit, {@code runs} times in turn. */
  static List<Double> jvmStarts(List<String> command, int runs) throws Exception {
    List<Double> ms = new ArrayList<>();
    for (int i = 0; i < runs; i++) {
      long t0 = System.nanoTime();
      Process p =
          new ProcessBuilder(command)
              .redirectOutput(ProcessBuilder.Redirect.DISCARD)
              .redirectError(ProcessBuilder.Redirect.DISCARD)
              .start();
      int code = p.waitFor();
      long took = System.nanoTime() - t0;
      if (code != 0) {
        throw new IllegalStateException(String.join(" ", command) + ": exit " + code);
      }
      ms.add(took / 1e6);
    }
    return ms;
  }

  private static Instant logTime(long id, String stream, String like) {
    return Harness.micros(
        Sql.value(
            "SELECT extract(epoch FROM min(ts)) * 1e6 FROM oneshot.build_logs"
                + " WHERE build_id = ? AND stream = ? AND text LIKE ?",
            id,
            stream,
            like));
  }
}
