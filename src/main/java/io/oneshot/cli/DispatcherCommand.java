package io.oneshot.cli;

import io.fabric8.kubernetes.client.utils.KubernetesSerialization;
import io.oneshot.config.ConfigLoader;
import io.oneshot.config.OneshotConfig;
import io.oneshot.config.Units;
import io.oneshot.launch.kubernetes.JobTemplates;
import io.oneshot.server.OneshotServer;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

@Command(
    name = "dispatcher",
    header = "Runs the dispatcher: the API and the claim loop.",
    mixinStandardHelpOptions = true,
    description = {
      "Runs the long-lived dispatcher: the HTTP API, and (on the replica that leads) the claim"
          + " loop that launches one attempt per build. Stops cleanly on SIGTERM or Ctrl-C;"
          + " running builds keep running."
    },
    footer = {
      "",
      "Environment: ONESHOT_DATABASE_URL and ONESHOT_ADMIN_TOKEN override the file.",
      "",
      "Example:",
      "  oneshot dispatcher --config dispatcher/oneshot.yaml"
    })
final class DispatcherCommand implements Callable<Integer> {
  @Option(
      names = "--config",
      paramLabel = "FILE",
      defaultValue = "dispatcher/oneshot.yaml",
      description = "The configuration (default: ${DEFAULT-VALUE}).")
  Path config;

  @Option(
      names = "--check",
      description =
          "Check the configuration and, with the kubernetes launcher, every Job template the"
              + " routes name, as the dispatcher would at start; print every problem found (exit"
              + " 2) or a summary (exit 0). Nothing is connected to.")
  boolean check;

  @Option(
      names = "--reach",
      description =
          "With --check and the kubernetes launcher: also reach every cluster the routes launch"
              + " into (the dispatcher's own, and those of clusters:), as the dispatcher would:"
              + " its API server answers, takes the credentials, and lets the dispatcher create"
              + " Jobs and Secrets in each route's namespace. A cluster that does not is a"
              + " problem (exit 3).")
  boolean reach;

  @Spec CommandSpec spec;

  @Override
  public Integer call() throws InterruptedException {
    if (check) {
      return check();
    }
    OneshotConfig c = ConfigLoader.load(config, System.getenv());
    LogConfigurator.apply(c.logging().format(), c.logging().levels());
    OneshotServer server = OneshotServer.start(c);
    Duration grace = c.dispatch().shutdownGrace();
    // The API's drain leaves a little of the grace period for closing everything else.
    Duration drain =
        grace.minusSeconds(2).compareTo(Duration.ofSeconds(1)) < 0
            ? Duration.ofSeconds(1)
            : grace.minusSeconds(2);
    Lifecycle.runUntilSignal(() -> server.close(drain), grace);
    return Main.OK;
  }

  /**
   * {@code --check}, where the configuration may name files of the dispatcher's pod (the chart's
   * admin token, keys and templates): one that is not on this machine is not read, and said so,
   * instead of failing a check run outside the cluster on the rendered configuration. The
   * environment's token and keys stand in for the files the dispatcher would read, as they would at
   * start.
   */
  private int check() {
    PrintWriter out = spec.commandLine().getOut();
    Map<String, String> env = new HashMap<>(System.getenv());
    List<String> notRead = new ArrayList<>();
    com.fasterxml.jackson.databind.JsonNode raw = ConfigLoader.tree(config);
    String tokenFile = raw.path("api").path("adminTokenFile").asText(null);
    if (tokenFile != null
        && !env.containsKey(ConfigLoader.ENV_ADMIN_TOKEN)
        && !Files.isReadable(Path.of(tokenFile))) {
      env.put(ConfigLoader.ENV_ADMIN_TOKEN, "not-read-here-" + "x".repeat(32));
      notRead.add("api.adminTokenFile " + tokenFile);
    }
    String keysFile = raw.path("encryption").path("keysFile").asText(null);
    boolean keysNotRead = false;
    if (keysFile != null
        && !env.containsKey(ConfigLoader.ENV_ENCRYPTION_KEYS)
        && !Files.isReadable(Path.of(keysFile))) {
      env.put(ConfigLoader.ENV_ENCRYPTION_KEYS, "not-read-here=" + "x".repeat(32));
      notRead.add("encryption.keysFile " + keysFile);
      keysNotRead = true;
    }
    OneshotConfig c = ConfigLoader.load(config, env);
    OneshotConfig.Launcher launcher = c.launcher();
    String templates = "";
    if (launcher.kind().equals("kubernetes")) {
      Path dir = launcher.kubernetes().templateDir();
      if (!Files.isDirectory(dir) && dir.isAbsolute()) {
        notRead.add("launcher.kubernetes.templateDir " + dir + " (the Job templates)");
      } else {
        JobTemplates.load(dir, c.routes(), new KubernetesSerialization());
        long count = c.routes().stream().map(OneshotConfig.Route::template).distinct().count();
        templates = "; " + count + " Job " + (count == 1 ? "template" : "templates") + " in " + dir;
      }
    }
    out.println(
        config
            + ": valid; launcher "
            + launcher.kind()
            + templates
            + "; global limit "
            + c.dispatch().maxConcurrent()
            + "; "
            + (keysNotRead
                ? "encryption keys from a file not read here"
                : c.encryption().keys().isEmpty()
                    ? "NO encryption keys: state is stored as it is, sensitive values are refused"
                    : "state and sensitive values sealed with key "
                        + c.encryption().keys().get(0).id()
                        + (c.encryption().keys().size() > 1
                            ? " (" + (c.encryption().keys().size() - 1) + " older to open with)"
                            : "")));
    List<List<String>> rows = new ArrayList<>();
    boolean clusters = !c.clusters().isEmpty();
    for (OneshotConfig.Route r : c.routes()) {
      List<String> row =
          new ArrayList<>(
              List.of(
                  r.name(),
                  Text.tags(r.tags()),
                  String.valueOf(r.maxConcurrent()),
                  r.template() == null ? "-" : r.template(),
                  Units.format(r.timeout()),
                  String.valueOf(r.maxAttempts())));
      if (clusters) {
        row.add(r.cluster());
      }
      rows.add(row);
    }
    List<String> head =
        new ArrayList<>(List.of("ROUTE", "TAGS", "LIMIT", "TEMPLATE", "TIMEOUT", "ATTEMPTS"));
    if (clusters) {
      head.add("CLUSTER");
    }
    out.print(Text.table(head, rows));
    if (!c.sources().isEmpty()) {
      // The databases are not contacted: --check reads files only.
      List<List<String>> sources = new ArrayList<>();
      for (OneshotConfig.Source s : c.sources()) {
        List<String> feeds = new ArrayList<>();
        for (OneshotConfig.Feed f : s.feeds()) {
          feeds.add(
              f.organization() == null ? f.route() : f.route() + " (" + f.organization() + ")");
        }
        sources.add(
            List.of(
                s.name(),
                s.kind(),
                s.channel(),
                String.join(", ", feeds),
                Units.format(s.pollInterval())));
      }
      out.println();
      out.print(Text.table(List.of("SOURCE", "KIND", "CHANNEL", "ROUTES", "POLL"), sources));
    }
    int exit = Main.OK;
    if (reach && launcher.kind().equals("kubernetes")) {
      exit = reachClusters(out, c);
    } else if (reach) {
      out.println();
      out.println("--reach: launcher " + launcher.kind() + " has no cluster to reach.");
    } else if (!c.clusters().isEmpty()) {
      out.println();
      out.println(
          "Clusters: "
              + String.join(", ", c.usedClusters())
              + " (not reached; --reach reaches each as the dispatcher would).");
    }
    if (!notRead.isEmpty()) {
      out.println();
      for (String what : notRead) {
        out.println(
            "Not on this machine, not read: " + what + ". The dispatcher reads it at start.");
      }
    }
    return exit;
  }

  /** Exit code when a cluster the routes launch into cannot be used. */
  static final int UNREACHABLE = 3;

  /** {@code --reach}: each cluster, as the dispatcher would look at it. */
  private int reachClusters(PrintWriter out, OneshotConfig c) {
    io.vertx.core.Vertx vertx = io.vertx.core.Vertx.vertx();
    List<io.oneshot.launch.kubernetes.Clusters.Reach> all;
    try {
      all = io.oneshot.launch.kubernetes.Clusters.reach(vertx, c);
    } finally {
      vertx.close();
    }
    List<List<String>> rows = new ArrayList<>();
    boolean bad = false;
    for (var r : all) {
      bad |= r.trouble() != null;
      rows.add(
          List.of(
              r.cluster(),
              r.api() == null ? "-" : r.api(),
              r.version() == null ? "-" : r.version(),
              String.join(", ", r.routes()),
              r.trouble() == null ? "ok" : r.trouble()));
    }
    out.println();
    out.print(Text.table(List.of("CLUSTER", "API", "VERSION", "ROUTES", "STATE"), rows));
    if (bad) {
      spec.commandLine()
          .getErr()
          .println(
              "A cluster the routes launch into cannot be used now: its routes' builds would wait"
                  + " queued (docs/clusters.md).");
      return UNREACHABLE;
    }
    return Main.OK;
  }
}
