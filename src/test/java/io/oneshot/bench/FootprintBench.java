package io.oneshot.bench;

import io.oneshot.testing.DispatcherProcess;
import io.oneshot.testing.Ports;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TempDirs;
import io.oneshot.testing.TestDatabase;
import io.oneshot.testing.TestServer;
import io.oneshot.testing.k8s.MockCluster;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The dispatcher's memory as its own process, with the JVM flags of the chart and image under the
 * chart's memory limit (768 MiB): idle, then with 10,000 builds queued and 1,000 running (Jobs in
 * the mock API server, watched by the dispatcher's informers; nobody runs their pods).
 */
final class FootprintBench implements Scenario {
  static final List<String> CHART_JVM =
      List.of(
          "-XX:MaxRAM=768m",
          "-XX:+UseSerialGC",
          "-XX:MaxRAMPercentage=70",
          "-XX:+ExitOnOutOfMemoryError",
          "-Xshare:auto");

  /** {@code -Dbench.jvm="..."} measures other flags (space-separated) instead. */
  static List<String> jvm() {
    String other = System.getProperty("bench.jvm");
    return other == null ? CHART_JVM : List.of(other.trim().split("\\s+"));
  }

  @Override
  public String name() {
    return "footprint";
  }

  @Override
  public String describe() {
    return "dispatcher RSS and heap: idle, and with 10,000 queued and 1,000 running";
  }

  @Override
  public void run(boolean smoke, Report report) throws Exception {
    int running = smoke ? 20 : 1_000;
    int queued = smoke ? 200 : 10_000;
    Duration settle = Duration.ofSeconds(smoke ? 1 : 10);
    Path dir = TempDirs.make("oneshot-bench-footprint");
    int port = Ports.stable();
    Sql.reset();
    Path config = dir.resolve("oneshot.yaml");
    Files.writeString(
        config,
        """
        database: {url: "%s"}
        api: {listen: "127.0.0.1:%d", publicUrl: "http://127.0.0.1:%d", adminToken: "%s"}
        dispatch: {maxConcurrent: %d}
        launcher:
          kind: kubernetes
          kubernetes: {namespace: bench, templateDir: "%s", qps: 10000, burst: 10000}
        routes: [{name: bench, template: script.yaml, namespace: bench, maxConcurrent: %d}]
        """
            .formatted(
                TestDatabase.url(),
                port,
                port,
                TestServer.ADMIN_TOKEN,
                running,
                Path.of("job-templates").toAbsolutePath(),
                running));
    try (MockCluster cluster = Setups.cluster()) {
      DispatcherProcess d =
          new DispatcherProcess(
                  "footprint",
                  port,
                  config,
                  dir,
                  Map.of(
                      "KUBERNETES_MASTER", cluster.admin.getMasterUrl().toString(),
                      "KUBERNETES_AUTH_TRYKUBECONFIG", "false",
                      "KUBERNETES_AUTH_TRYSERVICEACCOUNT", "false",
                      "ONESHOT_LOG_LEVEL", "warn"))
              .jvm(jvm())
              .start();
      try {
        Harness.await(
            "the dispatcher leads",
            Duration.ofMinutes(1),
            () -> {
              if (!d.alive()) {
                throw new IllegalStateException(
                    "the dispatcher exited; its log is in " + dir.resolve("footprint-1.log"));
              }
              return d.leads();
            });
        Harness.sleepUntil(System.nanoTime() + settle.toNanos());
        long pid = d.process().pid();
        String idle = "idle";
        // The same process before any build: what the load below adds is read against it.
        report.reference("footprint", idle);
        report.add("footprint", idle, "RSS", rssMiB(pid, "VmRSS"), "MiB");
        report.add("footprint", idle, "heap live (after a full GC)", heapLiveMiB(pid), "MiB");

        try (Harness.Producer p = new Harness.Producer()) {
          p.burst(running + queued);
        }
        Harness.await(
            running + " builds launched",
            Duration.ofMinutes(10),
            () -> Sql.count("SELECT count(*) FROM oneshot.build_launches") >= running);
        Harness.sleepUntil(System.nanoTime() + settle.toNanos());
        String loaded = String.format("%,d queued, %,d running", queued, running);
        long pending = Sql.count("SELECT count(*) FROM oneshot.builds WHERE status = 'pending'");
        if (pending != queued) {
          throw new IllegalStateException(pending + " pending, expected " + queued);
        }
        report.add("footprint", loaded, "RSS", rssMiB(pid, "VmRSS"), "MiB", Report.Goal.under(300));
        report.add("footprint", loaded, "RSS peak", rssMiB(pid, "VmHWM"), "MiB");
        report.add("footprint", loaded, "heap live (after a full GC)", heapLiveMiB(pid), "MiB");
        report.note(
            "footprint: dispatcher JVM flags "
                + String.join(" ", jvm())
                + " (the chart's javaOptions under its 768 MiB limit).");
      } finally {
        d.kill();
      }
    }
    // Kept when the scenario failed: the dispatcher's log is there.
    TempDirs.delete(dir);
  }

  /** A /proc/PID/status figure (VmRSS, VmHWM) in MiB. */
  static double rssMiB(long pid, String field) {
    try {
      for (String line : Files.readAllLines(Path.of("/proc", Long.toString(pid), "status"))) {
        if (line.startsWith(field + ":")) {
          return Long.parseLong(line.replaceAll("\\D", "")) / 1024.0;
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    throw new IllegalStateException("no " + field + " for process " + pid);
  }

  private static final Pattern USED = Pattern.compile("used (\\d+)K");

  /** Heap in use right after a full collection, from {@code jcmd}. */
  static double heapLiveMiB(long pid) throws IOException, InterruptedException {
    jcmd(pid, "GC.run");
    long kib = 0;
    String info = jcmd(pid, "GC.heap_info");
    for (String line : info.split("\n")) {
      if (line.contains("Metaspace") || line.contains("class space")) {
        continue;
      }
      Matcher m = USED.matcher(line);
      if (m.find()) {
        kib += Long.parseLong(m.group(1));
      }
    }
    if (kib == 0) {
      throw new IllegalStateException("no heap figures in jcmd GC.heap_info: " + info);
    }
    return kib / 1024.0;
  }

  private static String jcmd(long pid, String command) throws IOException, InterruptedException {
    Process p =
        new ProcessBuilder(
                Path.of(System.getProperty("java.home"), "bin", "jcmd").toString(),
                Long.toString(pid),
                command)
            .redirectErrorStream(true)
            .start();
    String out = new String(p.getInputStream().readAllBytes());
    if (p.waitFor() != 0) {
      throw new IllegalStateException("jcmd " + command + ": " + out);
    }
    return out;
  }
}
