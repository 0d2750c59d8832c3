package io.oneshot.e2e;

import static io.oneshot.testing.TestServer.status;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import io.oneshot.api.Json;
import io.oneshot.launch.local.LocalLauncher;
import io.oneshot.testing.Api;
import io.oneshot.testing.Git;
import io.oneshot.testing.Heavy;
import io.oneshot.testing.Sql;
import io.oneshot.testing.TerraformOnPath;
import io.oneshot.testing.TestServer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Real terraform builds through the local launcher, with the built-in {@code terraform_data}
 * resource and {@code local-exec}, which need nothing from the network.
 */
@Heavy
class TerraformTest {
  private static final String ROUTES =
      """
      routes:
        - {name: tf, maxConcurrent: 4, cancelGrace: 20s}
        - {name: short, tags: {speed: short}, timeout: 8s, cancelGrace: 2s}
        - {name: hang, tags: {speed: hang}, hangTimeout: 2s, cancelGrace: 2s}
      """;

  private TestServer t;
  @TempDir Path tmp;

  @BeforeAll
  static void needTerraform() {
    TerraformOnPath.assume();
  }

  @AfterEach
  void tearDown() {
    if (t != null) {
      t.close();
    }
  }

  private void start() {
    t = TestServer.with().routes(ROUTES).start();
  }

  /** Enqueues a terraform build of {@code main.tf} on a workspace; returns its id. */
  private long submit(String tags, String workspace, String mainTf, String transition) {
    String body =
        "{\"tags\": "
            + tags
            + ", \"workspace\": "
            + (workspace == null ? "null" : Json.write(workspace))
            + ", \"input\": {\"provisioner\": \"terraform\", \"transition\": \""
            + transition
            + "\", \"variables\": {\"name\": \"first\"}, \"files\": {\"main.tf\": "
            + Json.write(mainTf)
            + "}}}";
    Api.Response r = t.api.post("/api/v1/builds", body);
    assertThat(r.status()).as(r.text()).isEqualTo(201);
    return r.json().path("id").asLong();
  }

  private JsonNode build(long id) {
    return t.api.get("/api/v1/builds/" + id).json();
  }

  private String awaitEnd(long id) {
    await()
        .atMost(2, TimeUnit.MINUTES)
        .until(() -> List.of("succeeded", "failed", "canceled").contains(status(id)));
    return status(id);
  }

  private static List<Map<String, Object>> log(long id) {
    return Sql.rows(
        "SELECT stream, level, stage, text FROM oneshot.build_logs WHERE build_id = ? ORDER BY seq",
        id);
  }

  private static boolean logged(long id, String fragment) {
    return Sql.count(
            "SELECT count(*) FROM oneshot.build_logs WHERE build_id = ? AND text LIKE ?",
            id,
            "%" + fragment + "%")
        > 0;
  }

  private static JsonNode state(String workspace, int version) {
    return Json.tree(
        (String)
            Sql.value(
                "SELECT state FROM oneshot.workspace_states WHERE workspace = ? AND version = ?",
                workspace,
                version));
  }

  private static List<String> resources(JsonNode state) {
    List<String> out = new ArrayList<>();
    for (JsonNode r : state.path("resources")) {
      for (JsonNode i : r.path("instances")) {
        out.add(
            r.path("type").asText()
                + "."
                + r.path("name").asText()
                + (i.hasNonNull("status") ? " (" + i.path("status").asText() + ")" : ""));
      }
    }
    return out;
  }

  private static final String MODULE =
      """
      variable "name" { type = string }
      resource "terraform_data" "a" { input = "a" }
      resource "terraform_data" "b" { input = var.name }
      output "name" { value = terraform_data.b.output }
      output "secret" {
        value     = "s3cr3t"
        sensitive = true
      }
      """;

  /**
   * Terraform runs as in automation (no prompts, no upgrade checks to a host it cannot reach), with
   * the provider cache the launcher was given: what its local-exec sees of its environment.
   */
  @Test
  void terraformRunsNonInteractiveWithoutCheckpointAndWithThePluginCache() throws Exception {
    Path cache = tmp.resolve("plugin-cache");
    t =
        TestServer.with()
            .routes(ROUTES)
            .launcherYaml(
                "{kind: local, local: {runDir: \""
                    + tmp.resolve("runs")
                    + "\", pluginCacheDir: \""
                    + cache
                    + "\", isolation: none}}")
            .start();
    Path seen = tmp.resolve("env.txt");
    long id =
        submit(
            "{}",
            null,
            """
            variable "name" { type = string }
            resource "terraform_data" "env" {
              provisioner "local-exec" { command = "env > %s" }
            }
            """
                .formatted(seen),
            "apply");
    assertThat(awaitEnd(id)).isEqualTo("succeeded");
    assertThat(java.nio.file.Files.readAllLines(seen))
        .contains(
            "TF_IN_AUTOMATION=1",
            "TF_INPUT=0",
            "CHECKPOINT_DISABLE=1",
            "TF_PLUGIN_CACHE_DIR=" + cache.toAbsolutePath());
    assertThat(cache).isDirectory();
    // Without a workspace, the log says the state is not kept.
    assertThat(log(id))
        .anySatisfy(
            l -> {
              assertThat(l.get("level")).isEqualTo("warn");
              assertThat((String) l.get("text"))
                  .startsWith("no workspace: terraform's state is not kept");
            });
  }

  @Test
  void applyKeepsStateThatTheNextBuildReusesAndDestroyEmpties() {
    start();
    long first = submit("{}", "ws-apply", MODULE, "apply");
    assertThat(awaitEnd(first)).isEqualTo("succeeded");
    JsonNode b1 = build(first);
    assertThat(b1.path("stateRead").asInt()).isZero();
    assertThat(b1.path("stateWritten").asInt()).isEqualTo(1);
    assertThat(b1.path("outputs").path("name").path("value").asText()).isEqualTo("first");
    assertThat(b1.path("outputs").path("secret").path("sensitive").asBoolean()).isTrue();
    assertThat(b1.path("outputs").path("secret").has("value")).isFalse();
    assertThat(Json.write(b1)).doesNotContain("s3cr3t");
    assertThat(resources(state("ws-apply", 1)))
        .containsExactly("terraform_data.a", "terraform_data.b");
    assertThat(log(first))
        .anySatisfy(
            l -> {
              assertThat(l.get("stage")).isEqualTo("apply");
              assertThat(l.get("level")).isEqualTo("info");
              assertThat((String) l.get("text")).contains("terraform_data.a: Creation complete");
            });
    assertThat(log(first)).extracting(l -> l.get("stage")).contains("init", "plan", "apply");
    assertThat(logged(first, "no workspace")).isFalse();

    long second = submit("{}", "ws-apply", MODULE, "apply");
    assertThat(awaitEnd(second)).isEqualTo("succeeded");
    assertThat(build(second).path("stateRead").asInt()).isEqualTo(1);
    assertThat(
            logged(second, "Plan: 0 to add, 0 to change, 0 to destroy")
                || logged(second, "No changes"))
        .isTrue();
    assertThat(logged(second, "Creation complete")).isFalse();

    long gone = submit("{}", "ws-apply", MODULE, "destroy");
    assertThat(awaitEnd(gone)).isEqualTo("succeeded");
    JsonNode b3 = build(gone);
    assertThat(b3.path("stateRead").asInt()).isEqualTo(1);
    assertThat(b3.path("stateWritten").asInt()).isEqualTo(2);
    assertThat(resources(state("ws-apply", 2))).isEmpty();
    assertThat(logged(gone, "Destruction complete")).isTrue();
    // History is kept.
    assertThat(
            Sql.count("SELECT count(*) FROM oneshot.workspace_states WHERE workspace = 'ws-apply'"))
        .isEqualTo(2);
    JsonNode versions = t.api.get("/api/v1/workspaces/states?workspace=ws-apply").json();
    assertThat(versions.path("versions")).hasSize(2);
    assertThat(versions.path("versions").get(0).path("buildId").asLong()).isEqualTo(gone);
  }

  @Test
  void badHclFailsWithTerraformsError() {
    start();
    long id =
        submit("{}", "ws-bad", "resource \"terraform_data\" \"a\" {\n  input = \n}\n", "apply");
    assertThat(awaitEnd(id)).isEqualTo("failed");
    JsonNode b = build(id);
    assertThat(b.path("error").asText()).startsWith("terraform init failed (exit code 1): ");
    assertThat(log(id)).anySatisfy(l -> assertThat(l.get("level")).isEqualTo("error"));
    assertThat(b.path("stateWritten").isNull()).isTrue();
  }

  @Test
  void aFailingApplyKeepsThePartialState() {
    start();
    String module =
        """
        variable "name" { type = string }
        resource "terraform_data" "a" { input = "made" }
        resource "terraform_data" "b" {
          depends_on = [terraform_data.a]
          provisioner "local-exec" { command = "echo about to fail; exit 1" }
        }
        """;
    long id = submit("{}", "ws-fail", module, "apply");
    assertThat(awaitEnd(id)).isEqualTo("failed");
    JsonNode b = build(id);
    assertThat(b.path("error").asText())
        .startsWith("terraform apply failed (exit code 1): local-exec provisioner error");
    assertThat(logged(id, "about to fail")).isTrue();
    assertThat(b.path("stateWritten").asInt()).isEqualTo(1);
    assertThat(resources(state("ws-fail", 1))).contains("terraform_data.a");
  }

  private String slowModule(Path marker) {
    return """
        variable "name" { type = string }
        resource "terraform_data" "a" { input = "before the slow one" }
        resource "terraform_data" "slow" {
          depends_on = [terraform_data.a]
          provisioner "local-exec" { command = "echo $$ > %s; exec sleep 120" }
        }
        """
        .formatted(marker);
  }

  private static long pidIn(Path file) throws Exception {
    await()
        .atMost(2, TimeUnit.MINUTES)
        .until(() -> Files.exists(file) && !Files.readString(file).isBlank());
    return Long.parseLong(Files.readString(file).strip());
  }

  private static boolean gone(long pid) {
    return ProcessHandle.of(pid).map(h -> !h.isAlive()).orElse(true);
  }

  /** A module from git: fetched at the build's ref, in the path it names, its state kept. */
  @Test
  void aModuleFromGitRunsAtItsRefAndPath() throws Exception {
    start();
    Path repo = java.nio.file.Files.createDirectories(tmp.resolve("repo"));
    Git.run(repo, "init", "-q", "-b", "main", ".");
    java.nio.file.Files.createDirectories(repo.resolve("envs/dev"));
    java.nio.file.Files.writeString(repo.resolve("envs/dev/main.tf"), MODULE);
    Git.run(repo, "add", ".");
    Git.run(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one");
    Git.run(repo, "tag", "v1");
    java.nio.file.Files.writeString(repo.resolve("envs/dev/main.tf"), "this is not HCL {");
    Git.run(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "broken");
    String body =
        "{\"workspace\": \"ws-git\", \"input\": {\"provisioner\": \"terraform\","
            + " \"variables\": {\"name\": \"from-git\"}, \"git\": {\"url\": "
            + Json.write("file://" + repo)
            + ", \"ref\": \"v1\", \"path\": \"envs/dev\"}}}";
    Api.Response r = t.api.post("/api/v1/builds", body);
    assertThat(r.status()).as(r.text()).isEqualTo(201);
    long id = r.json().path("id").asLong();
    assertThat(awaitEnd(id)).as(log(id).toString()).isEqualTo("succeeded");
    assertThat(build(id).path("outputs").path("name").path("value").asText()).isEqualTo("from-git");
    assertThat(resources(state("ws-git", 1)))
        .containsExactly("terraform_data.a", "terraform_data.b");
    assertThat(log(id)).anySatisfy(l -> assertThat(l.get("stage")).isEqualTo("source"));
    assertThat(logged(id, "fetched file://" + repo + " at v1 (commit ")).isTrue();
  }

  @Test
  void cancelInterruptsTerraformAndKeepsThePartialState() throws Exception {
    start();
    Path marker = tmp.resolve("slow.pid");
    long id = submit("{}", "ws-cancel", slowModule(marker), "apply");
    long sleeper = pidIn(marker);
    long asked = System.nanoTime();
    assertThat(t.api.post("/api/v1/builds/" + id + "/cancel", "{}").status()).isEqualTo(202);
    assertThat(awaitEnd(id)).isEqualTo("canceled");
    assertThat((System.nanoTime() - asked) / 1_000_000_000).isLessThan(20);
    assertThat(log(id))
        .anySatisfy(
            l ->
                assertThat((String) l.get("text"))
                    .startsWith("cancel requested; sending SIGINT to process"));
    assertThat(logged(id, "Interrupt received")).as("terraform saw the SIGINT").isTrue();
    JsonNode b = build(id);
    assertThat(b.path("stateWritten").asInt()).isEqualTo(1);
    assertThat(resources(state("ws-cancel", 1))).contains("terraform_data.a");
    await().atMost(20, TimeUnit.SECONDS).until(() -> gone(sleeper));
  }

  @Test
  void theRouteTimeoutStopsTerraformAndFailsTheBuild() throws Exception {
    start();
    Path marker = tmp.resolve("slow.pid");
    long id = submit("{\"speed\": \"short\"}", "ws-timeout", slowModule(marker), "apply");
    long sleeper = pidIn(marker);
    assertThat(awaitEnd(id)).isEqualTo("failed");
    assertThat(build(id).path("error").asText()).isEqualTo("timed out after 8s");
    await().atMost(20, TimeUnit.SECONDS).until(() -> gone(sleeper));
    assertThat(resources(state("ws-timeout", 1))).contains("terraform_data.a");
  }

  @Test
  void aProvisionerdThatStopsReportingFailsAsHungAndNothingIsLeftRunning() throws Exception {
    start();
    Path marker = tmp.resolve("slow.pid");
    long id = submit("{\"speed\": \"hang\"}", "ws-hang", slowModule(marker), "apply");
    long sleeper = pidIn(marker);
    LocalLauncher launcher = (LocalLauncher) t.server.launcher();
    long provisionerd = launcher.pid("oneshot-" + id + "-1").orElseThrow();
    List<Long> tree = new ArrayList<>();
    ProcessHandle.of(provisionerd).ifPresent(h -> h.descendants().forEach(d -> tree.add(d.pid())));
    new ProcessBuilder("kill", "-STOP", Long.toString(provisionerd)).start().waitFor();

    assertThat(awaitEnd(id)).isEqualTo("failed");
    assertThat(build(id).path("error").asText())
        .startsWith("provisionerd stopped reporting: no heartbeat for")
        // lease 1s (half the hang timeout) + cancel grace 2s + the rescuer's 15s margin
        .endsWith("(the limit is 18s); its attempt was killed");
    await().atMost(20, TimeUnit.SECONDS).until(() -> gone(provisionerd) && gone(sleeper));
    await().atMost(20, TimeUnit.SECONDS).until(() -> tree.stream().allMatch(TerraformTest::gone));
    assertThat(logged(id, "provisionerd stopped reporting")).isTrue();
  }

  /**
   * SIGTERM to provisionerd (what a drain or a deleted pod sends) is not a cancel: the apply under
   * way runs to its end, whatever the signal, and its state is kept whole.
   */
  @Test
  void sigtermToProvisionerdLetsTheApplyRunToItsEnd() throws Exception {
    start();
    Path marker = tmp.resolve("slow.pid");
    String module =
        """
        variable "name" { type = string }
        resource "terraform_data" "a" { input = "before the slow one" }
        resource "terraform_data" "slow" {
          depends_on = [terraform_data.a]
          provisioner "local-exec" { command = "echo $$ > %s; sleep 3" }
        }
        """
            .formatted(marker);
    long id = submit("{}", "ws-term", module, "apply");
    pidIn(marker);
    long provisionerd =
        ((LocalLauncher) t.server.launcher()).pid("oneshot-" + id + "-1").orElseThrow();
    new ProcessBuilder("kill", "-TERM", Long.toString(provisionerd)).start().waitFor();
    assertThat(awaitEnd(id)).isEqualTo("succeeded");
    assertThat(logged(id, "provisionerd got SIGTERM")).isTrue();
    assertThat(logged(id, "Interrupt received")).as("terraform was left alone").isFalse();
    assertThat(resources(state("ws-term", 1))).contains("terraform_data.a", "terraform_data.slow");
  }
}
