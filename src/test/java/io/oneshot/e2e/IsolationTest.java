package io.oneshot.e2e;

import static io.oneshot.testing.TestServer.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.oneshot.api.Json;
import io.oneshot.launch.local.LocalCommand;
import io.oneshot.launch.local.LocalLauncher;
import io.oneshot.launch.local.Sandbox;
import io.oneshot.testing.Api;
import io.oneshot.testing.CapturingLauncher;
import io.oneshot.testing.ChildJvm;
import io.oneshot.testing.Required;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * One team's build cannot reach another's, with the local launcher's attempts isolated by
 * bubblewrap: team A's script searches the machine for team B's secret, token, state and processes,
 * and the dispatcher's files, and acts as B's runner with B's token; it finds nothing and runs
 * nothing, and B's build runs and ends as its own provisionerd decides. Real provisionerd processes
 * in real sandboxes.
 */
class IsolationTest {
  private static final String B_SECRET = "b-secret-" + Long.toHexString(System.nanoTime());

  @TempDir Path tmp;
  private TestServer t;

  @AfterEach
  void stop() {
    if (t != null) {
      t.close();
    }
  }

  private static boolean bwrap() {
    return Files.isExecutable(Path.of("/usr/bin/bwrap"));
  }

  /** The runner calls, each with a body it would be taken with, for the token's thief. */
  private static final Map<String, String> CALLS = new LinkedHashMap<>();

  static {
    CALLS.put("acquire", "{}");
    CALLS.put("heartbeat", "{}");
    CALLS.put("logs", "{\"first\": 1, \"lines\": [{\"text\": \"forged\"}]}");
    CALLS.put("state", "{\"state\": \"{\\\"serial\\\": 9, \\\"lineage\\\": \\\"L\\\"}\"}");
    CALLS.put("took-job", "{\"what\": \"forged\"}");
    CALLS.put("complete", "{\"outcome\": \"succeeded\"}");
  }

  @Test
  void aTeamsBuildFindsNothingOfAnothersAndCannotActAsItsRunner() throws Exception {
    Required.tool(
        bwrap(),
        "ONESHOT_REQUIRE_BWRAP",
        "bwrap is missing (apt-get install bubblewrap)",
        "isolated attempts are not tried");
    // The dispatcher's own files: what `oneshot dev` keeps in its data directory.
    Path data = Files.createDirectories(tmp.resolve("data"));
    Files.writeString(data.resolve("admin-token"), TestServer.ADMIN_TOKEN);
    Path runs = tmp.resolve("runs");
    List<String> command =
        LocalCommand.defaultCommand(
            List.of(), ChildJvm.archive("provisionerd"), ChildJvm.classPath());
    CapturingLauncher launcher =
        new CapturingLauncher(
            new LocalLauncher(
                runs,
                command,
                LocalCommand.baseEnvironment(List.of()),
                Sandbox.of(Sandbox.Mode.BUBBLEWRAP, command, List.of())));
    t =
        TestServer.with()
            .launcher(launcher)
            .routes("routes: [{name: team-a, tags: {team: a}}, {name: team-b, tags: {team: b}}]")
            .start();
    Api api = t.api;

    // Team B's build: its secret in its environment, waiting for a file in its own directory.
    long b =
        api.post(
                "/api/v1/builds",
                "{\"tags\": {\"team\": \"b\"}, \"input\": {\"provisioner\": \"script\","
                    + " \"command\": [\"sh\", \"-c\", \"echo b-started; while [ ! -f go ]; do"
                    + " sleep 0.1; done; echo b-finished\"], \"env\": {\"SECRET_B\": "
                    + Json.write(B_SECRET)
                    + "}}}")
            .json()
            .path("id")
            .asLong();
    await().atMost(60, TimeUnit.SECONDS).until(() -> logs(b).contains("b-started"));
    Path bDir = runs.resolve("oneshot-" + b + "-1");
    // Its token as its provisionerd got it: the thief has it somehow (a leak, a copy).
    String bToken = launcher.of(b).token().value();
    long dispatcher = ProcessHandle.current().pid();

    StringBuilder probe = new StringBuilder("echo probe-start\n");
    probe.append("echo \"data: $(cat ").append(data).append("/admin-token 2>&1)\"\n");
    probe.append("echo \"runs: $(ls ").append(runs).append(" 2>&1 | tr '\\n' ' ')\"\n");
    probe.append("echo \"b-dir: $(ls ").append(bDir).append(" 2>&1 | tr '\\n' ' ')\"\n");
    probe.append("echo \"b-token: $(cat ").append(bDir).append("/token 2>&1)\"\n");
    probe
        .append("echo \"environs: $(cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'")
        .append(" | grep -c SECRET_B)\"\n");
    probe.append("echo \"processes: $(ls -d /proc/[0-9]* | wc -l)\"\n");
    probe
        .append("echo \"dispatcher: $(tr '\\0' ' ' < /proc/")
        .append(dispatcher)
        .append("/cmdline 2>&1 | head -c 80)\"\n");
    probe.append("echo \"tmp: $(ls /tmp | wc -l)\"\n");
    // Its own attempt file (what a restarted dispatcher finds its process by) is not its to write.
    probe.append("echo \"attempt-file: $( (echo '{}' > ../attempt.json) 2>&1)\"\n");
    // No service of the machine is in reach: the dispatcher's API on loopback, directly.
    probe
        .append("curl -s -o /dev/null --max-time 5 http://127.0.0.1:")
        .append(t.server.port())
        .append("/healthz; echo \"direct api: curl exit $?\"\n");
    // Only the API its provisionerd relays (a port on the sandbox's own loopback): found as a
    // hostile script would, in the kernel's table of listening sockets.
    probe.append(
        "bridge=$(for h in $(awk 'NR>1 && $4==\"0A\" {split($2,a,\":\"); print a[2]}'"
            + " /proc/net/tcp /proc/net/tcp6); do echo $((0x$h)); done | head -n 1)\n");
    probe.append("echo \"bridge: ${bridge:-none}\"\n");
    for (Map.Entry<String, String> c : CALLS.entrySet()) {
      probe
          .append("echo \"stolen ")
          .append(c.getKey())
          .append(" $(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Authorization: Bearer ")
          .append(bToken)
          .append("' -H 'Oneshot-Runner-Id: stolen-runner-1' -H 'Content-Type: application/json'")
          .append(" --data-binary '")
          .append(c.getValue())
          .append("' http://127.0.0.1:$bridge/api/v1/runner/")
          .append(c.getKey())
          .append(")\"\n");
    }
    probe.append("echo probe-end\n");
    long a = api.submitScript("{\"team\": \"a\"}", probe.toString());
    await()
        .atMost(60, TimeUnit.SECONDS)
        .until(() -> List.of("succeeded", "failed").contains(status(a)));
    String found = logs(a);
    assertThat(found).contains("probe-start", "probe-end");
    assertThat(found)
        .as("nothing of the dispatcher's or of team B's")
        .doesNotContain(TestServer.ADMIN_TOKEN)
        .doesNotContain(B_SECRET)
        .doesNotContain(bToken)
        .contains("data: cat: " + data + "/admin-token: No such file or directory")
        .contains("b-dir: ls: cannot access '" + bDir + "': No such file or directory")
        .contains("environs: 0")
        .doesNotContain("oneshot-" + b + "-1 ")
        // The dispatcher's process is not there to read (the shell's error goes to stderr).
        .contains("dispatcher: \n")
        .containsPattern("attempt-file: .*Read-only file system")
        // curl's 7: could not connect.
        .contains("direct api: curl exit 7")
        .containsPattern("bridge: \\d+");
    // Its own process namespace: the sandbox's init, sh, the command substitutions.
    int processes = Integer.parseInt(found.replaceAll("(?s).*processes: (\\d+).*", "$1").strip());
    assertThat(processes).isLessThan(10);
    for (String call : CALLS.keySet()) {
      assertThat(found).contains("stolen " + call + " 401");
    }
    assertThat(Sql.logLines(b, "stdout")).doesNotContain("forged");
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.build_events WHERE build_id = ?"
                    + " AND reason LIKE 'a call with this attempt''s token was refused:%'",
                b))
        .isEqualTo(CALLS.size());
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.audit WHERE build_id = ? AND outcome = 'unproven'",
                b))
        .isEqualTo(CALLS.size());
    assertThat(status(b)).isEqualTo("running");

    // B's own runner goes on, and decides how B ends.
    Files.createFile(bDir.resolve("work").resolve("go"));
    await().atMost(60, TimeUnit.SECONDS).until(() -> status(b).equals("succeeded"));
    assertThat(logs(b)).contains("b-finished");
    // The audit entry is written once the outcome is stored, not with it.
    await()
        .atMost(10, TimeUnit.SECONDS)
        .until(
            () ->
                Sql.count(
                        "SELECT count(*) FROM oneshot.audit WHERE build_id = ? AND action ="
                            + " 'runner-complete' AND outcome = 'ok'",
                        b)
                    == 1);
  }

  /**
   * An attempt with no network of its own reaches the API only through its socket, which its
   * dispatcher relays: a dispatcher started after the first stopped relays it again, and the build
   * runs to the end its own provisionerd decides. A route on the machine's network ({@code network:
   * host}) reaches loopback as the machine does.
   */
  @Test
  void anAttemptsSocketIsRelayedAgainByTheNextDispatcherAndAHostRouteSharesTheMachinesNetwork()
      throws Exception {
    Required.tool(
        bwrap(),
        "ONESHOT_REQUIRE_BWRAP",
        "bwrap is missing (apt-get install bubblewrap)",
        "isolated attempts are not tried");
    Path runs = tmp.resolve("runs");
    int port = io.oneshot.testing.Ports.stable();
    String routes =
        "routes: [{name: sealed, tags: {team: a}}, {name: open, tags: {team: b}, network: host}]";
    t = isolated(runs, port, routes, false);
    long id =
        t.api.submitScript(
            "{\"team\": \"a\"}",
            "echo waiting; while [ ! -f go ]; do sleep 0.1; done; echo released");
    await().atMost(60, TimeUnit.SECONDS).until(() -> logs(id).contains("waiting"));
    Path dir = runs.resolve("oneshot-" + id + "-1");
    assertThat(dir.resolve("api.sock")).exists();
    t.close();

    t = isolated(runs, port, routes, true);
    Files.createFile(dir.resolve("work").resolve("go"));
    await().atMost(60, TimeUnit.SECONDS).until(() -> status(id).equals("succeeded"));
    assertThat(logs(id)).contains("released");
    assertThat(Sql.logLines(id, "stdout")).filteredOn("released"::equals).hasSize(1);
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.audit WHERE build_id = ? AND outcome = 'unproven'",
                id))
        .as("every call of its own runner proven, through either dispatcher")
        .isZero();

    // On the machine's network the API is in reach, and the build's own token (in its read-only
    // attempt directory) with it: the call is still no runner's, since no provisionerd holds its
    // connection.
    long open =
        t.api.submitScript(
            "{\"team\": \"b\"}",
            "curl -s -o /dev/null --max-time 5 http://127.0.0.1:"
                + port
                + "/healthz; echo \"direct api: curl exit $?\"\n"
                + "echo \"own token direct: $(curl -s -o /dev/null -w '%{http_code}' -X POST"
                + " -H \"Authorization: Bearer $(cat ../token)\" -H 'Oneshot-Runner-Id: script-1'"
                + " -H 'Content-Type: application/json' --data-binary '{}' http://127.0.0.1:"
                + port
                + "/api/v1/runner/heartbeat)\"");
    await().atMost(60, TimeUnit.SECONDS).until(() -> status(open).equals("succeeded"));
    assertThat(logs(open)).contains("direct api: curl exit 0").contains("own token direct: 401");
    assertThat(runs.resolve("oneshot-" + open + "-1").resolve("api.sock")).doesNotExist();
  }

  private TestServer isolated(Path runs, int port, String routes, boolean keepQueue) {
    List<String> command =
        LocalCommand.defaultCommand(
            List.of(), ChildJvm.archive("provisionerd"), ChildJvm.classPath());
    TestServer.Builder b =
        TestServer.with()
            .api(
                "{listen: \"127.0.0.1:%d\", publicUrl: \"http://127.0.0.1:%d\", adminToken: \"%s\"}"
                    .formatted(port, port, TestServer.ADMIN_TOKEN))
            .launcher(
                new LocalLauncher(
                    runs,
                    command,
                    LocalCommand.baseEnvironment(List.of()),
                    Sandbox.of(Sandbox.Mode.BUBBLEWRAP, command, List.of())))
            .routes(routes);
    return (keepQueue ? b.keepQueue() : b).start();
  }

  @Test
  void aRoutesBuildsGetWhatThatRouteNamesAndNoOtherRoutesBuildsDo() {
    String value = System.getenv("JAVA_HOME");
    org.junit.jupiter.api.Assumptions.assumeTrue(value != null, "JAVA_HOME is not set");
    t =
        TestServer.with()
            .routes(
                "routes: [{name: a, tags: {team: a}, passEnv: [JAVA_HOME]}, {name: b, tags: {team:"
                    + " b}}]")
            .start();
    long a = t.api.submitScript("{\"team\": \"a\"}", "echo \"seen: ${JAVA_HOME:-nothing}\"");
    long b = t.api.submitScript("{\"team\": \"b\"}", "echo \"seen: ${JAVA_HOME:-nothing}\"");
    await()
        .atMost(60, TimeUnit.SECONDS)
        .until(() -> status(a).equals("succeeded") && status(b).equals("succeeded"));
    assertThat(logs(a)).contains("seen: " + value);
    assertThat(logs(b)).contains("seen: nothing").doesNotContain(value);
  }

  @Test
  void plainAttemptsAreSaidToBeNotIsolatedAtStart() {
    ch.qos.logback.classic.Logger logger =
        (ch.qos.logback.classic.Logger) org.slf4j.LoggerFactory.getLogger(Sandbox.class);
    ch.qos.logback.core.read.ListAppender<ch.qos.logback.classic.spi.ILoggingEvent> seen =
        new ch.qos.logback.core.read.ListAppender<>();
    seen.start();
    logger.addAppender(seen);
    try {
      List<String> command =
          LocalCommand.defaultCommand(List.of(), tmp.resolve("a.jsa"), ChildJvm.classPath());
      assertThat(Sandbox.of(Sandbox.Mode.NONE, command, List.of())).isEmpty();
      assertThat(seen.list)
          .anySatisfy(
              e -> {
                assertThat(e.getLevel()).isEqualTo(ch.qos.logback.classic.Level.WARN);
                assertThat(e.getFormattedMessage())
                    .startsWith("ATTEMPTS ARE NOT ISOLATED (launcher.local.isolation is none)");
              });
    } finally {
      logger.detachAppender(seen);
    }
  }

  private static String logs(long id) {
    return String.join("\n", Sql.logLines(id, "stdout"));
  }
}
