package io.oneshot.cli;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.api.Json;
import java.io.PrintWriter;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
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
    name = "builds",
    header = "Lists, shows, follows, cancels and reruns builds.",
    mixinStandardHelpOptions = true,
    description = "Lists, shows, follows, cancels and reruns builds.",
    subcommands = {
      BuildsCommand.ListBuilds.class,
      BuildsCommand.Show.class,
      BuildsCommand.Logs.class,
      BuildsCommand.Cancel.class,
      BuildsCommand.Rerun.class,
      BuildsCommand.Input.class
    },
    footer = {
      "",
      "Examples:",
      "  oneshot builds list --status running",
      "  oneshot builds show 42",
      "  oneshot builds logs 42 -f",
      "  oneshot builds cancel 42 --wait",
      "  oneshot builds rerun 42 --follow",
      "  oneshot builds input 42 > build.json"
    })
final class BuildsCommand implements Callable<Integer> {
  @Spec picocli.CommandLine.Model.CommandSpec spec;

  @Override
  public Integer call() {
    spec.commandLine().usage(spec.commandLine().getErr());
    return Main.USAGE;
  }

  @Command(
      name = "list",
      header = "Lists builds, newest first.",
      mixinStandardHelpOptions = true,
      description = "Lists builds, newest first.",
      footer = {
        "",
        "Examples:",
        "  oneshot builds list",
        "  oneshot builds list --status pending --route default",
        "  oneshot builds list --status failed --limit 10 -o json",
        "  oneshot builds list --tag team=a --since 2h",
        "  oneshot builds list --workspace prod --route team-a",
        "",
        "RAN is how long a build ran once provisionerd acquired it; AGE is since it was enqueued."
      })
  static final class ListBuilds implements Callable<Integer> {
    @Spec picocli.CommandLine.Model.CommandSpec spec;
    @Mixin ClientOptions client;

    @Option(
        names = "--status",
        paramLabel = "STATUS",
        description =
            "Only builds in STATUS: pending, launching, running, succeeded, failed, canceled.")
    String status;

    @Option(names = "--route", paramLabel = "ROUTE", description = "Only builds of ROUTE.")
    String route;

    @Option(
        names = "--tag",
        paramLabel = "KEY=VALUE",
        description = "Only builds with this tag (repeatable: with every tag given).")
    Map<String, String> tags = new LinkedHashMap<>();

    @Option(
        names = "--workspace",
        paramLabel = "NAME",
        description = "Only builds of workspace NAME.")
    String workspace;

    @Option(
        names = "--since",
        paramLabel = "WHEN",
        description =
            "Only builds enqueued since WHEN: a duration back from now (90m, 2h, 7d) or a time"
                + " (2026-11-24T09:00:00Z).")
    String since;

    @Option(
        names = "--limit",
        paramLabel = "N",
        defaultValue = "50",
        description = "At most N builds, 1 to 1000 (default: ${DEFAULT-VALUE}).")
    int limit;

    @Override
    public Integer call() {
      StringBuilder q = new StringBuilder("/api/v1/builds?limit=" + limit);
      tags.forEach(
          (k, v) ->
              q.append("&tag=").append(URLEncoder.encode(k + "=" + v, StandardCharsets.UTF_8)));
      if (workspace != null) {
        q.append("&workspace=").append(URLEncoder.encode(workspace, StandardCharsets.UTF_8));
      }
      if (since != null) {
        q.append("&since=").append(URLEncoder.encode(since(since), StandardCharsets.UTF_8));
      }
      if (status != null) {
        q.append("&status=").append(URLEncoder.encode(status, StandardCharsets.UTF_8));
      }
      if (route != null) {
        q.append("&route=").append(URLEncoder.encode(route, StandardCharsets.UTF_8));
      }
      ApiClient api = client.client();
      JsonNode list = api.get(q.toString());
      if (route != null && list.path("builds").isEmpty()) {
        knownRoute(api, route);
      }
      PrintWriter out = spec.commandLine().getOut();
      if (client.json()) {
        out.println(Json.write(list));
        return Main.OK;
      }
      List<List<String>> rows = new ArrayList<>();
      Instant now = Instant.now();
      for (JsonNode b : list.path("builds")) {
        rows.add(
            List.of(
                b.path("id").asText(),
                Waiting.label(b.path("status").asText()),
                b.path("route").asText(),
                runs(b, 40),
                b.path("attempt").asText(),
                Text.duration(Duration.between(Text.time(b.path("createdAt")), now)),
                Text.between(b.path("startedAt"), b.path("finishedAt")),
                Text.orDash(b.path("reason"))));
      }
      if (rows.isEmpty()) {
        out.println("no builds");
      } else {
        out.print(
            Text.table(
                List.of("ID", "STATUS", "ROUTE", "RUNS", "ATTEMPT", "AGE", "RAN", "REASON"), rows));
      }
      return Main.OK;
    }
  }

  /**
   * What a build runs, in at most {@code width} characters: its {@code what} (a script's command,
   * terraform's transition), or its provisioner.
   */
  static String runs(JsonNode b, int width) {
    String what = b.path("what").asText(b.path("provisioner").asText("-"));
    return what.length() <= width ? what : what.substring(0, width - 1) + "…";
  }

  /** {@code --since}: a time as given, or a duration back from now as a time. */
  static String since(String when) {
    if (when.matches("\\d.*[a-zA-Z]") && !when.contains("T")) {
      try {
        return Instant.now().minus(io.oneshot.config.Units.parseDuration(when)).toString();
      } catch (RuntimeException e) {
        throw new IllegalArgumentException(
            "--since: '"
                + when
                + "' is neither a duration (90m, 2h, 7d) nor a time ("
                + "2026-11-24T09:00:00Z)");
      }
    }
    return when;
  }

  /** Refuses a route the server does not have, naming those it has. */
  static void knownRoute(ApiClient api, String route) {
    List<String> names = new ArrayList<>();
    for (JsonNode r : api.get("/api/v1/routes")) {
      names.add(r.path("name").asText());
    }
    if (!names.contains(route)) {
      throw new CliException(
          Main.USAGE,
          "--route: no route " + route + "; the routes are " + String.join(", ", names));
    }
  }

  @Command(
      name = "show",
      header = "Shows a build, its timeline and why it waits.",
      mixinStandardHelpOptions = true,
      description = "Shows a build and its timeline: what happened, when, and why it waits.",
      footer = {
        "",
        "Examples:",
        "  oneshot builds show 42",
        "  oneshot builds show 42 -o json      # every field, outputs and every event"
      })
  static final class Show implements Callable<Integer> {
    @Spec picocli.CommandLine.Model.CommandSpec spec;
    @Mixin ClientOptions client;

    @Parameters(paramLabel = "ID", description = "The build's id.")
    long id;

    @Override
    public Integer call() {
      JsonNode b = client.client().get("/api/v1/builds/" + id);
      PrintWriter out = spec.commandLine().getOut();
      if (client.json()) {
        out.println(Json.write(b));
        return Main.OK;
      }
      out.println(
          "build "
              + b.path("id").asText()
              + "  "
              + Waiting.label(b.path("status").asText())
              + "  route "
              + b.path("route").asText()
              + "  attempt "
              + b.path("attempt").asText());
      List<List<String>> fields = new ArrayList<>();
      fields.add(List.of("  provisioner", Text.orDash(b.path("provisioner"))));
      fields.add(List.of("  runs", runs(b, 120)));
      fields.add(List.of("  tags", Text.tags(b.path("tags"))));
      fields.add(List.of("  workspace", Text.orDash(b.path("workspace"))));
      fields.add(List.of("  priority", b.path("priority").asText()));
      if (b.path("pod").isObject()) {
        fields.add(List.of("  pod", pod(b.path("pod"))));
      }
      if (b.hasNonNull("rerunOf")) {
        fields.add(List.of("  rerun of", "build " + b.path("rerunOf").asText()));
      }
      fields.add(List.of("  created", Text.at(b.path("createdAt"), client.zone())));
      fields.add(List.of("  waited", Text.between(b.path("createdAt"), b.path("startedAt"))));
      fields.add(List.of("  ran", Text.between(b.path("startedAt"), b.path("finishedAt"))));
      fields.add(List.of("  reason", Text.orDash(b.path("reason"))));
      if (b.hasNonNull("exitCode")) {
        fields.add(List.of("  exit code", b.path("exitCode").asText()));
      }
      String hit = limitsHit(b.path("usage"));
      if (!hit.isEmpty()) {
        fields.add(List.of("  limits hit", hit));
      }
      if (b.hasNonNull("error")) {
        fields.add(List.of("  error", b.path("error").asText()));
      }
      JsonNode launch = b.path("launch");
      if (launch.isObject()) {
        boolean k8s = "kubernetes".equals(launch.path("kind").asText());
        String ns = launch.path("namespace").asText("");
        String name = launch.path("name").asText();
        fields.add(
            List.of(
                "  launch",
                k8s
                    ? "Job "
                        + ns
                        + "/"
                        + name
                        + (launch.hasNonNull("pod") ? ", pod " + launch.path("pod").asText() : "")
                    : launch.path("kind").asText()
                        + " "
                        + name
                        + (launch.hasNonNull("pod")
                            ? " (" + launch.path("pod").asText() + ")"
                            : "")));
        if (launch.hasNonNull("removedAt")) {
          // The rescuer deleted the Job (and its pod): kubectl would answer NotFound.
          fields.add(
              List.of(
                  "  removed",
                  Text.at(launch.path("removedAt"), client.zone())
                      + ": "
                      + launch.path("removedWhy").asText("")
                      + "; its log: oneshot builds logs "
                      + b.path("id").asText()));
        } else if (k8s) {
          fields.add(List.of("  kubectl", "kubectl logs -n " + ns + " job/" + name));
        }
      }
      JsonNode runner = b.path("runner");
      if (runner.isObject()) {
        fields.add(List.of("  runner", runnerLine(runner, client.zone())));
      }
      if (b.hasNonNull("stateRead") || b.hasNonNull("stateWritten")) {
        fields.add(
            List.of(
                "  state",
                "workspace "
                    + Text.orDash(b.path("workspace"))
                    + ": read version "
                    + b.path("stateRead").asText("-")
                    + (b.hasNonNull("stateWritten")
                        ? ", wrote version " + b.path("stateWritten").asText()
                        : ", wrote none")));
      }
      for (java.util.Map.Entry<String, JsonNode> o : b.path("outputs").properties()) {
        JsonNode v = o.getValue();
        String shown =
            v.path("sensitive").asBoolean(false)
                ? "(sensitive)"
                : v.path("value").isTextual()
                    ? v.path("value").asText()
                    : Json.write(v.path("value"));
        fields.add(List.of("  output", o.getKey() + " = " + shown));
      }
      out.print(Text.columns(fields));
      out.println("timeline");
      List<List<String>> rows = new ArrayList<>();
      Instant first = null;
      Instant prev = null;
      for (JsonNode e : b.path("events")) {
        Instant at = Text.time(e.path("at"));
        if (first == null) {
          first = at;
        }
        String from = e.path("from").isNull() ? null : e.path("from").asText();
        String to = e.path("to").asText();
        String what =
            from == null
                ? "enqueued"
                : from.equals(to)
                    ? Waiting.label(to)
                    : Waiting.label(from) + " → " + Waiting.label(to);
        rows.add(
            List.of(
                "  +" + Text.duration(Duration.between(first, at)),
                prev == null ? "" : "(" + Text.duration(Duration.between(prev, at)) + ")",
                "#" + e.path("attempt").asText(),
                what,
                Text.orDash(e.path("reason"))));
        prev = at;
      }
      out.print(Text.table(List.of("  AT", "STEP", "TRY", "WHAT", "WHY"), rows));
      return Main.OK;
    }
  }

  @Command(
      name = "logs",
      header = "Prints a build's log; -f follows it to its end.",
      mixinStandardHelpOptions = true,
      description = "Prints a build's log; with -f, follows it until the build ends.",
      footer = {
        "",
        "Examples:",
        "  oneshot builds logs 42",
        "  oneshot builds logs 42 -f           # exit code: the build's (0, 1 failed, 3 canceled)",
        "  oneshot builds logs 42 --after 300  # lines after sequence number 300",
        "",
        "Lines oneshot itself wrote are marked [oneshot]."
      })
  static final class Logs implements Callable<Integer> {
    @Spec picocli.CommandLine.Model.CommandSpec spec;
    @Mixin ClientOptions client;

    @Parameters(paramLabel = "ID", description = "The build's id.")
    long id;

    @Option(
        names = {"-f", "--follow"},
        description = "Keep streaming until the build ends.")
    boolean follow;

    @Option(
        names = "--after",
        paramLabel = "SEQ",
        defaultValue = "0",
        description = "Only lines after sequence number SEQ.")
    long after;

    @Override
    public Integer call() {
      ApiClient api = client.client();
      PrintWriter out = spec.commandLine().getOut();
      if (follow) {
        // A build that had ended says so after its log: -f printed the log and returned at once,
        // which read as a build that ended just then.
        JsonNode before = api.get("/api/v1/builds/" + id);
        JsonNode b = Waiting.follow(api, id, after, out, client.json());
        PrintWriter err = spec.commandLine().getErr();
        Waiting.summary(b, err);
        if (Waiting.terminal(before.path("status").asText())) {
          err.println(
              "(it had ended before -f began, at "
                  + Text.at(before.path("finishedAt"), client.zone())
                  + ")");
        }
        err.flush();
        return Waiting.exitCode(b);
      }
      api.stream(
          "/api/v1/builds/" + id + "/logs?after=" + after,
          l -> out.println(client.json() ? l : Text.logLine(Json.tree(l))));
      out.flush();
      return Main.OK;
    }
  }

  @Command(
      name = "cancel",
      header = "Cancels a build.",
      mixinStandardHelpOptions = true,
      description = {
        "Cancels a build. A queued or launching build is canceled at once; a running one is"
            + " interrupted by provisionerd (terraform gets SIGINT, scripts SIGTERM), killed after"
            + " the route's cancel grace, and ends canceled."
      },
      footer = {
        "",
        "Examples:",
        "  oneshot builds cancel 42",
        "  oneshot builds cancel 42 --wait     # until it has stopped"
      })
  static final class Cancel implements Callable<Integer> {
    @Spec picocli.CommandLine.Model.CommandSpec spec;
    @Mixin ClientOptions client;

    @Parameters(paramLabel = "ID", description = "The build's id.")
    long id;

    @Option(names = "--wait", description = "Wait until the build has ended.")
    boolean wait;

    @Override
    public Integer call() {
      ApiClient api = client.client();
      JsonNode r = api.post("/api/v1/builds/" + id + "/cancel", "{}");
      PrintWriter out = spec.commandLine().getOut();
      PrintWriter err = spec.commandLine().getErr();
      if (!wait) {
        if (client.json()) {
          out.println(Json.write(r));
        } else if (r.path("cancelRequested").asBoolean(false)) {
          out.println("build " + id + ": cancel requested; provisionerd is stopping it");
        } else {
          out.println("build " + id + " canceled");
        }
        return Main.OK;
      }
      JsonNode b = Waiting.await(api, id, err);
      if (client.json()) {
        out.println(Json.write(b));
      }
      Waiting.summary(b, err);
      return Waiting.exitCode(b);
    }
  }

  @Command(
      name = "rerun",
      header = "Runs a finished build again.",
      mixinStandardHelpOptions = true,
      description = {
        "Runs a finished build again: a new build with the same input, tags, priority and"
            + " workspace, linked to the original (`builds show` says \"rerun of build ID\"). It is"
            + " routed by today's routes; a build that has not finished cannot be rerun. The pod"
            + " options change what it asks for its pod (--memory 1Gi for one killed for memory),"
            + " within its route's rules, as submit's do."
      },
      footer = {
        "",
        "Examples:",
        "  oneshot builds rerun 42",
        "  oneshot builds rerun 42 --follow",
        "  oneshot builds rerun 42 --memory 1Gi --follow   (it was killed for memory)",
        "",
        "Exit codes with --wait or --follow: 0 succeeded, 1 failed, 3 canceled."
      })
  static final class Rerun implements Callable<Integer> {
    @Spec picocli.CommandLine.Model.CommandSpec spec;
    @Mixin ClientOptions client;

    @Parameters(paramLabel = "ID", description = "The finished build to run again.")
    long id;

    /**
     * Changes to its pod settings: a resource given replaces that resource, any other setting the
     * setting.
     */
    @Mixin PodOptions pod;

    @Option(names = "--wait", description = "Wait until the new build has ended.")
    boolean wait;

    @Option(
        names = {"-f", "--follow"},
        description = "Stream the new build's log until it ends.")
    boolean follow;

    @Override
    public Integer call() {
      ApiClient api = client.client();
      var own = pod.pod();
      JsonNode created =
          api.post(
              "/api/v1/builds/" + id + "/rerun",
              own == null ? "{}" : Json.write(Json.MAPPER.createObjectNode().set("pod", own)));
      String line =
          "build "
              + created.path("id").asLong()
              + " queued on route "
              + created.path("route").asText()
              + ", a rerun of build "
              + id;
      return Waiting.queued(
          api,
          created,
          line,
          wait,
          follow,
          client.json(),
          spec.commandLine().getOut(),
          spec.commandLine().getErr());
    }
  }

  /**
   * A build's own pod settings in a line: "requests memory=1Gi cpu=2; limits memory=2Gi; image ...;
   * nodeSelector pool=gpu; tolerations gpu:NoSchedule; labels ...; annotations ...; serviceAccount
   * ...".
   */
  static String pod(JsonNode pod) {
    List<String> parts = new ArrayList<>();
    for (String kind : List.of("requests", "limits")) {
      JsonNode m = pod.path("resources").path(kind);
      if (m.isObject() && !m.isEmpty()) {
        parts.add(kind + " " + pairs(m));
      }
    }
    if (pod.hasNonNull("image")) {
      parts.add("image " + pod.path("image").asText());
    }
    for (String map : List.of("nodeSelector", "labels", "annotations")) {
      if (pod.path(map).isObject() && !pod.path(map).isEmpty()) {
        parts.add(map + " " + pairs(pod.path(map)));
      }
    }
    if (pod.path("tolerations").isArray() && !pod.path("tolerations").isEmpty()) {
      List<String> t = new ArrayList<>();
      for (JsonNode n : pod.path("tolerations")) {
        t.add(
            n.path("key").asText()
                + (n.hasNonNull("value") ? "=" + n.path("value").asText() : "")
                + (n.hasNonNull("effect") && !n.path("effect").asText().isEmpty()
                    ? ":" + n.path("effect").asText()
                    : ""));
      }
      parts.add("tolerations " + String.join(" ", t));
    }
    if (pod.hasNonNull("serviceAccount")) {
      parts.add("serviceAccount " + pod.path("serviceAccount").asText());
    }
    return String.join("; ", parts);
  }

  /**
   * What a build met of its pod's limits, as its provisionerd reported: "the OOM killer killed 1
   * process at the 512 MiB memory limit; throttled 3.2 s by its CPU limit of 500m"; empty when
   * nothing.
   */
  static String limitsHit(JsonNode usage) {
    List<String> parts = new ArrayList<>();
    if (usage.path("oomKills").asLong() > 0) {
      long n = usage.path("oomKills").asLong();
      parts.add(
          "the OOM killer killed "
              + n
              + (n == 1 ? " process" : " processes")
              + (usage.hasNonNull("memoryLimitBytes")
                  ? " at the "
                      + io.oneshot.config.Units.formatSize(usage.path("memoryLimitBytes").asLong())
                      + " memory limit"
                  : ""));
    }
    if (usage.path("cpuThrottledSeconds").asDouble() >= 1) {
      parts.add(
          String.format(
                  java.util.Locale.ROOT,
                  "throttled %.1f s by its CPU limit",
                  usage.path("cpuThrottledSeconds").asDouble())
              + (usage.hasNonNull("cpuLimitCores")
                  ? " of " + millicores(usage.path("cpuLimitCores").asDouble())
                  : ""));
    }
    return String.join("; ", parts);
  }

  private static String millicores(double cores) {
    long m = Math.round(cores * 1000);
    return m % 1000 == 0 ? Long.toString(m / 1000) : m + "m";
  }

  private static String pairs(JsonNode obj) {
    List<String> out = new ArrayList<>();
    obj.properties().forEach(e -> out.add(e.getKey() + "=" + e.getValue().asText()));
    return String.join(" ", out);
  }

  @Command(
      name = "input",
      header = "Prints a build's input as submitted (JSON).",
      mixinStandardHelpOptions = true,
      description = {
        "Prints a build's input as it was submitted (JSON), to read what ran or to submit it again"
            + " changed (submit --input)."
      },
      footer = {
        "",
        "Examples:",
        "  oneshot builds input 42",
        "  oneshot builds input 42 > build.json && oneshot submit --input build.json --tag org=dev"
      })
  static final class Input implements Callable<Integer> {
    @Spec picocli.CommandLine.Model.CommandSpec spec;
    @Mixin ClientOptions client;

    @Parameters(paramLabel = "ID", description = "The build's id.")
    long id;

    @Override
    public Integer call() {
      JsonNode in = client.client().get("/api/v1/builds/" + id + "/input");
      spec.commandLine().getOut().println(in.toPrettyString());
      return Main.OK;
    }
  }

  /** "3f9c1a2b in pod oneshot-7-1-x2k9p, since 2026-…" or "3f9c1a2b, process 4242 on host-1, …". */
  static String runnerLine(JsonNode r, java.time.ZoneId zone) {
    StringBuilder s = new StringBuilder(r.path("runner").asText());
    if (r.hasNonNull("pod")) {
      s.append(" in pod ").append(r.path("pod").asText());
    } else if (r.hasNonNull("pid")) {
      s.append(", process ").append(r.path("pid").asText());
      if (r.hasNonNull("host")) {
        s.append(" on ").append(r.path("host").asText());
      }
    }
    if (r.hasNonNull("since")) {
      s.append(", since ").append(Text.at(r.path("since"), zone));
    }
    return s.toString();
  }
}
