package io.oneshot.cli;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.api.Json;
import io.oneshot.config.Units;
import java.io.PrintWriter;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
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
          + " builds claimed in the last hour (the last 1,000 at most). With queue sources"
          + " configured, also each source's tag sets: the jobs waiting, the route that takes them"
          + " (or that none does) and its builds in flight. `oneshot top` is `oneshot routes"
          + " --watch`."
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
      JsonNode sources = api.get("/api/v1/sources");
      if (client.json()) {
        out.println(
            Json.write(sources.isEmpty() ? routes : Map.of("routes", routes, "sources", sources)));
      } else {
        if (live && tty) {
          out.print("\033[H\033[2J");
        }
        if (live) {
          out.println(
              "oneshot routes at " + Instant.now() + " (every " + interval + ", Ctrl-C stops)");
        }
        out.print(table(routes));
        if (!sources.isEmpty()) {
          out.println();
          out.print(sources(sources));
        }
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

  /**
   * The queue sources: per source and tag set, the jobs waiting and the route that takes them; a
   * tag set no route takes says so, since its jobs wait until one does.
   */
  static String sources(JsonNode sources) {
    List<List<String>> rows = new ArrayList<>();
    for (JsonNode s : sources) {
      String state =
          !s.path("leading").asBoolean()
              ? "standby"
              : s.path("up").asBoolean() ? "ok" : "DOWN: " + s.path("error").asText();
      if (s.path("tagSets").isEmpty()) {
        rows.add(List.of(s.path("name").asText(), state, "-", "-", "0", "-"));
      }
      for (JsonNode t : s.path("tagSets")) {
        String tags = Text.tags(t.path("tags"));
        if (t.has("organization")) {
          tags = tags + " (organization " + t.path("organizationName").asText() + ")";
        }
        rows.add(
            List.of(
                s.path("name").asText(),
                state,
                tags,
                t.path("route").isNull() ? "NO ROUTE TAKES THEM" : t.path("route").asText(),
                t.path("waiting").asText(),
                t.path("route").isNull() ? "-" : t.path("inFlight").asText()));
      }
    }
    return Text.table(List.of("SOURCE", "STATE", "TAGS", "ROUTE", "WAITING", "IN FLIGHT"), rows);
  }

  private static String millis(JsonNode n) {
    return n.isNull() || n.isMissingNode() ? "-" : Text.duration(Duration.ofMillis(n.asLong()));
  }
}
