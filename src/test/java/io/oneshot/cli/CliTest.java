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
  }

  /** What a command printed and returned. */
  record Run(int code, String out, String err) {
    JsonNode json() {
      return Json.tree(out);
    }
  }

  private static Run oneshot(String... args) {
    List<String> all = new ArrayList<>(List.of(args));
    boolean client = !List.of("dev", "dispatcher", "provisionerd", "migrate").contains(args[0]);
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

  @Test
  void cancelWaitEndsWithTheCanceledExitCode() {
    Run submitted = oneshot("submit", "--script", "sleep 600", "-o", "json");
    long id = submitted.json().path("id").asLong();
    await().atMost(30, TimeUnit.SECONDS).until(() -> TestServer.status(id).equals("running"));
    Run canceled = oneshot("builds", "cancel", Long.toString(id), "--wait");
    assertThat(canceled.code()).as(canceled.err()).isEqualTo(Main.CANCELED);
    assertThat(canceled.err()).contains("build " + id + " canceled");
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
    assertThat(routes.out()).startsWith("ROUTE").contains("team=a");
    assertThat(oneshot("routes", "-o", "json").json()).hasSize(3);
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
    List<List<String>> commands = new ArrayList<>();
    commandsOf(
        Main.commandLine(new PrintWriter(new StringWriter()), new PrintWriter(new StringWriter())),
        List.of(),
        commands);
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
    List<List<String>> commands = new ArrayList<>();
    commands.add(List.of());
    commandsOf(
        Main.commandLine(new PrintWriter(new StringWriter()), new PrintWriter(new StringWriter())),
        List.of(),
        commands);
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
    picocli.CommandLine cl =
        Main.commandLine(new PrintWriter(new StringWriter()), new PrintWriter(new StringWriter()));
    cl.setUsageHelpWidth(width);
    for (String name : cmd) {
      cl = cl.getSubcommands().get(name);
    }
    return cl.getUsageMessage(picocli.CommandLine.Help.Ansi.OFF);
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

  @Test
  void usageErrorsSayWhatIsWrongInALineAndPointToTheHelp(@TempDir Path dir) throws Exception {
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
