package io.oneshot.e2e;

import static io.oneshot.testing.TestServer.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.oneshot.api.Json;
import io.oneshot.build.PulumiCheckpoint;
import io.oneshot.launch.local.LocalCommand;
import io.oneshot.launch.local.LocalLauncher;
import io.oneshot.testing.Api;
import io.oneshot.testing.ChildJvm;
import io.oneshot.testing.FakePulumi;
import io.oneshot.testing.Git;
import io.oneshot.testing.Heavy;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TestServer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Pulumi builds through the local launcher: the pulumi provisioner against the stand-in CLI ({@link
 * FakePulumi}), or the real one when {@code PULUMI} names it. The stack's checkpoint is the
 * workspace's state: read back after each build.
 */
@Heavy
class PulumiTest {
  private static final String ROUTES =
      """
      routes:
        - {name: stacks, maxConcurrent: 6, cancelGrace: 20s}
        - {name: hang, tags: {speed: hang}, hangTimeout: 2s, cancelGrace: 2s}
      encryption:
        keys: [{id: k1, secret: "0123456789abcdef0123456789abcdef"}]
      """;

  @TempDir Path tmp;
  private TestServer t;
  private Map<String, String> env;

  @BeforeEach
  void setUp() throws Exception {
    env = LocalCommand.baseEnvironment(List.of());
    env.put("ONESHOT_PULUMI", FakePulumi.binary(tmp.resolve("bin")).toString());
    env.put("PULUMI_CONFIG_PASSPHRASE", "correct horse");
    start();
  }

  /** Starts the dispatcher, its local launcher's attempts given {@link #env}. */
  private void start() throws Exception {
    if (t != null) {
      t.close();
    }
    Path runDir = Files.createDirectories(tmp.resolve("runs"));
    t =
        TestServer.with()
            .launchers(
                (vertx, cfg) ->
                    new LocalLauncher(
                        runDir,
                        LocalCommand.defaultCommand(
                            List.of(), ChildJvm.archive("provisionerd"), ChildJvm.classPath()),
                        env))
            .routes(ROUTES)
            .start();
  }

  @AfterEach
  void tearDown() {
    if (t != null) {
      t.close();
    }
  }

  /** A Pulumi YAML program of project {@code web}: resources, and outputs of its config. */
  private static String program(String resources) {
    return """
        name: web
        runtime: yaml
        resources:
        %s
        outputs:
          region: ${region}
          password:
            fn::secret: ${dbPassword}
        """
        .formatted(resources.indent(2));
  }

  /**
   * Two resources of the pulumi-command provider, which the stand-in runs as the provider does, and
   * the real CLI runs once its plugin is installed ({@code pulumi plugin install resource
   * command}).
   */
  private static final String TWO =
      """
      bucket:
        type: command:local:Command
        properties: {create: echo bucket}
      queue:
        type: command:local:Command
        properties: {create: echo queue}
      """;

  private long submit(String workspace, String stack, String operation, String program) {
    ObjectNode input = Json.MAPPER.createObjectNode();
    input.put("provisioner", "pulumi");
    input.put("operation", operation);
    input.put("project", "web");
    input.put("stack", stack);
    input.putObject("files").put("Pulumi.yaml", program);
    ObjectNode config = input.putObject("config");
    config.put("region", "eu-west-" + stack.length());
    config.put("dbPassword", "hunter2-" + stack);
    input.putArray("sensitive").add("dbPassword");
    return submit(workspace, input);
  }

  private long submit(String workspace, ObjectNode input) {
    return submit(workspace, input, Json.MAPPER.createObjectNode());
  }

  private long submit(String workspace, ObjectNode input, ObjectNode tags) {
    ObjectNode body = Json.MAPPER.createObjectNode();
    body.set("tags", tags);
    body.put("workspace", workspace);
    body.set("input", input);
    Api.Response r = t.api.post("/api/v1/builds", Json.write(body));
    assertThat(r.status()).as(r.text()).isEqualTo(201);
    return r.json().path("id").asLong();
  }

  private String awaitEnd(long id) {
    await()
        .atMost(3, TimeUnit.MINUTES)
        .until(() -> List.of("succeeded", "failed", "canceled").contains(status(id)));
    return status(id);
  }

  private JsonNode build(long id) {
    return t.api.get("/api/v1/builds/" + id).json();
  }

  private static String text(long id) {
    StringBuilder b = new StringBuilder();
    for (Map<String, Object> l :
        Sql.rows("SELECT text FROM oneshot.build_logs WHERE build_id = ? ORDER BY seq", id)) {
      b.append(l.get("text")).append('\n');
    }
    return b.toString();
  }

  /** A version of the workspace's checkpoint, read back through the API (it is sealed). */
  private JsonNode checkpoint(String workspace, int version) {
    Api.Response r =
        t.api.get("/api/v1/workspaces/state?workspace=" + workspace + "&version=" + version);
    assertThat(r.status()).as(r.text()).isEqualTo(200);
    return Json.tree(r.text());
  }

  /** The URNs and ids of a checkpoint's resources, the stack's own left out. */
  private static Map<String, String> resources(JsonNode checkpoint) {
    Map<String, String> out = new HashMap<>();
    for (JsonNode r : checkpoint.path("checkpoint").path("latest").path("resources")) {
      if (!r.path("type").asText().equals("pulumi:pulumi:Stack")) {
        out.put(r.path("urn").asText(), r.path("id").asText());
      }
    }
    return out;
  }

  @Test
  void upKeepsTheCheckpointThatTheNextUpContinuesAndDestroyEmpties() {
    long first = submit("web-dev", "dev", "up", program(TWO));
    assertThat(awaitEnd(first)).as(text(first)).isEqualTo("succeeded");
    JsonNode b1 = build(first);
    assertThat(b1.path("stateWritten").asInt()).isEqualTo(1);
    assertThat(b1.path("outputs").path("region").path("value").asText()).isEqualTo("eu-west-3");
    assertThat(b1.path("outputs").path("password").path("sensitive").asBoolean()).isTrue();
    assertThat(b1.path("outputs").path("password").has("value")).isFalse();
    assertThat(Json.write(b1)).doesNotContain("hunter2");
    assertThat(text(first)).doesNotContain("hunter2").contains("dbPassword=***");
    assertThat(Sql.value("SELECT format FROM oneshot.workspace_states WHERE workspace = 'web-dev'"))
        .isEqualTo("pulumi");
    assertThat(
            t.api
                .get("/api/v1/workspaces/states?workspace=web-dev")
                .json()
                .at("/versions/0/format")
                .asText())
        .isEqualTo("pulumi");
    JsonNode v1 = checkpoint("web-dev", 1);
    assertThat(PulumiCheckpoint.problem(v1.get("version"), v1.path("checkpoint"))).isNull();
    assertThat(v1.path("checkpoint").path("stack").asText()).isEqualTo("organization/web/dev");
    Map<String, String> made = resources(v1);
    assertThat(made)
        .containsOnlyKeys(
            "urn:pulumi:dev::web::command:local:Command::bucket",
            "urn:pulumi:dev::web::command:local:Command::queue");
    assertThat(v1.path("checkpoint").path("latest").has("pending_operations")).isFalse();

    // The next update starts from that checkpoint: nothing to create, the same resources.
    long second = submit("web-dev", "dev", "up", program(TWO));
    assertThat(awaitEnd(second)).as(text(second)).isEqualTo("succeeded");
    assertThat(build(second).path("stateRead").asInt()).isEqualTo(1);
    assertThat(build(second).path("what").asText()).isEqualTo("pulumi up dev");
    assertThat(resources(checkpoint("web-dev", 2))).isEqualTo(made);
    // The stack keeps the secrets provider it was made with: its salt, in the stack's settings
    // file that no pod keeps, comes back from the checkpoint.
    String salt = "/checkpoint/latest/secrets_providers/state/salt";
    assertThat(v1.at(salt).asText()).startsWith("v1:");
    assertThat(checkpoint("web-dev", 2).at(salt).asText()).isEqualTo(v1.at(salt).asText());

    // A preview writes nothing.
    long preview = submit("web-dev", "dev", "preview", program(TWO));
    assertThat(awaitEnd(preview)).isEqualTo("succeeded");
    assertThat(build(preview).path("stateWritten").isNull()).isTrue();

    long gone = submit("web-dev", "dev", "destroy", program(TWO));
    assertThat(awaitEnd(gone)).as(text(gone)).isEqualTo("succeeded");
    assertThat(build(gone).path("stateWritten").asInt()).isEqualTo(3);
    assertThat(resources(checkpoint("web-dev", 3))).isEmpty();
  }

  @Test
  void manyStacksOfOneProjectUpdateAtOnceEachIntoItsOwnWorkspace() {
    List<Long> ids = new ArrayList<>();
    int stacks = 12;
    for (int i = 0; i < stacks; i++) {
      ids.add(submit("web-s" + i, "s" + i, "up", program(TWO)));
    }
    for (long id : ids) {
      assertThat(awaitEnd(id)).as(text(id)).isEqualTo("succeeded");
    }
    for (int i = 0; i < stacks; i++) {
      JsonNode cp = checkpoint("web-s" + i, 1);
      assertThat(cp.path("checkpoint").path("stack").asText()).isEqualTo("organization/web/s" + i);
      assertThat(resources(cp))
          .containsKey("urn:pulumi:s" + i + "::web::command:local:Command::bucket");
    }
    // They ran side by side, up to the route's limit.
    assertThat(
            Sql.count(
                "SELECT count(*) FROM oneshot.builds a JOIN oneshot.builds b ON a.id < b.id"
                    + " WHERE a.started_at < b.finished_at AND b.started_at < a.finished_at"))
        .isPositive();
  }

  @Test
  void cancelSendsSigintOnceAndKeepsWhatPulumiSaved() throws Exception {
    long id = submit("web-cancel", "cancel", "up", program(SLOW));
    await()
        .atMost(2, TimeUnit.MINUTES)
        .until(() -> text(id).contains("command:local:Command second creating"));
    assertThat(t.api.post("/api/v1/builds/" + id + "/cancel", "{}").status()).isEqualTo(202);
    assertThat(awaitEnd(id)).as(text(id)).isEqualTo("canceled");
    String log = text(id);
    assertThat(log).contains("sending SIGINT").contains("^C received; cancelling");
    assertThat(log)
        .doesNotContain("received; terminating")
        .doesNotContain("did not stop within the grace period");
    // Pulumi finished the step in flight, saved, and stopped: first and second, not third.
    JsonNode cp = checkpoint("web-cancel", 1);
    assertThat(resources(cp))
        .containsOnlyKeys(
            "urn:pulumi:cancel::web::command:local:Command::first",
            "urn:pulumi:cancel::web::command:local:Command::second");
    assertThat(cp.path("checkpoint").path("latest").has("pending_operations")).isFalse();

    long again = submit("web-cancel", "cancel", "up", program(SLOW));
    assertThat(awaitEnd(again)).as(text(again)).isEqualTo("succeeded");
    assertThat(resources(checkpoint("web-cancel", 2))).hasSize(3);
    assertThat(
            resources(checkpoint("web-cancel", 2))
                .get("urn:pulumi:cancel::web::command:local:Command::first"))
        .isEqualTo(resources(cp).get("urn:pulumi:cancel::web::command:local:Command::first"));
  }

  @Test
  void aProgramFromGitAtARefItsCommitSaid() throws Exception {
    Path repo = Files.createDirectories(tmp.resolve("repo"));
    Git.run(repo, "init", "-q", "-b", "main", ".");
    Files.createDirectories(repo.resolve("infra"));
    Files.writeString(repo.resolve("infra/Pulumi.yaml"), program(TWO));
    Git.run(repo, "add", ".");
    Git.run(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one");
    String commit = Git.run(repo, "rev-parse", "HEAD").strip();
    // A later commit on main that the build does not ask for.
    Files.writeString(repo.resolve("infra/Pulumi.yaml"), "name: other\nruntime: yaml\n");
    Git.run(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "two");

    ObjectNode input = Json.MAPPER.createObjectNode();
    input.put("provisioner", "pulumi");
    input.put("project", "web");
    input.put("stack", "git");
    input.putObject("git").put("url", "file://" + repo).put("ref", commit).put("path", "infra");
    input.putObject("config").put("region", "r").put("dbPassword", "p");
    long id = submit("web-git", input);
    assertThat(awaitEnd(id)).as(text(id)).isEqualTo("succeeded");
    assertThat(text(id)).contains("(commit " + commit + ")");
    assertThat(resources(checkpoint("web-git", 1))).hasSize(2);

    // main now names another project: refused before Pulumi runs, naming both.
    ((ObjectNode) input.get("git")).put("ref", "main");
    long other = submit("web-git", input);
    assertThat(awaitEnd(other)).isEqualTo("failed");
    assertThat(build(other).path("error").asText())
        .isEqualTo(
            "the program's Pulumi.yaml names project other, but the build asks for project web");

    // A ref the repository does not have fails in the source stage.
    ((ObjectNode) input.get("git")).put("ref", "no-such-branch");
    long missing = submit("web-git", input);
    assertThat(awaitEnd(missing)).isEqualTo("failed");
    assertThat(build(missing).path("error").asText())
        .startsWith("cannot fetch file://" + repo + " at no-such-branch (git fetch exit code");
  }

  @Test
  void aNodeProgramInstallsItsDependenciesAsAStageFirst() throws Exception {
    ObjectNode input = Json.MAPPER.createObjectNode();
    input.put("provisioner", "pulumi");
    input.put("project", "web");
    input.put("stack", "node");
    ObjectNode files = input.putObject("files");
    files.put("Pulumi.yaml", "name: web\nruntime: nodejs\nresources: {}\noutputs: {}\n");
    files.put("package.json", "{\"name\": \"web\", \"version\": \"1.0.0\"}");

    // By default, npm ci: without a lock file it refuses, and the build says so.
    long npm = submit("web-node", input);
    assertThat(awaitEnd(npm)).isEqualTo("failed");
    assertThat(build(npm).path("error").asText())
        .startsWith("the install step (npm ci) failed (exit code ");
    assertThat(text(npm)).contains("install started: npm ci");

    // The route's own install command.
    env.put(
        "ONESHOT_PULUMI_INSTALL",
        "mkdir -p node_modules/@pulumi/pulumi && echo installed dependencies, passphrase"
            + " $PULUMI_CONFIG_PASSPHRASE");
    start();
    long id = submit("web-node", input);
    assertThat(awaitEnd(id)).as(text(id)).isEqualTo("succeeded");
    assertThat(text(id)).contains("install started: mkdir").contains("installed dependencies");
    // The route's passphrase is masked wherever it shows.
    assertThat(text(id)).contains("passphrase ***").doesNotContain("correct horse");
    assertThat(text(id)).containsPattern("install finished in \\d+ ms");

    // None at all: Pulumi's language host says what is missing.
    env.put("ONESHOT_PULUMI_INSTALL", "");
    start();
    long bare = submit("web-node2", input);
    assertThat(awaitEnd(bare)).isEqualTo("failed");
    assertThat(build(bare).path("error").asText())
        .isEqualTo(
            "pulumi up failed (exit code 255): It looks like the Pulumi SDK has not been"
                + " installed. Have you run npm install or yarn install?");
  }

  private static final String SLOW =
      """
      first:
        type: command:local:Command
        properties: {create: echo first}
      second:
        type: command:local:Command
        properties: {create: sleep 3}
      third:
        type: command:local:Command
        properties: {create: echo third}
      """;

  private static ObjectNode pulumiInput(String stack, String resources) {
    ObjectNode input = Json.MAPPER.createObjectNode();
    input.put("provisioner", "pulumi");
    input.put("project", "web");
    input.put("stack", stack);
    input.putObject("files").put("Pulumi.yaml", program(resources));
    input.putObject("config").put("region", "r").put("dbPassword", "p");
    return input;
  }

  /**
   * SIGTERM to provisionerd (a drain, a deleted pod) is not a cancel: Pulumi is left alone, the
   * update runs to its end, and its checkpoint is kept whole.
   */
  @Test
  void sigtermToProvisionerdLetsTheUpdateRunToItsEnd() throws Exception {
    long id = submit("web-term", pulumiInput("term", SLOW));
    await()
        .atMost(2, TimeUnit.MINUTES)
        .until(() -> text(id).contains("command:local:Command second creating"));
    long provisionerd =
        ((LocalLauncher) t.server.launcher()).pid("oneshot-" + id + "-1").orElseThrow();
    new ProcessBuilder("kill", "-TERM", Long.toString(provisionerd)).start().waitFor();
    assertThat(awaitEnd(id)).as(text(id)).isEqualTo("succeeded");
    assertThat(text(id))
        .contains("provisionerd got SIGTERM")
        .doesNotContain("received; cancelling");
    assertThat(resources(checkpoint("web-term", 1))).hasSize(3);
  }

  /**
   * provisionerd stopped mid-update (frozen, its attempt then killed as hung): what Pulumi saved
   * before is in the workspace already, uploaded as Pulumi saved it, not only at the end.
   */
  @Test
  void aProvisionerdStoppedMidUpdateLosesNothingPulumiSavedBefore() throws Exception {
    ObjectNode hang = Json.MAPPER.createObjectNode().put("speed", "hang");
    long id = submit("web-hang", pulumiInput("hang", SLOW.replace("sleep 3", "sleep 30")), hang);
    // The checkpoint with the first resource made is stored while Pulumi works on the second.
    await()
        .atMost(2, TimeUnit.MINUTES)
        .until(
            () ->
                t.api.get("/api/v1/workspaces/state?workspace=web-hang").status() == 200
                    && resources(
                            Json.tree(
                                t.api.get("/api/v1/workspaces/state?workspace=web-hang").text()))
                        .containsKey("urn:pulumi:hang::web::command:local:Command::first"));
    long provisionerd =
        ((LocalLauncher) t.server.launcher()).pid("oneshot-" + id + "-1").orElseThrow();
    new ProcessBuilder("kill", "-STOP", Long.toString(provisionerd)).start().waitFor();
    assertThat(awaitEnd(id)).isEqualTo("failed");
    assertThat(build(id).path("error").asText()).startsWith("provisionerd stopped reporting");
    JsonNode cp = checkpoint("web-hang", 1);
    assertThat(resources(cp))
        .containsOnlyKeys("urn:pulumi:hang::web::command:local:Command::first");
    assertThat(cp.at("/checkpoint/latest/pending_operations/0/type").asText())
        .isEqualTo("creating");
  }
}
