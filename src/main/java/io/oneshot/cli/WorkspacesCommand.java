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
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

@Command(
    name = "workspaces",
    header = "Lists workspaces and reads their state.",
    mixinStandardHelpOptions = true,
    description = {
      "Lists workspaces with state (terraform's, or a Pulumi stack's checkpoint), a workspace's"
          + " versions, and reads one version back."
          + " A workspace is its route's: builds on one route with the same --workspace share"
          + " state and run one at a time; another route's workspace of the same name is another"
          + " workspace. Name the route (--route) where the name alone is on several of yours."
    },
    subcommands = {
      WorkspacesCommand.ListWorkspaces.class,
      WorkspacesCommand.Versions.class,
      WorkspacesCommand.State.class
    },
    footer = {
      "",
      "Examples:",
      "  oneshot workspaces list",
      "  oneshot workspaces versions prod",
      "  oneshot workspaces versions prod --route team-a",
      "  oneshot workspaces state prod --route team-a > prod.tfstate",
      "  oneshot workspaces state prod --route team-a --version 3 > prod-v3.tfstate"
    })
final class WorkspacesCommand implements Callable<Integer> {
  @Spec picocli.CommandLine.Model.CommandSpec spec;

  @Override
  public Integer call() {
    spec.commandLine().usage(spec.commandLine().getErr());
    return Main.USAGE;
  }

  @Command(
      name = "list",
      header = "Lists the workspaces, who holds each and who waits.",
      mixinStandardHelpOptions = true,
      description = {
        "Lists the workspaces on the routes the token covers, busy ones first, then by newest"
            + " change: the route, the latest state version, how many versions, when it last"
            + " changed, the build that holds it (its earliest unfinished one) and how many wait"
            + " behind that build."
      },
      footer = {"", "Examples:", "  oneshot workspaces list", "  oneshot workspaces list -o json"})
  static final class ListWorkspaces implements Callable<Integer> {
    @Spec picocli.CommandLine.Model.CommandSpec spec;
    @Mixin ClientOptions client;

    @Override
    public Integer call() {
      JsonNode list = client.client().get("/api/v1/workspaces");
      PrintWriter out = spec.commandLine().getOut();
      if (client.json()) {
        out.println(Json.write(list));
        return Main.OK;
      }
      List<List<String>> rows = new ArrayList<>();
      for (JsonNode w : list.path("workspaces")) {
        JsonNode held = w.path("heldBy");
        rows.add(
            List.of(
                w.path("workspace").asText(),
                w.path("route").asText(),
                w.path("latest").isNumber() ? w.path("latest").asText() : "-",
                w.path("versions").asText(),
                w.path("updatedAt").isTextual() ? Text.at(w.path("updatedAt"), client.zone()) : "-",
                held.isNumber()
                    ? "build " + held.asText() + " (" + w.path("heldByStatus").asText() + ")"
                    : "-",
                w.path("waiting").asText()));
      }
      if (rows.isEmpty()) {
        out.println("No workspace has state or an unfinished build yet.");
      } else {
        out.print(
            Text.table(
                List.of(
                    "WORKSPACE", "ROUTE", "LATEST", "VERSIONS", "CHANGED", "HELD BY", "WAITING"),
                rows));
      }
      out.flush();
      return Main.OK;
    }
  }

  @Command(
      name = "versions",
      header = "Lists a workspace's state versions.",
      mixinStandardHelpOptions = true,
      description = {
        "Lists a workspace's state versions, newest first: the build and attempt that wrote each,"
            + " what it is (terraform's state, with its serial and lineage, or a Pulumi stack's"
            + " checkpoint), its size, and whether its build had finished"
            + " (\"applying\" while it runs: the version follows its apply)."
      },
      footer = {
        "",
        "Examples:",
        "  oneshot workspaces versions prod",
        "  oneshot workspaces versions prod --route team-a -o json"
      })
  static final class Versions implements Callable<Integer> {
    @Spec picocli.CommandLine.Model.CommandSpec spec;
    @Mixin ClientOptions client;

    @Mixin Which which;

    @Override
    public Integer call() {
      JsonNode v =
          client
              .client()
              .get("/api/v1/workspaces/states?" + query(which.route, which.workspace, null));
      PrintWriter out = spec.commandLine().getOut();
      if (client.json()) {
        out.println(Json.write(v));
        return Main.OK;
      }
      out.println("Workspace " + which.workspace + " of route " + v.path("route").asText());
      List<List<String>> rows = new ArrayList<>();
      for (JsonNode x : v.path("versions")) {
        rows.add(
            List.of(
                x.path("version").asText(),
                x.path("buildId").asText() + "/" + x.path("attempt").asText(),
                x.path("format").asText("terraform"),
                Text.orDash(x.path("serial")),
                Text.orDash(x.path("lineage")),
                x.path("bytes").asText() + " B",
                x.path("finished").asBoolean() ? "final" : "applying",
                Text.at(x.path("updatedAt"), client.zone())));
      }
      out.print(
          Text.table(
              List.of("VERSION", "BUILD", "KIND", "SERIAL", "LINEAGE", "SIZE", "STATUS", "CHANGED"),
              rows));
      out.flush();
      return Main.OK;
    }
  }

  // No standard help options: their --version (oneshot's own) would take the state's --version.
  @Command(
      name = "state",
      header = "Writes a workspace's state to stdout.",
      description = {
        "Writes a workspace's state (terraform's, or a Pulumi checkpoint) to stdout as stored (the"
            + " latest version, or"
            + " --version): for recovery and inspection. Needs an operator token (or the admin"
            + " token); every read is on the audit trail."
      },
      footer = {
        "",
        "Examples:",
        "  oneshot workspaces state prod > prod.tfstate",
        "  oneshot workspaces state prod --route team-a --version 3 > prod-v3.tfstate"
      })
  static final class State implements Callable<Integer> {
    @Spec picocli.CommandLine.Model.CommandSpec spec;
    @Mixin ClientOptions client;

    @Option(
        names = {"-h", "--help"},
        usageHelp = true,
        description = "Show this help message and exit.")
    boolean help;

    @Mixin Which which;

    @Option(
        names = "--version",
        paramLabel = "N",
        description = "The version to read (default: the latest).")
    Integer version;

    @Override
    public Integer call() {
      String state =
          client
              .client()
              .text("/api/v1/workspaces/state?" + query(which.route, which.workspace, version));
      PrintWriter out = spec.commandLine().getOut();
      out.print(state);
      if (!state.endsWith("\n")) {
        out.println();
      }
      out.flush();
      return Main.OK;
    }
  }

  /** The workspace a command is about: its name, and its route where the name is on several. */
  static final class Which {
    @Parameters(index = "0", paramLabel = "WORKSPACE", description = "The workspace's name.")
    String workspace;

    @Option(
        names = "--route",
        paramLabel = "ROUTE",
        description = "The route whose workspace it is (needed when several of yours have it).")
    String route;
  }

  static String query(String route, String workspace, Integer version) {
    StringBuilder q = new StringBuilder("workspace=").append(encode(workspace));
    if (route != null) {
      q.append("&route=").append(encode(route));
    }
    if (version != null) {
      q.append("&version=").append(version);
    }
    return q.toString();
  }

  private static String encode(String s) {
    return URLEncoder.encode(s, StandardCharsets.UTF_8);
  }
}
