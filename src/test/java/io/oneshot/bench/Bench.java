package io.oneshot.bench;

import io.oneshot.testing.Sql;
import io.oneshot.testing.TestDatabase;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code scripts/bench}: runs the scenarios, prints a markdown table, writes the same as JSON. */
@Command(
    name = "scripts/bench",
    sortOptions = false,
    description = {
      "Measures oneshot's dispatch against real PostgreSQL: latency at low load, throughput of a"
          + " burst, claim latency as the queue grows, a peer (db-scheduler) and poll-only"
          + " dispatch side by side, provisionerd's overhead, the dispatcher's footprint, the web"
          + " console in Chromium (Debian's chromium and chromium-driver), and enqueue to a"
          + " script's first line on a real node beside a bare pod (when scripts/kube start runs"
          + " one).",
      "",
      "PostgreSQL: ONESHOT_TEST_DATABASE_URL (scripts/bench sets it to 127.0.0.1:5432 when a"
          + " server answers there), else an embedded one. Each run works in a database of its own"
          + " and drops it at the end.",
      ""
    },
    footer = {
      "",
      "Examples:",
      "  scripts/bench                 every scenario, full size (about 15 minutes)",
      "  scripts/bench --smoke         every scenario, tiny (what CI runs)",
      "  scripts/bench --only peer     one scenario",
      "  scripts/bench --only launch --kubeconfig FILE",
      "                                launches against a real API server too",
      "  scripts/kube start && scripts/bench --only real-node",
      "                                builds on the real node this machine runs",
      "  scripts/kube start && scripts/bench --only warm",
      "                                a burst on a full node, with balloons and without"
    })
public final class Bench implements Callable<Integer> {
  @Option(
      names = "--smoke",
      description = "Run every scenario tiny: checks that the benchmark works, measures nothing.")
  boolean smoke;

  @Option(
      names = "--only",
      split = ",",
      paramLabel = "SCENARIO",
      description = "Run only these scenarios (see --list).")
  List<String> only = new ArrayList<>();

  @Option(
      names = "--out",
      paramLabel = "DIR",
      description = "Where bench.json and bench.md go (default: ${DEFAULT-VALUE}).")
  Path out = Path.of("target", "bench");

  @Option(
      names = "--kubeconfig",
      paramLabel = "FILE",
      description =
          "Also measure the launch scenario against the real API server this kubeconfig names: the"
              + " same plain client and the same bursts, each Job created suspended (no pod runs),"
              + " everything made deleted after each run.")
  Path kubeconfig;

  @Option(
      names = "--context",
      paramLabel = "NAME",
      description = "The kubeconfig's context to use (default: its current context).")
  String context;

  @Option(
      names = "--namespace",
      paramLabel = "NS",
      description =
          "The namespace the real API server's launches go to, which must hold nothing of"
              + " oneshot's (default: ${DEFAULT-VALUE}).")
  String namespace = "oneshot-bench";

  @Option(
      names = "--api-launches",
      paramLabel = "N",
      description =
          "Launches in each run against the real API server, per side (default: ${DEFAULT-VALUE}).")
  int apiLaunches = 1_000;

  @Option(names = "--list", description = "List the scenarios and exit.")
  boolean list;

  @Option(
      names = {"-h", "--help"},
      usageHelp = true,
      description = "Show this help and exit.")
  boolean help;

  @Spec CommandSpec spec;

  static List<Scenario> scenarios() {
    return scenarios(null);
  }

  /** The scenarios, the launch scenario measuring against {@code real} too when not null. */
  static List<Scenario> scenarios(RealApi real) {
    return List.of(
        new LatencyBench(),
        new ThroughputBench(),
        new LaunchBench(real),
        new BackpressureBench(),
        new QueueScaleBench(),
        new PeerBench(),
        new HeartbeatBench(),
        new ProvisionerdBench(),
        new FootprintBench(),
        new ConsoleBench(),
        new RealNodeBench(),
        new WarmBench(),
        new FairShareBench());
  }

  /**
   * The mock API server logs every request; at thousands a second that is what it would measure.
   * Held here: java.util.logging keeps its loggers weakly, and a logger collected before the mock
   * server's first request takes its level with it.
   */
  private static final java.util.logging.Logger MOCK_SERVER_LOG =
      java.util.logging.Logger.getLogger("io.fabric8.mockwebserver");

  public static void main(String[] args) {
    MOCK_SERVER_LOG.setLevel(java.util.logging.Level.WARNING);
    int code = new CommandLine(new Bench()).execute(args);
    System.exit(code);
  }

  /** Runs the benchmark; returns the report (tests use this with {@code --smoke}). */
  static Result run(boolean smoke, List<String> only, Path out) {
    return run(smoke, only, out, null);
  }

  /** {@link #run(boolean, List, Path)}, the launch scenario measuring against {@code real} too. */
  static Result run(boolean smoke, List<String> only, Path out, RealApi real) {
    List<Scenario> chosen = new ArrayList<>();
    for (Scenario s : scenarios(real)) {
      if (only.isEmpty() || only.contains(s.name())) {
        chosen.add(s);
      }
    }
    Instant started = Instant.now();
    Report report = new Report(smoke, machine());
    List<String> failed = new ArrayList<>();
    for (Scenario s : chosen) {
      System.out.printf("== %s: %s%n", s.name(), s.describe());
      long t0 = System.nanoTime();
      try {
        s.run(smoke, report);
      } catch (Exception | AssertionError e) {
        failed.add(s.name());
        report.note(s.name() + " failed: " + e);
        e.printStackTrace();
      }
      System.out.printf(
          "   (%s took %d s)%n", s.name(), Duration.ofNanos(System.nanoTime() - t0).toSeconds());
    }
    String command =
        "scripts/bench"
            + (smoke ? " --smoke" : "")
            + (only.isEmpty() ? "" : " --only " + String.join(",", only));
    report.writeJson(out.resolve("bench.json"), started, command);
    String md = report.markdown();
    try {
      Files.writeString(out.resolve("bench.md"), md);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return new Result(report, failed, md);
  }

  record Result(Report report, List<String> failed, String markdown) {}

  @Override
  public Integer call() {
    if (list) {
      for (Scenario s : scenarios()) {
        System.out.printf("%-12s %s%n", s.name(), s.describe());
      }
      return 0;
    }
    List<String> names = scenarios().stream().map(Scenario::name).toList();
    for (String o : only) {
      if (!names.contains(o)) {
        spec.commandLine()
            .getErr()
            .printf("--only: no scenario %s; there are %s%n", o, String.join(", ", names));
        return 2;
      }
    }
    RealApi real = null;
    if (kubeconfig != null) {
      if (!only.isEmpty() && !only.contains("launch")) {
        spec.commandLine()
            .getErr()
            .println("--kubeconfig: only the launch scenario uses it; add launch to --only");
        return 2;
      }
      if (apiLaunches < 1) {
        spec.commandLine().getErr().println("--api-launches: must be at least 1");
        return 2;
      }
      try {
        real = new RealApi(kubeconfig, context, namespace, apiLaunches);
      } catch (RuntimeException e) {
        spec.commandLine().getErr().println("--kubeconfig: " + e.getMessage());
        return 2;
      }
    }
    Result r;
    try {
      r = run(smoke, only, out, real);
    } finally {
      if (real != null) {
        real.close();
      }
    }
    System.out.println();
    System.out.print(r.markdown());
    System.out.printf("%nFigures written to %s and bench.md there.%n", out.resolve("bench.json"));
    if (!r.failed().isEmpty()) {
      System.err.println("Scenarios that failed: " + String.join(", ", r.failed()));
      return 1;
    }
    return 0;
  }

  static Map<String, String> machine() {
    Map<String, String> m = new LinkedHashMap<>();
    m.put("cores", Integer.toString(Runtime.getRuntime().availableProcessors()));
    m.put("memory", firstMatch(Path.of("/proc/meminfo"), "MemTotal:"));
    m.put("cpu", firstMatch(Path.of("/proc/cpuinfo"), "model name"));
    m.put("os", System.getProperty("os.name") + " " + System.getProperty("os.version"));
    m.put("java", System.getProperty("java.vm.name") + " " + System.getProperty("java.version"));
    // The collector and heap the figures were taken with: under G1 in place of the serial
    // collector the drain's ratio was lower (docs/performance.md, its history: "The benchmark runs
    // the dispatcher's collector").
    m.put("jvm flags", String.join(" ", ManagementFactory.getRuntimeMXBean().getInputArguments()));
    TestDatabase.url();
    m.put("postgresql", (String) Sql.value("SELECT version()"));
    return m;
  }

  private static String firstMatch(Path file, String prefix) {
    try {
      for (String line : Files.readAllLines(file)) {
        if (line.startsWith(prefix)) {
          return line.substring(line.indexOf(':') + 1).trim();
        }
      }
    } catch (IOException e) {
      // not Linux
    }
    return "unknown";
  }
}
