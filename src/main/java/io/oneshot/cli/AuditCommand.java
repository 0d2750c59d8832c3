package io.oneshot.cli;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.api.Json;
import java.io.PrintWriter;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

@Command(
    name = "audit",
    header = "Shows the audit trail, newest first.",
    mixinStandardHelpOptions = true,
    description = {
      "Shows the audit trail, newest first (with the admin token): who submitted, canceled or"
          + " reran which build, read which workspace's state, created or revoked which token, and"
          + " the calls refused for a role too narrow or a build outside a token's routes.",
      // A line of its own: help text is wrapped at a name's dots too (oneshot.|enqueue()).
      "Builds enqueued from SQL with oneshot.enqueue() are not in it: their producers hold"
          + " database credentials, not tokens."
    },
    footer = {
      "",
      "Examples:",
      "  oneshot audit",
      "  oneshot audit --actor team-a-ci --limit 20",
      "  oneshot audit --action state-read",
      "  oneshot audit --refused",
      "  oneshot audit --build 42 -o json"
    })
final class AuditCommand implements Callable<Integer> {
  @Spec picocli.CommandLine.Model.CommandSpec spec;
  @Mixin ClientOptions client;

  @Option(names = "--actor", paramLabel = "NAME", description = "Only what NAME (a token) did.")
  String actor;

  @Option(
      names = "--action",
      paramLabel = "ACTION",
      description = "Only ACTION: submit, cancel, rerun, state-read, token-create or token-revoke.")
  String action;

  @Option(names = "--build", paramLabel = "ID", description = "Only entries of build ID.")
  Long build;

  @Option(names = "--refused", description = "Only refused calls.")
  boolean refused;

  @Option(
      names = "--limit",
      paramLabel = "N",
      defaultValue = "50",
      description = "At most N entries, 1 to 1000 (default: ${DEFAULT-VALUE}).")
  int limit;

  @Override
  public Integer call() {
    StringBuilder q = new StringBuilder("/api/v1/audit?limit=" + limit);
    if (actor != null) {
      q.append("&actor=").append(URLEncoder.encode(actor, StandardCharsets.UTF_8));
    }
    if (action != null) {
      q.append("&action=").append(URLEncoder.encode(action, StandardCharsets.UTF_8));
    }
    if (build != null) {
      q.append("&build=").append(build);
    }
    if (refused) {
      q.append("&outcome=refused");
    }
    JsonNode list = client.client().get(q.toString());
    PrintWriter out = spec.commandLine().getOut();
    JsonNode entries = list.path("entries");
    if (client.json()) {
      out.println(Json.write(list));
      return Main.OK;
    }
    List<List<String>> rows = new ArrayList<>();
    for (JsonNode e : entries) {
      String what =
          e.path("buildId").isNull() || e.path("buildId").isMissingNode()
              ? ""
              : "build " + e.path("buildId").asText();
      if (!e.path("workspace").isNull() && !e.path("workspace").isMissingNode()) {
        what = (what.isEmpty() ? "" : what + ", ") + "workspace " + e.path("workspace").asText();
      }
      if (e.path("detail").isObject()) {
        List<String> parts = new ArrayList<>();
        e.path("detail")
            .properties()
            .forEach(d -> parts.add(d.getKey() + "=" + text(d.getValue())));
        what = (what.isEmpty() ? "" : what + " ") + String.join(" ", parts);
      }
      rows.add(
          List.of(
              Text.at(e.path("at"), client.zone()),
              e.path("actor").asText(),
              e.path("action").asText(),
              e.path("outcome").asText().equals("ok")
                  ? "ok"
                  : "REFUSED: " + e.path("outcome").asText(),
              Text.orDash(e.path("route")),
              what.isEmpty() ? "-" : what));
    }
    if (rows.isEmpty()) {
      out.println("no entries");
    } else {
      out.print(Text.table(List.of("AT", "ACTOR", "ACTION", "OUTCOME", "ROUTE", "WHAT"), rows));
    }
    return Main.OK;
  }

  private static String text(JsonNode n) {
    return n.isTextual() ? n.asText() : Json.write(n);
  }
}
