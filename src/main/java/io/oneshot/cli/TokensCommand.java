package io.oneshot.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.oneshot.api.Json;
import java.io.PrintWriter;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

@Command(
    name = "tokens",
    header = "Creates, lists and revokes API tokens.",
    mixinStandardHelpOptions = true,
    description = {
      "Creates, lists and revokes API tokens (with the admin token). A token has a role and covers"
          + " some routes:",
      "  viewer     reads builds, logs and queues of its routes",
      "  submitter  also submits builds to its routes, and cancels and reruns its own",
      "  operator   also cancels and reruns any build of its routes, and reads their workspaces'"
          + " state",
      "A build or workspace outside a token's routes answers 404, as if it did not exist."
    },
    subcommands = {
      TokensCommand.Create.class,
      TokensCommand.ListTokens.class,
      TokensCommand.Revoke.class
    },
    footer = {
      "",
      "Examples:",
      "  oneshot tokens create team-a-ci --role submitter --route team-a --expires-in 90d",
      "  oneshot tokens create team-b --role operator --route-tag team=b --owner 'team B'",
      "  oneshot tokens create dashboards --role viewer --route '*'",
      "  oneshot tokens list",
      "  oneshot tokens revoke team-a-ci"
    })
final class TokensCommand implements Callable<Integer> {
  @Spec picocli.CommandLine.Model.CommandSpec spec;

  @Override
  public Integer call() {
    spec.commandLine().usage(spec.commandLine().getErr());
    return Main.USAGE;
  }

  @Command(
      name = "create",
      header = "Creates a token and prints it once.",
      mixinStandardHelpOptions = true,
      description = {
        "Creates a token and prints it once: it is stored only as a hash, so keep it now (a"
            + " Secret, a CI variable). Give the routes it covers by name (--route) or by their"
            + " tags (--route-tag: every route whose tags include all of them)."
      },
      footer = {
        "",
        "Examples:",
        "  oneshot tokens create team-a-ci --role submitter --route team-a --expires-in 90d",
        "  oneshot tokens create team-b-ops --role operator --route-tag team=b --owner 'team B'",
        "  oneshot tokens create grafana --role viewer --route '*' -o json",
        "",
        "The token goes to stdout alone (what it covers goes to stderr), so that",
        "  oneshot tokens create ci --role submitter --route default > ci.token",
        "keeps just the token."
      })
  static final class Create implements Callable<Integer> {
    @Spec picocli.CommandLine.Model.CommandSpec spec;
    @Mixin ClientOptions client;

    @Parameters(
        index = "0",
        paramLabel = "NAME",
        description = "Its name, as the audit trail shows it: lower-case letters, digits, . _ -")
    String name;

    @Option(
        names = "--role",
        required = true,
        paramLabel = "ROLE",
        description = "viewer, submitter or operator.")
    String role;

    @Option(
        names = "--route",
        paramLabel = "ROUTE",
        description = "A route it covers ('*': every route, today's and future ones); repeat.")
    List<String> routes = new ArrayList<>();

    @Option(
        names = "--route-tag",
        paramLabel = "KEY=VALUE",
        description = "It covers every route whose tags include these; repeat for more.")
    Map<String, String> routeTags = new LinkedHashMap<>();

    @Option(names = "--owner", paramLabel = "TEXT", description = "Who holds it: a team, a note.")
    String owner;

    @Option(
        names = "--expires-in",
        paramLabel = "DURATION",
        description = "Refused after this long, like 12h or 90d (default: never).")
    String expiresIn;

    @Override
    public Integer call() {
      if (routes.isEmpty() && routeTags.isEmpty()) {
        throw new CliException(
            Main.USAGE,
            "give the routes the token covers: --route NAME (or '*'), or --route-tag KEY=VALUE");
      }
      ObjectNode body = Json.MAPPER.createObjectNode();
      body.put("name", name);
      body.put("role", role);
      if (!routes.isEmpty()) {
        body.set("routes", Json.MAPPER.valueToTree(routes));
      }
      if (!routeTags.isEmpty()) {
        body.set("routeTags", Json.MAPPER.valueToTree(routeTags));
      }
      if (owner != null) {
        body.put("owner", owner);
      }
      if (expiresIn != null) {
        body.put("expiresIn", expiresIn);
      }
      JsonNode made = client.client().post("/api/v1/tokens", Json.write(body));
      PrintWriter out = spec.commandLine().getOut();
      if (client.json()) {
        out.println(Json.write(made));
        return Main.OK;
      }
      out.println(made.path("token").asText());
      PrintWriter err = spec.commandLine().getErr();
      err.println(
          "Token "
              + name
              + ": "
              + made.path("role").asText()
              + " of "
              + covers(made)
              + (made.path("expiresAt").isNull()
                  ? ", no expiry"
                  : ", expires " + Text.at(made.path("expiresAt"), client.zone()))
              + ". It is shown this once.");
      err.flush();
      return Main.OK;
    }
  }

  static String covers(JsonNode t) {
    List<String> names = new ArrayList<>();
    t.path("covers").forEach(n -> names.add(n.asText()));
    if (names.contains("*")) {
      return "every route";
    }
    return names.isEmpty() ? "no route today" : "routes " + String.join(", ", names);
  }

  @Command(
      name = "list",
      header = "Lists the tokens.",
      mixinStandardHelpOptions = true,
      description = {
        "Lists the tokens: role, the routes given and those they cover today, status (active,"
            + " expired, revoked), expiry and last use (noted at most once a minute). Tokens"
            + " themselves are never shown again."
      },
      footer = {"", "Examples:", "  oneshot tokens list", "  oneshot tokens list -o json"})
  static final class ListTokens implements Callable<Integer> {
    @Spec picocli.CommandLine.Model.CommandSpec spec;
    @Mixin ClientOptions client;

    @Override
    public Integer call() {
      JsonNode list = client.client().get("/api/v1/tokens");
      PrintWriter out = spec.commandLine().getOut();
      if (client.json()) {
        out.println(Json.write(list));
        return Main.OK;
      }
      List<List<String>> rows = new ArrayList<>();
      for (JsonNode t : list.path("tokens")) {
        List<String> given = new ArrayList<>();
        t.path("routes").forEach(n -> given.add(n.asText()));
        if (!t.path("routeTags").isEmpty()) {
          given.add("tags " + Text.tags(t.path("routeTags")));
        }
        rows.add(
            List.of(
                t.path("name").asText(),
                t.path("role").asText(),
                String.join(", ", given),
                covers(t),
                t.path("status").asText(),
                Text.at(t.path("expiresAt"), client.zone()),
                Text.at(t.path("lastUsedAt"), client.zone()),
                t.path("owner").asText().isEmpty() ? "-" : t.path("owner").asText()));
      }
      if (rows.isEmpty()) {
        out.println("no tokens (oneshot tokens create makes one)");
      } else {
        out.print(
            Text.table(
                List.of("NAME", "ROLE", "GIVEN", "COVERS", "STATUS", "EXPIRES", "USED", "OWNER"),
                rows));
      }
      return Main.OK;
    }
  }

  @Command(
      name = "revoke",
      header = "Revokes a token.",
      mixinStandardHelpOptions = true,
      description =
          "Revokes a token: every call with it is refused (401) from now on, on every replica."
              + " Its builds stay, as does its name in the audit trail.",
      footer = {"", "Examples:", "  oneshot tokens revoke team-a-ci"})
  static final class Revoke implements Callable<Integer> {
    @Spec picocli.CommandLine.Model.CommandSpec spec;
    @Mixin ClientOptions client;

    @Parameters(index = "0", paramLabel = "NAME", description = "The token's name.")
    String name;

    @Override
    public Integer call() {
      JsonNode r =
          client
              .client()
              .post(
                  "/api/v1/tokens/" + URLEncoder.encode(name, StandardCharsets.UTF_8) + "/revoke",
                  "{}");
      PrintWriter out = spec.commandLine().getOut();
      if (client.json()) {
        out.println(Json.write(r));
      } else if (r.path("already").asBoolean()) {
        out.println(
            "token "
                + name
                + " was revoked already, at "
                + Text.at(r.path("revokedAt"), client.zone()));
      } else {
        out.println("token " + name + " revoked");
      }
      return Main.OK;
    }
  }
}
