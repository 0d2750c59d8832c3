package io.oneshot.cli;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.api.Json;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Spec;

@Command(
    name = "routes",
    mixinStandardHelpOptions = true,
    description = {
      "Shows the routes in the order they match, with their limits, running and queued builds,"
          + " and how long the oldest queued build has waited."
    })
final class RoutesCommand implements Callable<Integer> {
  @Spec picocli.CommandLine.Model.CommandSpec spec;
  @Mixin ClientOptions client;

  @Override
  public Integer call() {
    JsonNode routes = client.client().get("/api/v1/routes");
    PrintWriter out = spec.commandLine().getOut();
    if (client.json()) {
      out.println(Json.write(routes));
      return Main.OK;
    }
    List<List<String>> rows = new ArrayList<>();
    for (JsonNode r : routes) {
      rows.add(
          List.of(
              r.path("name").asText(),
              Text.tags(r.path("tags")),
              r.path("maxConcurrent").asText(),
              r.path("running").asText(),
              r.path("queued").asText(),
              r.path("oldestQueuedMs").isNull()
                  ? "-"
                  : Text.duration(Duration.ofMillis(r.path("oldestQueuedMs").asLong()))));
    }
    out.print(Text.table(List.of("ROUTE", "TAGS", "LIMIT", "RUNNING", "QUEUED", "OLDEST"), rows));
    return Main.OK;
  }
}
