package io.oneshot.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.api.Json;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The CLI against a running server: output, exit codes, and refusals that write nothing. */
class CliTest {
  private static TestServer t;

  @BeforeAll
  static void start() {
    t = TestServer.with().routes(TestServer.THREE_ROUTES).start();
  }

  @AfterAll
  static void stop() {
    t.close();
  }

  @BeforeEach
  void empty() {
    Sql.emptyBuilds();
    // A test that failed while a route was held would leave the next ones waiting on it.
    Sql.exec("UPDATE oneshot.routes SET held_at = NULL, held_by = NULL, held_why = NULL");
    Sql.exec("UPDATE oneshot.teams SET held_at = NULL, held_by = NULL, held_why = NULL");
  }

  /** What a command printed and returned. */
  record Run(int code, String out, String err) {
    JsonNode json() {
      return Json.tree(out);
    }
  }

  private static Run oneshot(String... args) {
    List<String> all = new ArrayList<>(List.of(args));
    boolean client =
        !List.of("dev", "dispatcher", "provisionerd", "migrate", "help").contains(args[0]);
    if (client && !all.contains("--url") && !all.contains("--help")) {
      all.addAll(List.of("--url", t.api.base(), "--token", TestServer.ADMIN_TOKEN));
    }
    StringWriter out = new StringWriter();
    StringWriter err = new StringWriter();
    int code =
        Main.commandLine(new PrintWriter(out, true), new PrintWriter(err, true))
            .execute(all.toArray(String[]::new));
    return new Run(code, out.toString(), err.toString());
  }

  /**
   * Under a locale that names no character set (LC_ALL=C, or none at all, as in many containers), a
   * build's log still prints as it was written: terraform's box drawing, a check mark. Java takes
   * such a terminal for ASCII and would print '?' for each.
   */
  @Test
  void aLogPrintsAsWrittenUnderTheCLocale() throws Exception {
    long id = t.api.submitScript("{}", "printf '\\342\\224\\202 \\342\\234\\223 done\\n'");
    org.awaitility.Awaitility.await()
        .atMost(60, java.util.concurrent.TimeUnit.SECONDS)
        .until(() -> TestServer.status(id).equals("succeeded"));
    ProcessBuilder pb =
        new ProcessBuilder(
            java.nio.file.Path.of(System.getProperty("java.home"), "bin", "java").toString(),
            "-cp",
            System.getProperty("java.class.path"),
            "io.oneshot.cli.Main",
            "builds",
            "logs",
            Long.toString(id),
            "--url",
            t.api.base(),
            "--token",
            TestServer.ADMIN_TOKEN);
    pb.environment().keySet().removeIf(k -> k.startsWith("LC_") || k.equals("LANG"));
    pb.environment().put("LC_ALL", "C");
    pb.redirectErrorStream(true);
    Process p = pb.start();
    byte[] bytes = p.getInputStream().readAllBytes();
    assertThat(p.waitFor(60, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
    String out = new String(bytes, java.nio.charset.StandardCharsets.UTF_8);
    assertThat(p.exitValue()).as(out).isZero();
    assertThat(out).contains("\u2502 \u2713 done");
  }

  @Test
  void routesHoldAndReleaseSayWhatTheyDidAndTheHoldShowsInTheTable() {
    Run held = oneshot("routes", "hold", "b", "--why", "state migration until 14:00");
    assertThat(held.code()).as(held.err()).isZero();
    assertThat(held.out())
        .isEqualTo(
            "Route b is held: none of its builds is claimed until oneshot routes release b.\n");
    Run routes = oneshot("routes");
    assertThat(routes.out())
        .containsPattern(
            "Route b is HELD by admin since \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d \\S+: state"
                + " migration until 14:00 \\(its queued builds"
                + " wait; oneshot routes release b\\)")
        // No teams configured: every route is a team of its own, and no table says so.
        .doesNotContain("WEIGHT");
    assertThat(oneshot("routes", "-o", "json").json().get(1).path("held").path("by").asText())
        .isEqualTo("admin");
    Run released = oneshot("routes", "release", "b");
    assertThat(released.out()).startsWith("Route b is released (held by admin since ");
    assertThat(oneshot("routes", "release", "b").out()).isEqualTo("Route b was not held.\n");
    assertThat(oneshot("routes").out()).doesNotContain("HELD");

    // A route is its own team when it names none.
    assertThat(oneshot("routes", "hold", "c", "--team", "--why", "x").out())
        .startsWith("Team c is held");
    assertThat(oneshot("routes").out()).contains("Team c is HELD by admin");
    assertThat(oneshot("routes", "release", "c", "--team").out()).startsWith("Team c is released");

    Run noWhy = oneshot("routes", "hold", "b");
    assertThat(noWhy.code()).isEqualTo(Main.USAGE);
    assertThat(noWhy.err()).contains("Missing required option: '--why=TEXT'");
    Run unknown = oneshot("routes", "hold", "nope", "--why", "x");
    assertThat(unknown.code()).isNotZero();
    assertThat(unknown.err()).contains("route nope");
    assertThat(Sql.count("SELECT count(*) FROM oneshot.routes WHERE held_at IS NOT NULL")).isZero();
  }

  @Test
  void theTeamsTableShowsEachTeamsShareUseAndBorrowing() {
    JsonNode teams =
        Json.tree(
            """
            [{"name": "platform", "weight": 2, "guaranteed": 4, "borrowLimit": 10,
              "maxConcurrent": null, "share": 26.7, "running": 30, "queued": 120, "borrowed": 3,
              "routes": ["web", "api"], "held": null},
             {"name": "solo", "weight": 1, "guaranteed": 0, "borrowLimit": null,
              "maxConcurrent": 5, "share": 13.3, "running": 5, "queued": 0, "borrowed": 0,
              "routes": ["solo"], "held": {"at": "2026-12-06T10:00:00.000Z", "by": "ops",
              "why": "upgrade"}}]
            """);
    assertThat(RoutesCommand.configured(teams)).isTrue();
    assertThat(RoutesCommand.teams(teams).lines().toList())
        .containsExactly(
            "TEAM         WEIGHT  SHARE  GUARANTEED  BORROW LIMIT  LIMIT  RUNNING  BORROWED  QUEUED "
                + " ROUTES",
            "platform     2       26.7   4           10            -      30       3         120   "
                + "  web, api",
            "solo (HELD)  1       13.3   -           -             5      5        0         0     "
                + "  solo");
    assertThat(RoutesCommand.held(Json.tree("[]"), teams, java.time.ZoneOffset.UTC))
        .isEqualTo(
            "Team solo is HELD by ops since 2026-12-06 10:00:00 UTC: upgrade (its queued builds"
                + " wait; oneshot routes release solo --team)\n");
    // Routes that each are a team of their own, of weight 1, are no configuration of teams.
    assertThat(
            RoutesCommand.configured(
                Json.tree(
                    "[{\"name\": \"a\", \"weight\": 1, \"guaranteed\": 0, \"borrowLimit\": null,"
                        + " \"maxConcurrent\": null, \"routes\": [\"a\"]}]")))
        .isFalse();
  }

  @Test
  void submitWaitShowsProgressAndEndsWithTheBuildsExitCode(@TempDir Path dir) throws Exception {
    // The build runs until the progress line has shown it running, so that no poll can skip it.
    Path go = dir.resolve("go");
    String script = "while [ ! -e '" + go + "' ]; do sleep 0.05; done; echo hi";
    StringWriter progress = new StringWriter();
    CompletableFuture<Integer> waiting =
        CompletableFuture.supplyAsync(
            () ->
                Main.commandLine(
                        new PrintWriter(new StringWriter(), true), new PrintWriter(progress, true))
                    .execute(
                        "submit",
                        "--script",
                        script,
                        "--tag",
                        "team=a",
                        "--wait",
                        "--url",
                        t.api.base(),
                        "--token",
                        TestServer.ADMIN_TOKEN));
    await().atMost(30, TimeUnit.SECONDS).until(() -> progress.toString().contains("  running  "));
    Files.createFile(go);
    Run ok = new Run(waiting.get(30, TimeUnit.SECONDS), "", progress.toString());
    assertThat(ok.code()).as(ok.err()).isZero();
    // The first poll sees the build pending or already launching (claimed within milliseconds),
    // and launching lasts until provisionerd's acquire, about one poll (250 ms) with the local
    // launcher: which of the two a poll sees is timing, the order of what it shows is not.
    assertThat(ok.err())
        .containsSubsequence("queued on route a", "  running  ", "  succeeded  ", " succeeded in ")
        .containsPattern(
            "queued on route a\nbuild \\d+  (pending|launching)  .*\n(.*\n)*build \\d+  running  ")
        .containsPattern(" succeeded in \\S+ \\(waited \\S+, ran \\S+, exit code 0\\)");

    Run failed = oneshot("submit", "--script", "exit 7", "--tag", "team=b", "--wait");
    assertThat(failed.code()).isEqualTo(Main.BUILD_FAILED);
    assertThat(failed.err())
        .containsPattern(
            "build \\d+ failed after \\S+ \\(waited \\S+, ran \\S+, exit code 7\\): script exited with code 7");
  }

  @Test
  void submitFollowStreamsTheLog() {
    Run r =
        oneshot(
            "submit",
            "--script",
            "echo first; echo second >&2; echo \"hello $WHO\"",
            "--env",
            "WHO=you",
            "--follow");
    assertThat(r.code()).as(r.err()).isZero();
    assertThat(r.out())
        .contains("first\n")
        .as("--env reaches the script as input.env")
        .contains("hello you\n")
        .contains("second\n")
        .contains("[oneshot] script exited with code 0");
  }

  /**
   * {@code logs -f} of a build that had already ended prints its log from {@code --after}, then
   * says how it ended and that it had ended before; its exit code is the build's.
   */
  @Test
  void followingAnEndedBuildSaysItHadEnded() {
    Run r =
        oneshot("submit", "--script", "echo one; echo two; exit 3", "--tag", "team=b", "--wait");
    assertThat(r.code()).isEqualTo(Main.BUILD_FAILED);
    long id =
        oneshot("builds", "list", "-o", "json").json().path("builds").get(0).path("id").asLong();
    List<String> all =
        oneshot("builds", "logs", Long.toString(id), "-o", "json").out().lines().toList();
    long one =
        all.stream()
            .map(Json::tree)
            .filter(l -> l.path("text").asText().equals("one"))
            .findFirst()
            .orElseThrow()
            .path("seq")
            .asLong();
    // What it runs, in the list and in show.
    List<String> listed = oneshot("builds", "list").out().lines().toList();
    assertThat(listed.get(0).split("\\s{2,}"))
        .containsExactly("ID", "STATUS", "ROUTE", "RUNS", "ATTEMPT", "AGE", "RAN", "REASON");
    assertThat(listed.get(1)).contains("  echo one; echo two; exit 3  ");
    assertThat(oneshot("builds", "show", Long.toString(id)).out())
        .containsPattern("\\n  runs +echo one; echo two; exit 3\\n");
    Run f = oneshot("builds", "logs", Long.toString(id), "-f", "--after", Long.toString(one));
    assertThat(f.code()).isEqualTo(Main.BUILD_FAILED);
    assertThat(f.out()).doesNotContain("one\n").contains("two\n");
    assertThat(f.err())
        .containsPattern(
            "build " + id + " failed after \\S+ \\(waited \\S+, ran \\S+, exit code 3\\)")
        .containsPattern(
            "\\(it had ended before -f began, at \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d ");
    // Followed while it ran, it says nothing of the kind.
    Run live = oneshot("submit", "--script", "echo live", "--tag", "team=b", "-o", "json");
    Run followed = oneshot("builds", "logs", live.json().path("id").asText(), "-f");
    assertThat(followed.code()).isZero();
    assertThat(followed.out()).contains("live\n");
    assertThat(followed.err()).contains(" succeeded in ").doesNotContain("had ended");
  }

  @Test
  void buildsAreListedByTagWorkspaceAndAge() {
    long a = t.api.submitScript("{\"team\": \"b\"}", "true");
    long b = t.api.submitScript("{\"team\": \"c\"}", "true");
    Sql.exec("UPDATE oneshot.builds SET created_at = now() - interval '3 hours' WHERE id = ?", b);
    assertThat(ids(oneshot("builds", "list", "--tag", "team=b", "-o", "json"))).containsExactly(a);
    assertThat(ids(oneshot("builds", "list", "--tag", "team=c", "-o", "json"))).containsExactly(b);
    assertThat(ids(oneshot("builds", "list", "--since", "2h", "-o", "json"))).containsExactly(a);
    assertThat(ids(oneshot("builds", "list", "--since", "4h", "-o", "json")))
        .containsExactlyInAnyOrder(a, b);
    String then = java.time.Instant.now().minus(java.time.Duration.ofHours(2)).toString();
    assertThat(ids(oneshot("builds", "list", "--since", then, "-o", "json"))).containsExactly(a);
    Sql.exec("UPDATE oneshot.builds SET workspace = 'w1' WHERE id = ?", b);
    assertThat(ids(oneshot("builds", "list", "--workspace", "w1", "-o", "json")))
        .containsExactly(b);
  }

  private static List<Long> ids(Run r) {
    assertThat(r.code()).as(r.err()).isZero();
    List<Long> ids = new ArrayList<>();
    r.json().path("builds").forEach(b -> ids.add(b.path("id").asLong()));
    return ids;
  }

  /** A terraform build without a workspace keeps no state, and submit says so before it queues. */
  @Test
  void terraformWithoutAWorkspaceIsWarnedOf(@TempDir Path dir) throws Exception {
    Files.writeString(dir.resolve("main.tf"), "output \"x\" { value = 1 }\n");
    Run none = oneshot("submit", "--terraform", dir.toString(), "--tag", "team=c");
    assertThat(none.code()).as(none.err()).isZero();
    assertThat(none.err())
        .startsWith("warning: no --workspace: terraform's state is not kept after this build");
    Run kept =
        oneshot("submit", "--terraform", dir.toString(), "--tag", "team=c", "--workspace", "w");
    assertThat(kept.code()).as(kept.err()).isZero();
    assertThat(kept.err()).doesNotContain("warning");
    assertThat(oneshot("submit", "--script", "true", "--tag", "team=c").err())
        .doesNotContain("warning");
  }

  /** A Pulumi program is packed without its dependencies, and its project read from it. */
  @Test
  void aPulumiProgramIsSubmittedAsOneStacksOperation(@TempDir Path dir) throws Exception {
    Files.writeString(dir.resolve("Pulumi.yaml"), "name: web # the project\nruntime: nodejs\n");
    Files.writeString(dir.resolve("index.ts"), "export const x = 1;\n");
    Files.writeString(dir.resolve("package.json"), "{}");
    Files.createDirectories(dir.resolve("node_modules/@pulumi/pulumi"));
    Files.writeString(dir.resolve("node_modules/@pulumi/pulumi/index.js"), "big");
    Files.createDirectories(dir.resolve(".git"));
    Files.writeString(dir.resolve(".git/HEAD"), "ref: refs/heads/main\n");
    Files.write(dir.resolve("logo.png"), new byte[] {(byte) 0x89, 'P', 'N', 'G', (byte) 0xff});
    Run none =
        oneshot(
            "submit",
            "--pulumi",
            dir.toString(),
            "--stack",
            "dev",
            "--config",
            "aws:region=eu-west-1",
            "--tag",
            "team=c",
            "-o",
            "json");
    assertThat(none.code()).as(none.err()).isZero();
    assertThat(none.err())
        .startsWith("warning: no --workspace: the stack's checkpoint is not kept after this build");
    JsonNode input =
        Json.tree(
            (String)
                Sql.value(
                    "SELECT input::text FROM oneshot.builds WHERE id = ?",
                    none.json().path("id").asLong()));
    assertThat(input.path("provisioner").asText()).isEqualTo("pulumi");
    assertThat(input.path("project").asText()).isEqualTo("web");
    assertThat(input.path("stack").asText()).isEqualTo("dev");
    assertThat(input.path("operation").asText()).isEqualTo("up");
    assertThat(input.path("config").path("aws:region").asText()).isEqualTo("eu-west-1");
    List<String> names = new ArrayList<>();
    input.path("files").fieldNames().forEachRemaining(names::add);
    assertThat(names).containsExactlyInAnyOrder("Pulumi.yaml", "index.ts", "package.json");

    Run preview =
        oneshot(
            "submit",
            "--pulumi",
            dir.toString(),
            "--stack",
            "dev",
            "--operation",
            "preview",
            "--tag",
            "team=c");
    assertThat(preview.code()).as(preview.err()).isZero();
    assertThat(preview.err()).doesNotContain("warning");

    Run noStack = oneshot("submit", "--pulumi", dir.toString(), "--tag", "team=c");
    assertThat(noStack.code()).isEqualTo(Main.USAGE);
    assertThat(noStack.err()).contains("--pulumi needs --stack NAME");
    Run badOp =
        oneshot("submit", "--pulumi", dir.toString(), "--stack", "dev", "--operation", "apply");
    assertThat(badOp.code()).isEqualTo(Main.USAGE);
    assertThat(badOp.err())
        .contains("--operation: apply is not one of up, preview, destroy, refresh");
    Run stackOnScript = oneshot("submit", "--script", "true", "--stack", "dev");
    assertThat(stackOnScript.code()).isEqualTo(Main.USAGE);
    assertThat(stackOnScript.err()).contains("--stack, --operation and --config go with --pulumi");
    Run secretNotGiven =
        oneshot("submit", "--pulumi", dir.toString(), "--stack", "dev", "--sensitive", "db");
    assertThat(secretNotGiven.code()).isEqualTo(Main.USAGE);
    assertThat(secretNotGiven.err())
        .contains("--sensitive db: no --config db=VALUE to keep secret");
  }

  @Test
  void cancelWaitEndsWithTheCanceledExitCode() {
    // The script takes 2 s to stop once told, so that the second cancel below finds it running.
    Run submitted =
        oneshot(
            "submit", "--script", "trap 'sleep 2; exit 0' TERM; sleep 600 & wait", "-o", "json");
    long id = submitted.json().path("id").asLong();
    await().atMost(30, TimeUnit.SECONDS).until(() -> TestServer.status(id).equals("running"));
    assertThat(oneshot("builds", "cancel", Long.toString(id)).code()).isZero();
    Run canceled = oneshot("builds", "cancel", Long.toString(id), "--wait");
    assertThat(canceled.code()).as(canceled.err()).isEqualTo(Main.CANCELED);
    assertThat(canceled.err()).contains("build " + id + " canceled");
    // The timeline says who asked, once however often it was asked.
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.build_events WHERE build_id = ?"
                    + " AND from_status = 'running' AND to_status = 'running'"
                    + " AND reason = 'cancel asked for by admin'",
                id))
        .isEqualTo(1);
    assertThat(oneshot("builds", "show", Long.toString(id)).out())
        .contains("cancel asked for by admin");
  }

  /**
   * A build's output with terminal control sequences (clear the screen, set the window title, a
   * right-to-left override) is shown with them made visible, never sent to the terminal; JSON
   * output keeps the text as it was.
   */
  @Test
  void aBuildsControlCharactersAreShownNotSent() {
    Run s =
        oneshot(
            "submit",
            "--script",
            "printf 'a\\033[2Jb\\001c\\n'; printf 't\\033]0;owned\\007 \\342\\200\\256x\\n'",
            "--tag",
            "team=c",
            "--follow");
    assertThat(s.out()).contains("a\\x1b[2Jb\\x01c\n").doesNotContain("\u001b");
    long id =
        oneshot("builds", "list", "-o", "json").json().path("builds").get(0).path("id").asLong();
    String logs = oneshot("builds", "logs", Long.toString(id)).out();
    assertThat(logs)
        .contains("a\\x1b[2Jb\\x01c\n")
        .contains("t\\x1b]0;owned\\x07 \\u202ex\n")
        .doesNotContain("\u001b", "\u0007", "\u202e", "\r");
    assertThat(
            oneshot("builds", "logs", Long.toString(id), "-o", "json")
                .out()
                .lines()
                .map(Json::tree)
                .map(l -> l.path("text").asText()))
        .contains("a\u001b[2Jb\u0001c");
  }

  @Test
  void readCommandsPrintTablesAndJson() {
    Run s = oneshot("submit", "--script", "echo shown", "--tag", "team=c", "--wait", "-o", "json");
    long id = s.json().path("id").asLong();
    assertThat(s.json().path("status").asText()).isEqualTo("succeeded");

    Run list = oneshot("builds", "list");
    assertThat(list.out()).startsWith("ID").contains(id + "  ").contains("succeeded");
    assertThat(
            oneshot("builds", "list", "-o", "json")
                .json()
                .path("builds")
                .get(0)
                .path("id")
                .asLong())
        .isEqualTo(id);

    Run show = oneshot("builds", "show", Long.toString(id));
    assertThat(show.out())
        .contains("build " + id + "  succeeded  route c")
        .contains("timeline")
        .contains("pending → launching")
        .contains("launching → running")
        .contains("running → succeeded");
    JsonNode shown = oneshot("builds", "show", Long.toString(id), "-o", "json").json();
    assertThat(shown.path("events").size()).isGreaterThanOrEqualTo(5);

    assertThat(oneshot("builds", "logs", Long.toString(id)).out()).contains("shown\n");
    JsonNode line =
        oneshot("builds", "logs", Long.toString(id), "-o", "json")
            .out()
            .lines()
            .map(Json::tree)
            .filter(l -> l.path("text").asText().equals("shown"))
            .findFirst()
            .orElseThrow();
    assertThat(line.path("stream").asText()).isEqualTo("stdout");

    Run routes = oneshot("routes");
    assertThat(routes.out()).startsWith("ROUTE").contains("team=a").doesNotContain("BALLOONS");
    assertThat(oneshot("routes", "-o", "json").json()).hasSize(3);
    // A warm route's balloons, as the leader records them: a table of their own.
    Sql.exec(
        "INSERT INTO oneshot.route_warmth VALUES ('b', 4, 'idle 4 -> 4', 3, 1, NULL, now()),"
            + " ('c', 2, 'idle 2 -> 2', 0, 0, 'PriorityClass x does not exist', now())");
    Sql.exec("INSERT INTO oneshot.balloon_usage VALUES ('b', date_trunc('hour', now()), 5400, 7)");
    // GET /api/v1/routes answers from a snapshot at most a second old.
    String warm =
        await()
            .atMost(10, TimeUnit.SECONDS)
            .until(() -> oneshot("routes").out(), out -> out.contains("BALLOONS"));
    assertThat(warm)
        .contains("BALLOONS")
        .containsPattern("(?m)^b +3/4 +1 +1\\.5 h +7 +idle 4 -> 4$")
        .containsPattern(
            "(?m)^c +0/2 +0 +0\\.0 h +0 +NOT KEPT: PriorityClass x does not exist \\(idle 2 -> 2\\)$");
    JsonNode b = oneshot("routes", "-o", "json").json().get(1).path("warm");
    assertThat(b.path("pending").asInt()).isEqualTo(1);
    assertThat(b.path("balloonHours").asDouble()).isEqualTo(1.5);
  }

  /**
   * {@code oneshot workspaces}: one name on two routes is two workspaces, each listed with its
   * route; a name alone that is on several routes is a usage error naming them; the state is
   * written as stored.
   */
  @Test
  void workspacesAreListedByRouteAndTheirStateReadBack(@TempDir Path dir) throws Exception {
    Files.writeString(
        dir.resolve("main.tf"), "resource \"terraform_data\" \"net\" { input = \"cli\" }\n");
    for (String team : List.of("a", "b")) {
      Run made =
          oneshot(
              "submit",
              "--terraform",
              dir.toString(),
              "--tag",
              "team=" + team,
              "--workspace",
              "net",
              "--wait");
      assertThat(made.code()).as(made.err()).isZero();
    }

    Run list = oneshot("workspaces", "list");
    assertThat(list.code()).as(list.err()).isZero();
    assertThat(list.out())
        .startsWith("WORKSPACE  ROUTE  LATEST  VERSIONS  CHANGED")
        .containsPattern("\nnet +a +1 +1 ")
        .containsPattern("\nnet +b +1 +1 ");
    assertThat(oneshot("workspaces", "list", "-o", "json").json().path("workspaces")).hasSize(2);

    Run which = oneshot("workspaces", "versions", "net");
    assertThat(which.code()).isEqualTo(Main.USAGE);
    assertThat(which.err())
        .contains("route: workspace net is on routes a, b; say which")
        .contains("--route");
    Run versions = oneshot("workspaces", "versions", "net", "--route", "b");
    assertThat(versions.code()).as(versions.err()).isZero();
    assertThat(versions.out())
        .startsWith("Workspace net of route b\nVERSION")
        .containsPattern("\n1 +\\d+/1 +terraform +1 +[0-9a-f-]{36} +\\d+ B +final ");

    Run state = oneshot("workspaces", "state", "net", "--route", "a");
    assertThat(state.code()).as(state.err()).isZero();
    JsonNode tf = Json.tree(state.out());
    assertThat(tf.path("serial").asInt()).isPositive();
    assertThat(tf.path("resources").get(0).path("type").asText()).isEqualTo("terraform_data");
    Run none = oneshot("workspaces", "state", "net", "--route", "a", "--version", "9");
    assertThat(none.code()).isEqualTo(Main.USAGE);
    assertThat(none.err()).contains("state of workspace net of route a at version 9");
  }

  @Test
  void badInputIsAUsageErrorThatWritesNothing() {
    Run tag = oneshot("submit", "--script", "true", "--tag", "team=no such");
    assertThat(tag.code()).isEqualTo(Main.USAGE);
    assertThat(tag.err()).contains("error: tags.team: \"no such\" is not a valid tag value");
    Run route = oneshot("submit", "--script", "true", "--tag", "team=zz");
    assertThat(route.code()).isEqualTo(Main.USAGE);
    assertThat(route.err()).contains("tags: no route matches {\"team\": \"zz\"}");
    Run both = oneshot("submit", "--script", "true", "--terraform", ".");
    assertThat(both.code()).isEqualTo(Main.USAGE);
    Run varOnScript = oneshot("submit", "--script", "true", "--var", "a=b");
    assertThat(varOnScript.code()).isEqualTo(Main.USAGE);
    assertThat(varOnScript.err()).contains("--var and --destroy are for --terraform builds");
    Run noToken = oneshot("builds", "list", "--url", t.api.base(), "--token", "");
    assertThat(noToken.code()).isEqualTo(Main.USAGE);
    assertThat(noToken.err()).contains("no admin token");
    Run wrongToken =
        oneshot("builds", "list", "--url", t.api.base(), "--token", "wrong-token-wrong-token");
    assertThat(wrongToken.code()).isEqualTo(Main.USAGE);
    assertThat(wrongToken.err()).contains("unauthorized").contains("ONESHOT_TOKEN");
    assertThat(oneshot("builds", "show", "999999").err()).contains("build 999999 not found");
    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds")).isZero();
  }

  @Test
  void tokensAreMadeListedAndRevokedAndTheAuditShowsIt() {
    Sql.exec("DELETE FROM oneshot.api_tokens");
    Run made = oneshot("tokens", "create", "team-b-ci", "--role", "submitter", "--route", "b");
    assertThat(made.code()).as(made.err()).isZero();
    String token = made.out().strip();
    assertThat(token).startsWith("oneshot_").doesNotContain("\n");
    assertThat(made.err()).contains("submitter of routes b").contains("shown this once");

    Run submitted =
        oneshot(
            "submit",
            "--script",
            "true",
            "--tag",
            "team=b",
            "--url",
            t.api.base(),
            "--token",
            token,
            "-o",
            "json");
    assertThat(submitted.code()).as(submitted.err()).isZero();
    Run outside =
        oneshot(
            "submit",
            "--script",
            "true",
            "--tag",
            "team=c",
            "--url",
            t.api.base(),
            "--token",
            token);
    assertThat(outside.code()).isEqualTo(Main.USAGE);
    assertThat(outside.err()).contains("forbidden");
    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds")).isEqualTo(1);

    Run listed = oneshot("tokens", "list");
    assertThat(listed.out()).contains("team-b-ci").contains("submitter").contains("active");
    assertThat(listed.out()).doesNotContain(token);
    assertThat(oneshot("tokens", "revoke", "team-b-ci").out()).contains("revoked");
    Run refused = oneshot("builds", "list", "--url", t.api.base(), "--token", token);
    assertThat(refused.code()).isEqualTo(Main.USAGE);
    assertThat(refused.err()).contains("revoked");

    Run audit = oneshot("audit");
    assertThat(audit.out())
        .contains("token-create")
        .contains("token-revoke")
        .contains("team-b-ci")
        .contains("REFUSED: out_of_scope");
    assertThat(
            oneshot("audit", "--refused", "--actor", "team-b-ci", "-o", "json")
                .json()
                .path("entries"))
        .hasSize(1);
  }

  @Test
  void sensitiveNamesAnEnvOrVarAndNeedsTheServersKeys() {
    Run unknown = oneshot("submit", "--script", "true", "--sensitive", "KEY");
    assertThat(unknown.code()).isEqualTo(Main.USAGE);
    assertThat(unknown.err()).contains("--sensitive KEY: no --env KEY=VALUE");
    // This server has no encryption keys: it refuses to take a value it cannot seal.
    Run noKeys = oneshot("submit", "--script", "true", "--env", "KEY=v4lue", "--sensitive", "KEY");
    assertThat(noKeys.code()).isEqualTo(Main.USAGE);
    assertThat(noKeys.err()).contains("input.sensitive").contains("encryption");
    assertThat(Sql.count("SELECT count(*) FROM oneshot.builds")).isZero();
  }

  @Test
  void anUnreachableServerIsExitCodeFour() {
    Run r = oneshot("builds", "list", "--url", "http://127.0.0.1:1", "--token", "x".repeat(20));
    assertThat(r.code()).isEqualTo(Main.UNREACHABLE);
    assertThat(r.err()).contains("cannot reach oneshot at http://127.0.0.1:1/");
  }

  @Test
  void everyCommandsHelpTeachesWithExamples() {
    List<List<String>> commands = commands(false);
    assertThat(commands).contains(List.of("builds", "rerun"), List.of("submit"));
    for (List<String> cmd : commands) {
      List<String> args = new ArrayList<>(cmd);
      args.add("--help");
      Run r = oneshot(args.toArray(String[]::new));
      assertThat(r.code()).as(String.join(" ", cmd)).isZero();
      assertThat(r.out()).as(String.join(" ", cmd)).contains("Example");
    }
  }

  /**
   * Help wrapped for an 80-column terminal breaks lines between words only: picocli also breaks
   * after a dot, which cut a path ({@code ~/.|local/share}) and a function's name ({@code
   * oneshot.|enqueue()}) in two. Every word of the wrapped help is a word of the same help on one
   * long line (a word broken after a hyphen aside).
   */
  @Test
  void helpWrapsBetweenWordsAndNeverInsideAPathOrAName() {
    List<List<String>> commands = commands(true);
    List<String> cut = new ArrayList<>();
    for (List<String> cmd : commands) {
      java.util.Set<String> whole = java.util.Set.copyOf(words(help(cmd, 1000)));
      List<String> wrapped = words(help(cmd, 80));
      for (int i = 0; i < wrapped.size(); i++) {
        String w = wrapped.get(i);
        boolean hyphenated = w.endsWith("-") || i > 0 && wrapped.get(i - 1).endsWith("-");
        if (!hyphenated && !whole.contains(w)) {
          cut.add("oneshot " + String.join(" ", cmd) + " --help: " + w);
        }
      }
    }
    assertThat(cut).as("parts of words cut at a line's end").isEmpty();
  }

  private static String help(List<String> cmd, int width) {
    picocli.CommandLine cl = command(cmd);
    cl.setUsageHelpWidth(width);
    return cl.getUsageMessage(picocli.CommandLine.Help.Ansi.OFF);
  }

  /** The command {@code cmd} names ({@code [builds, list]}), in a command line of its own. */
  private static picocli.CommandLine command(List<String> cmd) {
    picocli.CommandLine cl =
        Main.commandLine(new PrintWriter(new StringWriter()), new PrintWriter(new StringWriter()));
    for (String name : cmd) {
      cl = cl.getSubcommands().get(name);
    }
    return cl;
  }

  /** Every command's path but help's, with the top command's (empty) first when {@code root}. */
  private static List<List<String>> commands(boolean root) {
    List<List<String>> commands = new ArrayList<>();
    if (root) {
      commands.add(List.of());
    }
    commandsOf(
        Main.commandLine(new PrintWriter(new StringWriter()), new PrintWriter(new StringWriter())),
        List.of(),
        commands);
    return commands;
  }

  private static List<String> words(String text) {
    return java.util.Arrays.stream(text.split("\\s+")).filter(w -> !w.isEmpty()).toList();
  }

  private static void commandsOf(
      picocli.CommandLine cl, List<String> path, List<List<String>> into) {
    for (var e : cl.getSubcommands().entrySet()) {
      if (e.getKey().equals("help")) {
        continue;
      }
      List<String> p = new ArrayList<>(path);
      p.add(e.getKey());
      into.add(p);
      commandsOf(e.getValue(), p, into);
    }
  }

  /**
   * An example is one line at any width, so that it copies whole from an 80-column terminal; the
   * footer's prose still wraps between words.
   */
  @Test
  void examplesAreNeverWrappedAndProseIs() {
    List<List<String>> commands = commands(true);
    int examples = 0;
    for (List<String> cmd : commands) {
      picocli.CommandLine cl = command(cmd);
      List<String> shown = help(cmd, 80).lines().toList();
      for (String line : cl.getCommandSpec().usageMessage().footer()) {
        if (line.startsWith("  ")) {
          assertThat(shown).as("oneshot " + String.join(" ", cmd) + " --help").contains(line);
          examples += line.length() > 80 ? 1 : 0;
        }
      }
    }
    // Some examples are longer than 80 columns, or this test would show nothing.
    assertThat(examples).isPositive();
    assertThat(Main.wrap("one two three four", 9)).isEqualTo("one two\nthree\nfour\n");
    assertThat(help(List.of(), 80).lines())
        .contains(
            "Exit codes: 0 success, 1 build failed, 2 usage error, 3 build canceled, 4 cannot")
        .allMatch(l -> l.length() <= 80 || l.startsWith("  "));
  }

  /**
   * Each command's summary, as its parent's command list shows it, is one sentence on one line: the
   * list of {@code oneshot --help} reads as a table of contents.
   */
  @Test
  void everyCommandIsSummedUpInOneLine() {
    List<List<String>> commands = commands(false);
    for (List<String> cmd : commands) {
      picocli.CommandLine cl = command(cmd);
      String[] header = cl.getCommandSpec().usageMessage().header();
      assertThat(header).as(String.join(" ", cmd)).hasSize(1);
      assertThat(header[0]).as(String.join(" ", cmd)).endsWith(".").hasSizeLessThanOrEqualTo(60);
    }
    String top = help(List.of(), 80);
    String list = top.substring(top.indexOf("Commands:"), top.indexOf("Examples:"));
    // Every line of the list names a command: none is a summary's second line.
    assertThat(list.lines().skip(1).filter(l -> !l.isBlank()))
        .allMatch(l -> l.matches("  [a-z]+ +[A-Z].*\\."));
  }

  @Test
  void helpNamesTheCommandItsWholePathNames() {
    Run path = oneshot("help", "builds", "list");
    assertThat(path.code()).isZero();
    assertThat(path.out()).isEqualTo(oneshot("builds", "list", "--help").out());
    assertThat(path.out()).contains("Usage: oneshot builds list");
    Run top = oneshot("top", "--help");
    assertThat(top.out()).contains("Usage: oneshot top ").doesNotContain("oneshot routes [");
    Run nope = oneshot("help", "builds", "nope");
    assertThat(nope.code()).isEqualTo(Main.USAGE);
    assertThat(nope.err())
        .startsWith(
            "error: no command oneshot builds nope; its commands are list, show, logs, cancel,"
                + " rerun, input\n");
  }

  @Test
  void timesArePrintedToTheSecondInOneFormat() {
    java.time.Instant at = java.time.Instant.parse("2026-12-06T19:10:05.123456Z");
    assertThat(Text.at(at, java.time.ZoneOffset.UTC)).isEqualTo("2026-12-06 19:10:05 UTC");
    assertThat(Text.at(at, java.time.ZoneId.of("Europe/Paris")))
        .isEqualTo("2026-12-06 20:10:05 +01:00");
    assertThat(Text.at(Json.tree("null"), java.time.ZoneOffset.UTC)).isEqualTo("-");
    long id = t.api.submitScript("{\"team\": \"b\"}", "true");
    Run show = oneshot("builds", "show", Long.toString(id), "--utc");
    assertThat(show.out())
        .containsPattern("  created +\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d UTC\n");
  }

  @Test
  void usageErrorsSayWhatIsWrongInALineAndPointToTheHelp(@TempDir Path dir) throws Exception {
    Run notANumber = oneshot("builds", "show", "abc");
    assertThat(notANumber.code()).isEqualTo(Main.USAGE);
    assertThat(notANumber.err()).startsWith("error: ID: 'abc' is not a whole number\n");
    Run nothing = oneshot("submit");
    assertThat(nothing.err())
        .startsWith("error: Missing required argument (specify one of these): (--script=CMD");
    Run badName = oneshot("tokens", "create", "BadName", "--role", "viewer", "--route", "a");
    assertThat(badName.code()).isEqualTo(Main.USAGE);
    assertThat(badName.err())
        .startsWith("error: name: 'BadName' is not a token name: lower-case letters, digits");
    Run since = oneshot("builds", "list", "--since", "5x");
    assertThat(since.code()).isEqualTo(Main.USAGE);
    assertThat(since.err()).startsWith("error: --since: '5x' is neither a duration");
    Run tag = oneshot("submit", "--script", "true", "--tag", "x");
    assertThat(tag.code()).isEqualTo(Main.USAGE);
    assertThat(tag.err().lines())
        .containsExactly(
            "error: Value for option '--tag' (KEY=VALUE) should be in KEY=VALUE format but was x",
            "Try 'oneshot submit --help' for more.");
    Run typo = oneshot("builds", "list", "--rout", "a");
    assertThat(typo.err()).contains("--route").contains("Try 'oneshot builds list --help'");
    assertThat(typo.err().lines().count()).isLessThan(5);

    Path bad = dir.resolve("bad.json");
    Files.writeString(bad, "{\n  \"provisioner\": script\n}");
    Run input = oneshot("submit", "--input", bad.toString());
    assertThat(input.code()).isEqualTo(Main.USAGE);
    assertThat(input.err())
        .startsWith("error: --input: " + bad + " is not valid JSON: Unrecognized token 'script'")
        .contains("(line 2, column")
        .doesNotContain("Source:")
        .doesNotContain("REDACTED");

    Run route = oneshot("builds", "list", "--route", "nosuch");
    assertThat(route.code()).isEqualTo(Main.USAGE);
    assertThat(route.err()).isEqualTo("error: --route: no route nosuch; the routes are a, b, c\n");
    assertThat(oneshot("builds", "list", "--route", "c").out()).isEqualTo("no builds\n");
  }

  @Test
  void aLongScriptGoesInAFile(@TempDir Path dir) throws Exception {
    // Longer than one argument may be on Linux (128 KiB): only a file can carry it.
    Path file = dir.resolve("long.sh");
    Files.writeString(file, "# " + "x".repeat(200_000) + "\necho from-the-file\n");
    Run run = oneshot("submit", "--script-file", file.toString(), "--tag", "team=a", "--follow");
    assertThat(run.code()).as(run.err()).isZero();
    assertThat(run.out()).contains("from-the-file");
    Run missing = oneshot("submit", "--script-file", dir.resolve("none.sh").toString());
    assertThat(missing.err())
        .isEqualTo("error: --script-file: no such file: " + dir.resolve("none.sh") + "\n");
  }

  @Test
  void rerunRunsAFinishedBuildAgainAndShowIsLinked() {
    Run first = oneshot("submit", "--script", "exit 4", "--tag", "team=b", "--wait", "-o", "json");
    assertThat(first.code()).isEqualTo(Main.BUILD_FAILED);
    long id = first.json().path("id").asLong();

    Run again = oneshot("builds", "rerun", String.valueOf(id), "--wait");
    assertThat(again.code()).isEqualTo(Main.BUILD_FAILED);
    assertThat(again.err())
        .containsPattern("build (\\d+) queued on route b, a rerun of build " + id);
    long rerun =
        Long.parseLong(again.err().replaceAll("(?s).*build (\\d+) queued on route b.*", "$1"));
    assertThat(rerun).isNotEqualTo(id);
    assertThat(oneshot("builds", "show", String.valueOf(rerun)).out())
        .containsPattern("rerun of +build " + id + "\n")
        .contains("exit code    4");

    Run input = oneshot("builds", "input", String.valueOf(rerun));
    assertThat(input.code()).isZero();
    assertThat(Json.tree(input.out()))
        .isEqualTo(
            Json.tree("{\"provisioner\": \"script\", \"command\": [\"sh\", \"-c\", \"exit 4\"]}"));

    Run unknown = oneshot("builds", "rerun", "999999");
    assertThat(unknown.code()).isEqualTo(Main.USAGE);
    assertThat(unknown.err()).contains("build 999999 not found");
  }

  @Test
  void dispatcherCheckReportsEveryProblemOfTheConfigurationAndItsTemplates(@TempDir Path dir)
      throws Exception {
    Path config = dir.resolve("oneshot.yaml");
    Files.writeString(
        config,
        """
        api: {publicUrl: "http://oneshot:8080"}
        launcher: {kind: kubernetes, kubernetes: {templateDir: %s}}
        routes:
          - {name: a, tags: {org: a}, template: job.yaml, maxConcurrent: 3}
          - {name: b, tags: {org: b}, template: job.yaml, timeout: 10m}
        """
            .formatted(dir));
    Path template = dir.resolve("job.yaml");
    String job =
        """
        apiVersion: batch/v1
        kind: Job
        spec:
          %s
          template:
            spec:
              %s
              containers: [{name: %s, image: oneshot}]
        """;
    Files.writeString(template, job.formatted("backoffLimit: 3", "restartPolicy: OnFailure", "x"));

    Run refused = oneshot("dispatcher", "--config", config.toString(), "--check");
    assertThat(refused.code()).isEqualTo(Main.USAGE);
    assertThat(refused.err())
        .contains("3 problems:")
        .contains("routes[0].template: " + template + ": spec.template.spec.containers has no")
        .contains("routes[0].template: " + template + ": spec.template.spec.restartPolicy: OnF")
        .contains("routes[0].template: " + template + ": spec.backoffLimit: 3 would retry");

    Files.writeString(template, job.formatted("", "", "provisionerd"));
    Run valid = oneshot("dispatcher", "--config", config.toString(), "--check");
    assertThat(valid.code()).as(valid.err()).isEqualTo(Main.OK);
    assertThat(valid.out().lines())
        .containsExactly(
            config
                + ": valid; launcher kubernetes; 1 Job template in "
                + dir
                + "; global limit 100; NO encryption keys: state is stored as it is, sensitive"
                + " values are refused",
            "ROUTE  TAGS   LIMIT  TEMPLATE  TIMEOUT  ATTEMPTS",
            "a      org=a  3      job.yaml  1h       3",
            "b      org=b  10     job.yaml  10m      3");

    // Sources are listed with the routes they feed; their databases are not contacted.
    Files.writeString(
        config,
        Files.readString(config)
            + """
            sources:
              - {name: coder, kind: coder, databaseUrl: "postgresql://nowhere.invalid/coder",
                 routes: [{route: a, organization: acme}, {route: b, organization: acme}]}
            """);
    Run withSources = oneshot("dispatcher", "--config", config.toString(), "--check");
    assertThat(withSources.code()).as(withSources.err()).isEqualTo(Main.OK);
    assertThat(withSources.out().lines())
        .endsWith(
            "SOURCE  KIND   CHANNEL                 ROUTES              POLL",
            "coder   coder  provisioner_job_posted  a (acme), b (acme)  5s");

    // The key that seals state is named, never its secret.
    Files.writeString(
        config,
        Files.readString(config)
            + "encryption: {keys: [{id: k2, secret: \""
            + "s".repeat(32)
            + "\"}, {id: k1, secret: \""
            + "t".repeat(32)
            + "\"}]}\n");
    Run withKeys = oneshot("dispatcher", "--config", config.toString(), "--check");
    assertThat(withKeys.out().lines().findFirst().orElseThrow())
        .endsWith("; state and sensitive values sealed with key k2 (1 older to open with)");
    assertThat(withKeys.out()).doesNotContain("s".repeat(32));
  }

  /**
   * The chart's rendered configuration names files of the dispatcher's pod: checked outside the
   * cluster, those are named as not read, and the rest is checked as ever.
   */
  @Test
  void dispatcherCheckOutsideThePodSaysWhatItCouldNotRead(@TempDir Path dir) throws Exception {
    Path config = dir.resolve("oneshot.yaml");
    String pod = dir.resolve("pod-only").toString();
    Files.writeString(
        config,
        """
        api: {publicUrl: "http://oneshot:8080", adminTokenFile: %s/admin-token}
        encryption: {keysFile: %s/keys}
        launcher: {kind: kubernetes, kubernetes: {templateDir: %s/templates}}
        routes:
          - {name: a, tags: {org: a}, template: job.yaml}
        """
            .formatted(pod, pod, pod));
    Run r = oneshot("dispatcher", "--config", config.toString(), "--check");
    assertThat(r.code()).as(r.err()).isZero();
    assertThat(r.out())
        .contains(": valid; launcher kubernetes; global limit 100; encryption keys from a file not")
        .contains("Not on this machine, not read: api.adminTokenFile " + pod + "/admin-token.")
        .contains("Not on this machine, not read: encryption.keysFile " + pod + "/keys.")
        .contains("Not on this machine, not read: launcher.kubernetes.templateDir " + pod);
    // What is wrong is still wrong.
    Files.writeString(
        config, Files.readString(config).replace("{org: a}", "{org: a}, maxConcurrent: -1"));
    Run bad = oneshot("dispatcher", "--config", config.toString(), "--check");
    assertThat(bad.code()).isEqualTo(Main.USAGE);
    assertThat(bad.err()).contains("routes[0].maxConcurrent");
  }

  @Test
  void aTerraformDirectoryIsPackedWithoutStateCachesOrHiddenFiles(@TempDir Path dir)
      throws Exception {
    Files.writeString(dir.resolve("main.tf"), "resource \"terraform_data\" \"x\" {}\n");
    Files.createDirectories(dir.resolve("modules/net"));
    Files.writeString(dir.resolve("modules/net/net.tf"), "variable \"cidr\" {}\n");
    Files.writeString(dir.resolve("dev.tfvars"), "cidr = \"10.0.0.0/16\"\n");
    Files.writeString(dir.resolve("terraform.tfstate"), "{}");
    Files.createDirectories(dir.resolve(".terraform/providers"));
    Files.writeString(dir.resolve(".terraform/providers/x.tf"), "cached");
    Files.writeString(dir.resolve(".terraform.lock.hcl"), "# lock\n");
    Files.writeString(dir.resolve("README.md"), "docs");
    Map<String, String> files = SubmitCommand.terraformFiles(dir);
    assertThat(files.keySet())
        .containsExactly(".terraform.lock.hcl", "dev.tfvars", "main.tf", "modules/net/net.tf");
    assertThat(files.get("modules/net/net.tf")).isEqualTo("variable \"cidr\" {}\n");
  }
}
