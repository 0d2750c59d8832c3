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
    header = "Shows the routes and teams, and their queues.",
    mixinStandardHelpOptions = true,
    description = {
      "Shows the routes in the order they match: their limit, builds running and queued, how long"
          + " the oldest queued build has waited, and the median and 95th percentile wait of the"
          + " builds claimed in the last hour (the last 1,000 at most), the median and 95th"
          + " percentile run time (from provisionerd's start) of the builds that ended in the last"
          + " hour, and how many of those failed of those that succeeded or failed. With queue"
          + " sources"
          + " configured, also each source's tag sets: the jobs waiting, the route that takes them"
          + " (or that none does) and its builds in flight. Routes that keep warm room also show"
          + " their balloons: running of those the leader asks for, pending (waiting for a node),"
          + " balloon-hours and preemptions (a build's pod took a balloon's place) over the last"
          + " day, and why that many. Where teams are configured, each team's weight, its share of"
          + " the global limit, what it runs, borrows past its share and has queued (a route"
          + " that names no team is a team of its own). Held routes and teams are"
          + " named with who held them and why; `oneshot routes hold` and `release` hold and"
          + " release them. `oneshot top` is `oneshot routes --watch`."
    },
    subcommands = {RoutesCommand.Hold.class, RoutesCommand.Release.class},
    footer = {
      "",
      "Examples:",
      "  oneshot routes",
      "  oneshot routes --watch",
      "  oneshot top",
      "  oneshot routes hold team-a --why \"state migration, back at 14:00\"",
      "  oneshot routes release team-a",
      "  oneshot routes hold platform --team --why \"cluster upgrade\""
    })
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
    return show(spec, client, watch, interval);
  }

  /** {@code oneshot top}: the routes, refreshed until interrupted. */
  @Command(
      name = "top",
      header = "Shows the routes, refreshed until interrupted.",
      mixinStandardHelpOptions = true,
      description = {
        "oneshot routes --watch: the routes, teams, balloons and queue sources, refreshed every"
            + " --interval until Ctrl-C (see oneshot routes --help for what each column says)."
      },
      footer = {"", "Examples:", "  oneshot top", "  oneshot top --interval 10s"})
  static final class Top implements Callable<Integer> {
    @Spec picocli.CommandLine.Model.CommandSpec spec;
    @Mixin ClientOptions client;

    @Option(
        names = "--interval",
        paramLabel = "DURATION",
        defaultValue = "2s",
        description = "How often it refreshes (default: ${DEFAULT-VALUE}).")
    String interval;

    @Override
    public Integer call() throws InterruptedException {
      return show(spec, client, true, interval);
    }
  }

  private static int show(
      picocli.CommandLine.Model.CommandSpec spec,
      ClientOptions client,
      boolean live,
      String interval)
      throws InterruptedException {
    ApiClient api = client.client();
    PrintWriter out = spec.commandLine().getOut();
    long every = Units.parseDuration(interval).toMillis();
    boolean tty = System.console() != null;
    while (true) {
      JsonNode routes = api.get("/api/v1/routes");
      JsonNode sources = api.get("/api/v1/sources");
      JsonNode teams = api.get("/api/v1/teams");
      if (client.json()) {
        boolean shared = configured(teams);
        if (sources.isEmpty() && !shared) {
          out.println(Json.write(routes));
        } else {
          Map<String, JsonNode> all = new java.util.LinkedHashMap<>();
          all.put("routes", routes);
          if (shared) {
            all.put("teams", teams);
          }
          if (!sources.isEmpty()) {
            all.put("sources", sources);
          }
          out.println(Json.write(all));
        }
      } else {
        if (live && tty) {
          out.print("\033[H\033[2J");
        }
        if (live) {
          out.println(
              "oneshot routes at "
                  + Text.at(Instant.now(), client.zone())
                  + " (every "
                  + interval
                  + ", Ctrl-C stops)");
        }
        out.print(table(routes));
        if (configured(teams)) {
          out.println();
          out.print(teams(teams));
        }
        String held = held(routes, teams, client.zone());
        if (!held.isEmpty()) {
          out.println();
          out.print(held);
        }
        String warm = warm(routes);
        if (!warm.isEmpty()) {
          out.println();
          out.print(warm);
        }
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
              millis(r.path("waitP95Ms")),
              millis(r.path("runP50Ms")),
              millis(r.path("runP95Ms")),
              failed(r)));
    }
    return Text.table(
        List.of(
            "ROUTE",
            "TAGS",
            "LIMIT",
            "RUNNING",
            "QUEUED",
            "OLDEST",
            "WAIT P50",
            "WAIT P95",
            "RUN P50",
            "RUN P95",
            "FAILED"),
        rows);
  }

  /** Of the builds that ended in the last hour, how many failed: "1/3", or "-" when none ended. */
  private static String failed(JsonNode r) {
    long ended = r.path("finishedLastHour").asLong();
    return ended == 0 ? "-" : r.path("failedLastHour").asLong() + "/" + ended;
  }

  /**
   * Whether teams were configured: a team with a route not of its name, or rules of its own. Routes
   * that each are a team of their own, of weight 1, share the limit alike and need no table.
   */
  static boolean configured(JsonNode teams) {
    for (JsonNode t : teams) {
      JsonNode routes = t.path("routes");
      if (routes.size() != 1
          || !routes.get(0).asText().equals(t.path("name").asText())
          || t.path("weight").asInt() != 1
          || t.path("guaranteed").asInt() != 0
          || !t.path("borrowLimit").isNull()
          || !t.path("maxConcurrent").isNull()) {
        return true;
      }
    }
    return false;
  }

  /**
   * The teams: weight, share of the global limit, guarantee, borrowLimit and cap ("-": none), what
   * each runs, borrows past its share and has queued, and its routes.
   */
  static String teams(JsonNode teams) {
    List<List<String>> rows = new ArrayList<>();
    for (JsonNode t : teams) {
      List<String> routes = new ArrayList<>();
      t.path("routes").forEach(r -> routes.add(r.asText()));
      rows.add(
          List.of(
              t.path("name").asText() + (t.path("held").isObject() ? " (HELD)" : ""),
              t.path("weight").asText(),
              share(t.path("share").asDouble()),
              t.path("guaranteed").asInt() == 0 ? "-" : t.path("guaranteed").asText(),
              Text.orDash(t.path("borrowLimit")),
              Text.orDash(t.path("maxConcurrent")),
              t.path("running").asText(),
              t.path("borrowed").asText(),
              t.path("queued").asText(),
              String.join(", ", routes)));
    }
    return Text.table(
        List.of(
            "TEAM",
            "WEIGHT",
            "SHARE",
            "GUARANTEED",
            "BORROW LIMIT",
            "LIMIT",
            "RUNNING",
            "BORROWED",
            "QUEUED",
            "ROUTES"),
        rows);
  }

  private static String share(double s) {
    return s == Math.rint(s)
        ? Long.toString((long) s)
        : String.format(java.util.Locale.ROOT, "%.1f", s);
  }

  /** One line per held route and team: who, since when, why, and how to release it. */
  static String held(JsonNode routes, JsonNode teams, java.time.ZoneId zone) {
    StringBuilder out = new StringBuilder();
    for (JsonNode t : teams) {
      held(
          out,
          "Team " + t.path("name").asText(),
          t.path("held"),
          t.path("name").asText() + " --team",
          zone);
    }
    for (JsonNode r : routes) {
      held(out, "Route " + r.path("name").asText(), r.path("held"), r.path("name").asText(), zone);
    }
    for (JsonNode r : routes) {
      JsonNode s = r.path("stalled");
      if (s.isObject()) {
        out.append("Route ")
            .append(r.path("name").asText())
            .append(" takes no launches now (since ")
            .append(Text.at(s.path("since"), zone))
            .append("): ")
            .append(s.path("why").asText())
            .append(" (its queued builds wait; docs/clusters.md)\n");
      }
    }
    return out.toString();
  }

  private static void held(
      StringBuilder out, String what, JsonNode h, String release, java.time.ZoneId zone) {
    if (!h.isObject()) {
      return;
    }
    out.append(what)
        .append(" is HELD by ")
        .append(h.path("by").asText())
        .append(" since ")
        .append(Text.at(h.path("at"), zone))
        .append(": ")
        .append(h.path("why").asText())
        .append(" (its queued builds wait; oneshot routes release ")
        .append(release)
        .append(")\n");
  }

  /** Where {@code oneshot routes hold} and {@code release} send: a route's, or a team's. */
  private static String path(String name, boolean team, String action) {
    return (team ? "/api/v1/teams/" : "/api/v1/routes/")
        + java.net.URLEncoder.encode(name, java.nio.charset.StandardCharsets.UTF_8)
            .replace("+", "%20")
        + "/"
        + action;
  }

  @Command(
      name = "hold",
      header = "Holds a route or a team: none of its builds is claimed.",
      mixinStandardHelpOptions = true,
      description = {
        "Holds a route, or a team (--team: every route in it): no build of it is claimed until it"
            + " is released. Its queued builds stay queued, and each says who held it and why;"
            + " what runs is not touched (cancel it with oneshot builds cancel). The hold is kept"
            + " across restarts and is in the audit trail. Needs the admin token or an operator's"
            + " token covering the route (for a team, every route in it)."
      },
      footer = {
        "",
        "Examples:",
        "  oneshot routes hold team-a --why \"state migration, back at 14:00\"",
        "  oneshot routes hold platform --team --why \"cluster upgrade\""
      })
  static final class Hold implements Callable<Integer> {
    @Spec picocli.CommandLine.Model.CommandSpec spec;
    @Mixin ClientOptions client;

    @picocli.CommandLine.Parameters(
        index = "0",
        paramLabel = "NAME",
        description = "The route's name (or the team's, with --team).")
    String name;

    @Option(
        names = "--team",
        description = "NAME is a team: hold every route in it (teams[] in the configuration).")
    boolean team;

    @Option(
        names = "--why",
        required = true,
        paramLabel = "TEXT",
        description =
            "Why it is held: shown with every build the hold keeps waiting, in oneshot routes and"
                + " the console (one line, at most 500 characters).")
    String why;

    @Override
    public Integer call() {
      JsonNode r = client.client().post(path(name, team, "hold"), Json.write(Map.of("why", why)));
      PrintWriter out = spec.commandLine().getOut();
      if (client.json()) {
        out.println(Json.write(r));
      } else {
        out.println(
            (team ? "Team " : "Route ")
                + name
                + " is held: none of its builds is claimed until oneshot routes release "
                + name
                + (team ? " --team" : "")
                + ".");
      }
      out.flush();
      return Main.OK;
    }
  }

  @Command(
      name = "release",
      header = "Releases a held route or team.",
      mixinStandardHelpOptions = true,
      description = {
        "Releases a held route, or a team (--team): its queued builds are claimed again, in their"
            + " order, as the limits and the teams' shares allow. Releasing what is not held"
            + " changes nothing."
      },
      footer = {
        "",
        "Examples:",
        "  oneshot routes release team-a",
        "  oneshot routes release platform --team"
      })
  static final class Release implements Callable<Integer> {
    @Spec picocli.CommandLine.Model.CommandSpec spec;
    @Mixin ClientOptions client;

    @picocli.CommandLine.Parameters(
        index = "0",
        paramLabel = "NAME",
        description = "The route's name (or the team's, with --team).")
    String name;

    @Option(names = "--team", description = "NAME is a team: release every route in it.")
    boolean team;

    @Override
    public Integer call() {
      JsonNode r = client.client().post(path(name, team, "release"), "");
      PrintWriter out = spec.commandLine().getOut();
      if (client.json()) {
        out.println(Json.write(r));
      } else if (r.path("was").isObject()) {
        out.println(
            (team ? "Team " : "Route ")
                + name
                + " is released (held by "
                + r.path("was").path("by").asText()
                + " since "
                + Text.at(r.path("was").path("at"), client.zone())
                + ").");
      } else {
        out.println((team ? "Team " : "Route ") + name + " was not held.");
      }
      out.flush();
      return Main.OK;
    }
  }

  /**
   * The warm routes' balloons, or nothing when no route keeps any: running of wanted, pending, the
   * last day's balloon-hours and preemptions, and why that many (or what keeps them from being
   * kept).
   */
  static String warm(JsonNode routes) {
    List<List<String>> rows = new ArrayList<>();
    for (JsonNode r : routes) {
      JsonNode w = r.path("warm");
      if (!w.isObject()) {
        continue;
      }
      String why = w.path("why").asText();
      if (w.hasNonNull("trouble")) {
        why = "NOT KEPT: " + w.path("trouble").asText() + " (" + why + ")";
      }
      rows.add(
          List.of(
              r.path("name").asText(),
              w.path("running").asText() + "/" + w.path("wanted").asText(),
              w.path("pending").asText(),
              String.format(java.util.Locale.ROOT, "%.1f h", w.path("balloonHours").asDouble()),
              w.path("preemptions").asText(),
              why));
    }
    if (rows.isEmpty()) {
      return "";
    }
    return Text.table(
        List.of("ROUTE", "BALLOONS", "PENDING", "LAST DAY", "PREEMPTED", "WHY THIS MANY"), rows);
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
