package io.oneshot.cli;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.api.Json;
import io.oneshot.config.Units;
import java.io.PrintWriter;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

@Command(
    name = "routes",
    aliases = "top",
    mixinStandardHelpOptions = true,
    description = {
      "Shows the routes in the order they match: their limit, builds running and queued, how long"
          + " the oldest queued build has waited, and the median and 95th percentile wait of the"
          + " builds claimed in the last hour (the last 1,000 at most). `oneshot top` is `oneshot"
          + " routes --watch`."
    },
    footer = {"", "Examples:", "  oneshot routes", "  oneshot routes --watch", "  oneshot top"})
final class RoutesCommand implements Callable<Integer> {
  @Spec picocli.CommandLine.Model.CommandSpec spec;
  @Mixin ClientOptions client;

  @Option(
      names = {"-w", "--watch"},
      description = "Refresh until interrupted.")
  boolean watch;

  @Option(
      names = "--interval",
      paramLabel = "DURATION",
      defaultValue = "2s",
      description = "How often --watch refreshes (default: ${DEFAULT-VALUE}).")
  String interval;

  @Override
  public Integer call() throws InterruptedException {
    ApiClient api = client.client();
    PrintWriter out = spec.commandLine().getOut();
    boolean live = watch || "top".equals(spec.commandLine().getParseResult().originalArgs().get(0));
    long every = Units.parseDuration(interval).toMillis();
    boolean tty = System.console() != null;
    while (true) {
      JsonNode routes = api.get("/api/v1/routes");
      if (client.json()) {
        out.println(Json.write(routes));
      } else {
        if (live && tty) {
          out.print("\033[H\033[2J");
        }
        if (live) {
          out.println(
              "oneshot routes at " + Instant.now() + " (every " + interval + ", Ctrl-C stops)");
        }
        out.print(table(routes));
      }
      out.flush();
      if (!live) {
        return Main.OK;
      }
      Thread.sleep(every);
    }
  }

  static String table(JsonNode routes) {
    List<List<String>> rows = new ArrayList<>();
    for (JsonNode r : routes) {
      rows.add(
          List.of(
              r.path("name").asText(),
              Text.tags(r.path("tags")),
              r.path("maxConcurrent").asText(),
              r.path("running").asText(),
              r.path("queued").asText(),
              millis(r.path("oldestQueuedMs")),
              millis(r.path("waitP50Ms")),
              millis(r.path("waitP95Ms"))));
    }
    return Text.table(
        List.of("ROUTE", "TAGS", "LIMIT", "RUNNING", "QUEUED", "OLDEST", "WAIT P50", "WAIT P95"),
        rows);
  }

  private static String millis(JsonNode n) {
    return n.isNull() || n.isMissingNode() ? "-" : Text.duration(Duration.ofMillis(n.asLong()));
  }
}
